// Package policy holds the repository's rules about itself as tests: the
// layers packages import along (layers_test.go), how tests may skip,
// which fuzz targets `make fuzz` runs, and that no code derives time from
// the wall clock. It has no code of its own.
package policy
