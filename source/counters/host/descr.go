package host

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// readDescr fills host_descr (spec "struct host_descr", format 2000):
//   - hostname: /proc/sys/kernel/hostname (what os.Hostname returns on
//     Linux), "" = unknown;
//   - uuid: /sys/class/dmi/id/product_uuid, else /etc/machine-id, else
//     all zeros = unknown (see readUUID);
//   - machine_type: runtime.GOARCH mapped to the spec's enumeration;
//   - os_name: linux;
//   - os_release: /proc/sys/kernel/osrelease (uname -r), "" = unknown.
//
// The spec bounds hostname to 64 and os_release to 32 bytes; the sflow
// encoder truncates longer values.
func (r *Reader) readDescr() error {
	d := &r.descr
	d.MachineType = machineType(runtime.GOARCH)
	d.OSName = sflow.OSNameLinux
	if !r.uuidKnown {
		d.UUID, r.uuidKnown = r.readUUID()
	}
	var errs []error
	if err := readString(&r.hostname, &d.Hostname); err != nil {
		errs = append(errs, fmt.Errorf("host_descr hostname: %w", err))
	}
	if err := readString(&r.osRelease, &d.OSRelease); err != nil {
		errs = append(errs, fmt.Errorf("host_descr os_release: %w", err))
	}
	return errors.Join(errs...)
}

// readString sets *dst to the trimmed content of f, or "" if f cannot be
// read. It only allocates when the value changed.
func readString(f *procFile, dst *string) error {
	b, err := f.read()
	if err != nil {
		*dst = ""
		return err
	}
	b = bytes.TrimSpace(b)
	if string(b) != *dst {
		*dst = string(b)
	}
	return nil
}

// readUUID returns the host's 16-byte UUID and whether one was found:
// the SMBIOS system UUID from /sys/class/dmi/id/product_uuid (printed by
// the kernel in canonical 8-4-4-4-12 form, readable by root only), else
// the 128-bit /etc/machine-id (32 hex digits, systemd's stable host id).
// A host with neither reports zeros, the "unknown" value. Both are
// optional sources, so their absence is not an error. An all-zero or
// all-0xff SMBIOS UUID (unset by the vendor) is skipped.
func (r *Reader) readUUID() ([16]byte, bool) {
	for _, p := range [...]string{
		filepath.Join(r.opts.SysRoot, "class/dmi/id/product_uuid"),
		filepath.Join(r.opts.EtcRoot, "machine-id"),
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if u, ok := parseUUID(b); ok {
			return u, true
		}
	}
	return [16]byte{}, false
}

// parseUUID parses 32 hex digits, optionally separated by dashes.
func parseUUID(b []byte) (u [16]byte, ok bool) {
	var digits [32]byte
	n := 0
	for _, c := range bytes.TrimSpace(b) {
		if c == '-' {
			continue
		}
		if n == len(digits) {
			return u, false
		}
		digits[n] = c
		n++
	}
	if n != len(digits) {
		return u, false
	}
	if _, err := hex.Decode(u[:], digits[:]); err != nil {
		return [16]byte{}, false
	}
	if u == ([16]byte{}) || u == [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff} {
		return [16]byte{}, false
	}
	return u, true
}

// machineType maps a GOARCH to the spec's machine_type ("enum
// machine_type"). Families the enumeration lacks (riscv64, loong64, ...)
// are "other"; 64-bit ARM is "arm" and all MIPS and POWER variants are
// "mips" and "powerpc", as the enumeration names families, not ABIs.
func machineType(goarch string) sflow.MachineType {
	switch goarch {
	case "386":
		return sflow.MachineTypeX86
	case "amd64":
		return sflow.MachineTypeX86_64
	case "arm", "arm64":
		return sflow.MachineTypeARM
	case "ppc64", "ppc64le":
		return sflow.MachineTypePowerPC
	case "mips", "mipsle", "mips64", "mips64le":
		return sflow.MachineTypeMIPS
	case "s390x":
		return sflow.MachineTypeS390
	case "sparc64":
		return sflow.MachineTypeSPARC
	case "":
		return sflow.MachineTypeUnknown
	default:
		return sflow.MachineTypeOther
	}
}
