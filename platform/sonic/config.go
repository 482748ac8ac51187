package sonic

import (
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Field names and values of CONFIG_DB's sFlow tables (sonic-swss
// cfgmgr/sflowmgr.cpp, doc/sflow/sflow_hld.md, host-sflow mod_sonic.c).
const (
	sflowGlobal        = "SFLOW"
	sflowCollector     = "SFLOW_COLLECTOR"
	deviceMetadata     = "DEVICE_METADATA"
	portchannelMember  = "PORTCHANNEL_MEMBER"
	fieldAdminState    = "admin_state"
	fieldPolling       = "polling_interval"
	fieldAgentID       = "agent_id"
	fieldDirection     = "sample_direction"
	fieldDropLimit     = "drop_monitor_limit"
	fieldMaxHeader     = "max_header_size"
	fieldCollectorIP   = "collector_ip"
	fieldCollectorPort = "collector_port"
	fieldCollectorVRF  = "collector_vrf"
	fieldMAC           = "mac"
)

// DefaultPolling is the polling interval when SFLOW|global has none
// (mod_sonic.c HSP_SONIC_DEFAULT_POLLING_INTERVAL); polling_interval is 0
// (off) or MinPolling..MaxPolling seconds (sflow_hld.md, "config sflow
// polling-interval").
const (
	DefaultPolling = 20
	MinPolling     = 5
	MaxPolling     = 300
	// DefaultCollectorPort is a collector's port when collector_port is
	// absent or 0 (mod_sonic.c: port=0 means the default).
	DefaultCollectorPort = 6343
	// MgmtVRF is the management VRF: its collectors are sent through the
	// device of that name (SO_BINDTODEVICE), as hsflowd's collector dev.
	MgmtVRF = "mgmt"
)

// Config is the sFlow configuration in CONFIG_DB. Absent settings are
// zero (Polling: -1).
type Config struct {
	// AdminUp is SFLOW|global admin_state = up (absent or anything
	// else: down, nothing is sent).
	AdminUp bool
	// Polling is polling_interval in seconds, DefaultPolling when absent
	// or refused.
	Polling int
	// AgentID is agent_id: the interface whose address is the agent
	// address ("" = chosen).
	AgentID string
	// Direction is sample_direction: "rx", "tx" or "both" ("" = rx).
	Direction string
	// MaxHeaderSize is max_header_size in bytes (0 = not set).
	MaxHeaderSize int
	// DropMonitorLimit is drop_monitor_limit per second (0 = not set).
	DropMonitorLimit int
	// Collectors are SFLOW_COLLECTOR's valid entries, by name.
	Collectors []Collector
	// MAC is DEVICE_METADATA|localhost mac (nil when absent or bad).
	MAC net.HardwareAddr
}

// Collector is one SFLOW_COLLECTOR|<name>.
type Collector struct {
	Name string
	Addr netip.AddrPort
	// Device is the device datagrams are sent through: MgmtVRF for
	// collector_vrf mgmt, "" for the default VRF.
	Device string
}

// parseConfig reads the sFlow configuration from CONFIG_DB's hashes
// (key → fields), sep being CONFIG_DB's separator.
func parseConfig(hashes map[string]map[string]string, sep string, ps *problems) Config {
	c := Config{Polling: DefaultPolling}
	g := hashes[sflowGlobal+sep+"global"]
	c.AdminUp = g[fieldAdminState] == "up"
	key := sflowGlobal + sep + "global"
	if v, ok := g[fieldPolling]; ok {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			ps.add(ConfigDB, key, fieldPolling, v, "not a number; polling every %d s", DefaultPolling)
		case n != 0 && (n < MinPolling || n > MaxPolling):
			ps.add(ConfigDB, key, fieldPolling, v, "outside 0 or %d..%d s; polling every %d s", MinPolling, MaxPolling, DefaultPolling)
		default:
			c.Polling = n
		}
	}
	if v, ok := g[fieldAgentID]; ok {
		if validIfName(v) {
			c.AgentID = v
		} else {
			ps.add(ConfigDB, key, fieldAgentID, v, "not an interface name; the agent address is chosen")
		}
	}
	if v, ok := g[fieldDirection]; ok {
		switch v {
		case "rx", "tx", "both":
			c.Direction = v
		default:
			ps.add(ConfigDB, key, fieldDirection, v, "not rx, tx or both; sampling rx")
		}
	}
	if v, ok := g[fieldMaxHeader]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 64 || n > 256 {
			ps.add(ConfigDB, key, fieldMaxHeader, v, "not a size of 64..256 bytes; not applied")
		} else {
			c.MaxHeaderSize = n
		}
	}
	if v, ok := g[fieldDropLimit]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			ps.add(ConfigDB, key, fieldDropLimit, v, "not a rate of 1..10000 per second; not applied")
		} else {
			c.DropMonitorLimit = n
		}
	}
	if v, ok := hashes[deviceMetadata+sep+"localhost"][fieldMAC]; ok {
		if mac, err := net.ParseMAC(v); err == nil && len(mac) == 6 {
			c.MAC = mac
		} else {
			ps.add(ConfigDB, deviceMetadata+sep+"localhost", fieldMAC, v, "not a MAC address")
		}
	}
	prefix := sflowCollector + sep
	var names []string
	for k := range hashes {
		if strings.HasPrefix(k, prefix) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		if col, ok := parseCollector(k, strings.TrimPrefix(k, prefix), hashes[k], ps); ok {
			c.Collectors = append(c.Collectors, col)
		}
	}
	return c
}

// parseCollector reads one SFLOW_COLLECTOR entry; a bad one is skipped
// whole.
func parseCollector(key, name string, h map[string]string, ps *problems) (Collector, bool) {
	c := Collector{Name: name}
	v := h[fieldCollectorIP]
	ip, err := netip.ParseAddr(v)
	if err != nil || ip.Zone() != "" || ip.IsUnspecified() || ip.IsMulticast() {
		ps.add(ConfigDB, key, fieldCollectorIP, v, "not a unicast IPv4 or IPv6 address; collector skipped")
		return c, false
	}
	port := DefaultCollectorPort
	if v, ok := h[fieldCollectorPort]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 65535 {
			ps.add(ConfigDB, key, fieldCollectorPort, v, "not a UDP port; collector skipped")
			return c, false
		}
		if n != 0 {
			port = n
		}
	}
	switch v := h[fieldCollectorVRF]; v {
	case "", "default":
	case MgmtVRF:
		c.Device = MgmtVRF
	default:
		ps.add(ConfigDB, key, fieldCollectorVRF, v, "unknown VRF (default or mgmt); collector skipped")
		return c, false
	}
	c.Addr = netip.AddrPortFrom(ip.Unmap(), uint16(port))
	return c, true
}

// validIfName tells whether s can be a Linux interface name.
func validIfName(s string) bool {
	if s == "" || len(s) > 15 || s == "." || s == ".." {
		return false
	}
	return !strings.ContainsAny(s, "/ \t\n:")
}
