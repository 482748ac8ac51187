package psample

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The generic-netlink names of net/psample/psample.c.
const (
	FamilyName  = "psample" // PSAMPLE_GENL_NAME
	GroupConfig = "config"  // PSAMPLE_NL_MCGRP_CONFIG_NAME
	GroupPacket = "packets" // PSAMPLE_NL_MCGRP_SAMPLE_NAME
)

// Family is the psample family as the running kernel numbers it.
type Family struct {
	ID uint16
	// Packets is the id of the "packets" multicast group; Config the id
	// of the "config" group, where the kernel announces every group made
	// or freed (0: unknown).
	Packets, Config uint32
}

// ErrNoPsample is returned when the kernel has no psample family (module
// psample not loaded, and not loadable: CONFIG_PSAMPLE off).
var ErrNoPsample = errors.New("the kernel has no psample generic-netlink family (CONFIG_PSAMPLE, module psample)")

// GetFamily resolves the psample family in the calling thread's network
// namespace (generic-netlink families are global; the request loads the
// psample module when it is available and not loaded).
func GetFamily() (Family, error) {
	f, err := netlink.GenlFamilyGet(FamilyName)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, os.ErrNotExist) {
			return Family{}, ErrNoPsample
		}
		return Family{}, fmt.Errorf("resolving generic-netlink family %s: %w", FamilyName, err)
	}
	fam := Family{ID: f.ID}
	for _, g := range f.Groups {
		switch g.Name {
		case GroupPacket:
			fam.Packets = g.ID
		case GroupConfig:
			fam.Config = g.ID
		}
	}
	if fam.Packets == 0 {
		return Family{}, fmt.Errorf("generic-netlink family %s has no %q multicast group", FamilyName, GroupPacket)
	}
	return fam, nil
}

// ProbePsample is the feature probe of the psample channel: nil when the
// family resolves.
func ProbePsample() error {
	_, err := GetFamily()
	return err
}

// ErrNoActSample is returned by ProbeActSample when the kernel has no
// sample action.
var ErrNoActSample = errors.New("the kernel has no tc sample action (CONFIG_NET_ACT_SAMPLE, module act_sample)")

// ProbeActSample is the feature probe of tc's sample action: nil when the
// module is loaded, built in, or installed for the running kernel (tc
// loads it on first use, request_module("act_sample")). The module files
// are the probe because asking tc for an action creates one.
func ProbeActSample() error {
	if _, err := os.Stat("/sys/module/act_sample"); err == nil {
		return nil
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("uname: %w", err)
	}
	dir := filepath.Join("/lib/modules", unix.ByteSliceToString(u.Release[:]))
	for _, f := range []string{"modules.builtin", "modules.dep"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		if strings.Contains(string(b), "/act_sample.ko") {
			return nil
		}
	}
	return ErrNoActSample
}
