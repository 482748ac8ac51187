// Package privilege checks, at start, the privileges the daemon runs
// with (least privilege: CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON, CAP_NET_RAW
// only) and the exposure of the AgentX socket it talks to, and says what
// is wrong in the log.
package privilege

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The daemon needs exactly these capabilities (docs/reference/privileges.md); numbers from linux/capability.h.
var neededCaps = []struct {
	name string
	bit  uint
}{{"CAP_NET_ADMIN", 12}, {"CAP_NET_RAW", 13}, {"CAP_PERFMON", 38}, {"CAP_BPF", 39}}

const capSysAdmin = 21

// LogCapabilities says at start which of the needed capabilities the
// daemon lacks (it will fail to attach or to open sockets) and whether it
// holds CAP_SYS_ADMIN, which it never needs.
func LogCapabilities(log *slog.Logger) {
	eff, err := effectiveCaps()
	if err != nil {
		log.Warn("cannot read the process capabilities", "err", err)
		return
	}
	var missing []string
	for _, c := range neededCaps {
		if eff&(1<<c.bit) == 0 {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		log.Warn("missing capabilities: attaching the sampler or opening sockets will fail",
			"missing", strings.Join(missing, ","), "effective", fmt.Sprintf("%#x", eff))
	}
	if eff&(1<<capSysAdmin) != 0 {
		log.Info("running with CAP_SYS_ADMIN, which the daemon does not need; CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON and CAP_NET_RAW suffice (packaging/sflowswitchd.service)")
	}
}

// effectiveCaps reads CapEff of /proc/self/status.
func effectiveCaps() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading /proc/self/status: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no CapEff in /proc/self/status")
}

// CheckAgentXSocket warns when the AgentX socket, or the directory holding
// it, is writable by every local user: anyone could then connect to
// snmpd as a subagent and register (and answer for) any MIB subtree,
// the SFLOW-MIB included. snmpd sets them with agentXPerms.
func CheckAgentXSocket(log *slog.Logger, path string) {
	for _, p := range []string{path, filepath.Dir(path)} {
		fi, err := os.Stat(p)
		if err != nil {
			continue // not there yet: checked again on connection
		}
		sticky := fi.IsDir() && fi.Mode()&os.ModeSticky != 0
		if fi.Mode().Perm()&0o002 != 0 && !sticky {
			log.Warn("AgentX socket is world-writable: any local user can register MIB subtrees with snmpd; set agentXPerms 0660 0750 in snmpd.conf",
				"path", p, "mode", fmt.Sprintf("%#o", fi.Mode().Perm()))
		}
	}
}
