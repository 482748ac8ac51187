package bpf

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// loadCaps are the capabilities loading and attaching the samplers needs
// (docs/OPERATIONS.md "Privileges"), with their names.
var loadCaps = []struct {
	bit  int
	name string
}{{unix.CAP_BPF, "CAP_BPF"}, {unix.CAP_NET_ADMIN, "CAP_NET_ADMIN"}, {unix.CAP_PERFMON, "CAP_PERFMON"}}

// missingLoadCaps returns the names of loadCaps the calling thread's
// effective set lacks (all of them when it cannot be read).
func missingLoadCaps() []string {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	err := unix.Capget(&hdr, &data[0])
	var out []string
	for _, c := range loadCaps {
		if err != nil || data[c.bit/32].Effective&(1<<(c.bit%32)) == 0 {
			out = append(out, c.name)
		}
	}
	return out
}

// LoadError wraps an error of loading a program with what was loaded; a
// verifier error keeps its whole log (%+v), the one thing that says why
// the kernel refused the program.
//
// A load refused for lack of privilege while a capability the samplers
// need is missing (the verifier denies pointer arithmetic, helpers and
// its speculative-execution paths without CAP_PERFMON, with EACCES and
// its whole log: kernel/bpf/verifier.c) is one short error naming the
// capabilities missing instead, as a feature probe's refusal is.
func LoadError(what string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		if missing := missingLoadCaps(); len(missing) > 0 {
			errno := unix.EPERM
			if errors.Is(err, unix.EACCES) {
				errno = unix.EACCES
			}
			return fmt.Errorf("%s: not permitted: the process lacks %s (%w)", what, strings.Join(missing, " and "), errno)
		}
	}
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

// ProgramName is the name of the kernel's BPF program id (whose it is, for
// the cleanups and KernelAttachment that tell ours from others').
func ProgramName(id uint32) (string, error) {
	p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return "", fmt.Errorf("opening program %d: %w", id, err)
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil {
		return "", fmt.Errorf("program %d info: %w", id, err)
	}
	return info.Name, nil
}
