// Package policy holds the repository's rules about itself as tests: the
// package map of docs/ARCHITECTURE.md names every package and nothing
// else (packagemap_test.go), packages import along the layers that map
// gives them (layers_test.go), how tests may skip, which fuzz targets
// `make fuzz` runs, that no code derives time from the wall clock, that
// the generated references (docs/reference) match the code, that the
// documents' TOML examples load, that Markdown links resolve, and that no
// code or document names an issue number. It has no code of its own.
package policy
