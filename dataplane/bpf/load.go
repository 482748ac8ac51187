package bpf

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
)

// LoadError wraps an error of loading a program with what was loaded; a
// verifier error keeps its whole log (%+v), the one thing that says why
// the kernel refused the program.
func LoadError(what string, err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return fmt.Errorf("%s: %+v", what, ve)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// FirstLine is an error's first line, at most 300 bytes, for a log line
// or a metric: a loader's error can carry a whole BTF or verifier dump
// (LoadError).
func FirstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
