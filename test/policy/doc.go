// Package policy holds the repository's rules about itself as tests: how
// tests may skip, which fuzz targets `make fuzz` runs. It has no code of
// its own.
package policy
