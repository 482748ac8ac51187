package bpf

import (
	"errors"
	"fmt"

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
