package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/sflowswitchd/sflowswitchd/config"
	"github.com/sflowswitchd/sflowswitchd/daemon/internal/collectoraddr"
	"github.com/sflowswitchd/sflowswitchd/dataplane/ports"
	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
)

// TestManagementPortLeftOut: with no ports setting, the interface of the
// agent address and the default route's are left out of the sampled
// ports (a switch's eth0); a ports setting samples what it lists.
func TestManagementPortLeftOut(t *testing.T) {
	ns := fmt.Sprintf("op-mgmt-%d", os.Getpid())
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run("-n", ns, "link", "add", "mgmt0", "type", "veth", "peer", "name", "mgmt1")
	run("-n", ns, "link", "add", "p1", "type", "veth", "peer", "name", "p2")
	for _, l := range []string{"mgmt0", "mgmt1", "p1", "p2"} {
		run("-n", ns, "link", "set", l, "up")
	}
	run("-n", ns, "addr", "add", "198.18.210.1/30", "dev", "mgmt0")
	run("-n", ns, "addr", "add", "198.18.211.1/24", "dev", "p1")
	run("-n", ns, "route", "add", "default", "via", "198.18.210.2")

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	res := collectoraddr.NewResolver(log, func() {})
	model := func(s config.Settings) (names, mgmt []string) {
		t.Helper()
		err := netnsutil.DoNamed(ns, func() error {
			links, err := netlink.LinkList()
			if err != nil {
				return err
			}
			var present []ports.Info
			for _, l := range links {
				if a := l.Attrs(); a.Name != "lo" {
					present = append(present, ports.Info{Index: a.Index, Name: a.Name, Up: true})
				}
			}
			m, err := buildModel(s, present, res, log)
			if err != nil {
				return err
			}
			byIndex := map[uint32]string{}
			for _, p := range present {
				byIndex[uint32(p.Index)] = p.Name
			}
			for _, p := range m.Ports {
				names = append(names, byIndex[p.IfIndex])
			}
			mgmt = m.Management
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		return names, mgmt
	}
	s := config.Defaults()
	s.Collectors = []config.Collector{{Address: "198.18.210.2"}}
	// The agent address ranks mgmt0's first (lower ifindex), which the
	// default route also uses.
	if names, mgmt := model(s); !slices.Equal(names, []string{"mgmt1", "p1", "p2"}) || !slices.Equal(mgmt, []string{"mgmt0"}) {
		t.Errorf("default selection: sampled %v, left out %v; want [mgmt1 p1 p2], [mgmt0]", names, mgmt)
	}
	// The agent address on p1: p1 and the default route's mgmt0 out.
	s.AgentAddress = "198.18.211.1"
	names, mgmt := model(s)
	slices.Sort(mgmt)
	if !slices.Equal(names, []string{"mgmt1", "p2"}) || !slices.Equal(mgmt, []string{"mgmt0", "p1"}) {
		t.Errorf("agent address on p1: sampled %v, left out %v; want [mgmt1 p2], [mgmt0 p1]", names, mgmt)
	}
	// A ports setting samples what it lists.
	s.Ports = []string{"*"}
	if names, mgmt := model(s); !slices.Equal(names, []string{"mgmt0", "mgmt1", "p1", "p2"}) || len(mgmt) != 0 {
		t.Errorf("ports = [\"*\"]: sampled %v, left out %v; want every port, none", names, mgmt)
	}
}
