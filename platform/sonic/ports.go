package sonic

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Tables and fields of the ports (mod_sonic.c; sonic-buildimage
// dockers/docker-sflow/port_index_mapper.py).
const (
	portNameMap      = "COUNTERS_PORT_NAME_MAP"
	portTable        = "PORT_TABLE"
	lagTable         = "LAG_TABLE"
	portIndexTable   = "PORT_INDEX_TABLE"
	fieldIndex       = "index"
	fieldOSIndex     = "ifindex"
	fieldSpeed       = "speed"
	fieldAlias       = "alias"
	fieldAdminStatus = "admin_status"
	fieldOperStatus  = "oper_status"
)

// Port is a SONiC port or LAG.
type Port struct {
	Name string
	// Index is SONiC's ifIndex (PORT_INDEX_TABLE index, else port_util's
	// rule from the name: Ethernet0 → 1, PortChannel0001 → 1001).
	Index uint32
	// OSIndex is the Linux ifindex of the port's netdev
	// (PORT_INDEX_TABLE ifindex); 0 when unknown.
	OSIndex uint32
	// OID is the port's SAI object id (COUNTERS_PORT_NAME_MAP), the key
	// of its counters; "" for a LAG.
	OID string
	// SpeedMbps is PORT_TABLE speed (a LAG: its members' sum); 0 unknown.
	SpeedMbps       uint64
	Alias           string
	AdminUp, OperUp bool
	// LAG is the name of the LAG the port is a member of ("" none).
	LAG string
	// Members are a LAG's member ports (nil for a port).
	Members []string
	// LACP is a LAG member's LACP state (zero for others).
	LACP LACP
}

// IsLAG tells whether p is a LAG (PortChannel).
func (p *Port) IsLAG() bool { return p.Members != nil }

// port_util's name patterns and index bases (sonic-py-common
// sonic_py_common/port_util.py, get_index_from_str).
var portUtil = []struct {
	re   *regexp.Regexp
	base uint32
}{
	{regexp.MustCompile(`^Ethernet(\d+)$`), 1},
	{regexp.MustCompile(`^Ethernet-BP(\d+)$`), 9000},
	{regexp.MustCompile(`^Vlan(\d+)$`), 2000},
	{regexp.MustCompile(`^PortChannel(\d+)$`), 1000},
	{regexp.MustCompile(`^eth(\d+)$`), 10000},
	{regexp.MustCompile(`^Ethernet-IB(\d+)$`), 11000},
	{regexp.MustCompile(`^Ethernet-Rec(\d+)$`), 12000},
}

// PortUtilIndex is port_util.get_index_from_str: the ifIndex SONiC gives
// an interface by its name (Ethernet N → N+1, PortChannel N → N+1000,
// Vlan N → N+2000, ...); false for a name it does not know.
func PortUtilIndex(name string) (uint32, bool) {
	for _, p := range portUtil {
		if m := p.re.FindStringSubmatch(name); m != nil {
			n, err := strconv.ParseUint(m[1], 10, 32)
			if err != nil || n > 1<<31 {
				return 0, false
			}
			return uint32(n) + p.base, true
		}
	}
	return 0, false
}

// portInputs are the hashes the ports are read from.
type portInputs struct {
	nameMap map[string]string            // COUNTERS_PORT_NAME_MAP
	ports   map[string]map[string]string // PORT_TABLE, by port name
	lags    map[string]map[string]string // LAG_TABLE, by LAG name
	index   map[string]map[string]string // PORT_INDEX_TABLE, by port name
	members map[string][]string          // PORTCHANNEL_MEMBER: LAG → members
	// LAG_MEMBER_TABLE of STATE_DB (teamd's, by "<lag><sep><member>")
	// and APPL_DB (teamsyncd's).
	memberState, memberAppl map[string]map[string]string
	// keys of the tables, for problems
	applSep, stateSep, configSep string
}

// parsePorts builds the ports and LAGs, sorted by ifIndex.
func parsePorts(in portInputs, ps *problems) []Port {
	names := make([]string, 0, len(in.nameMap))
	for n := range in.nameMap {
		names = append(names, n)
	}
	sort.Strings(names)
	used := map[uint32]string{}
	byName := map[string]*Port{}
	var out []*Port
	for _, name := range names {
		oid := in.nameMap[name]
		if oid == "" || strings.ContainsAny(oid, " *?[") {
			ps.add(CountersDB, portNameMap, name, oid, "not a SAI object id; port skipped")
			continue
		}
		p := &Port{Name: name, OID: oid}
		ikey := portIndexTable + in.stateSep + name
		idx := in.index[name]
		if v, ok := idx[fieldIndex]; ok {
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 || n >= 1<<31 {
				ps.add(StateDB, ikey, fieldIndex, v, "not an ifIndex; port_util's index used")
			} else {
				p.Index = uint32(n)
			}
		}
		if p.Index == 0 {
			n, ok := PortUtilIndex(name)
			if !ok {
				ps.add(StateDB, ikey, fieldIndex, "", "no ifIndex in PORT_INDEX_TABLE and none by port_util's rule; port skipped")
				continue
			}
			p.Index = n
		}
		if v, ok := idx[fieldOSIndex]; ok {
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 || n >= 1<<31 {
				ps.add(StateDB, ikey, fieldOSIndex, v, "not a Linux ifindex; the netdev is found by name")
			} else {
				p.OSIndex = uint32(n)
			}
		}
		if other, dup := used[p.Index]; dup {
			ps.add(StateDB, ikey, fieldIndex, strconv.FormatUint(uint64(p.Index), 10), "ifIndex already %s's; port skipped", other)
			continue
		}
		pkey := portTable + in.applSep + name
		readStatus(p, in.ports[name], ApplDB, pkey, ps)
		used[p.Index] = name
		byName[name] = p
		out = append(out, p)
	}
	lagNames := make([]string, 0, len(in.members))
	for l := range in.members {
		lagNames = append(lagNames, l)
	}
	sort.Strings(lagNames)
	for _, name := range lagNames {
		key := portchannelMember + in.configSep + name
		idx, ok := PortUtilIndex(name)
		if !ok || !strings.HasPrefix(name, "PortChannel") {
			ps.add(ConfigDB, key, "", name, "not a PortChannel name; LAG skipped")
			continue
		}
		if other, dup := used[idx]; dup {
			ps.add(ConfigDB, key, "", name, "ifIndex %d already %s's; LAG skipped", idx, other)
			continue
		}
		lag := &Port{Name: name, Index: idx, Members: []string{}}
		for _, m := range in.members[name] {
			mp := byName[m]
			if mp == nil {
				ps.add(ConfigDB, key+in.configSep+m, "", m, "no such port; member skipped")
				continue
			}
			if mp.LAG != "" {
				ps.add(ConfigDB, key+in.configSep+m, "", m, "already a member of %s; member skipped", mp.LAG)
				continue
			}
			mp.LAG = name
			skey, akey := name+in.stateSep+m, name+in.applSep+m
			mp.LACP = readLACP(in.memberState[skey], in.memberAppl[akey], lagMemberTable+in.stateSep+skey, lagMemberTable+in.applSep+akey, ps)
			lag.Members = append(lag.Members, m)
			lag.SpeedMbps += mp.SpeedMbps
		}
		sort.Strings(lag.Members)
		if h, ok := in.lags[name]; ok {
			speed := lag.SpeedMbps
			readStatus(lag, h, ApplDB, lagTable+in.applSep+name, ps)
			lag.SpeedMbps = speed
		} else {
			// No LAG_TABLE entry (teamd not up yet): up while a member is.
			for _, m := range lag.Members {
				lag.AdminUp = lag.AdminUp || byName[m].AdminUp
				lag.OperUp = lag.OperUp || byName[m].OperUp
			}
		}
		used[idx] = name
		out = append(out, lag)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	res := make([]Port, len(out))
	for i, p := range out {
		res[i] = *p
	}
	return res
}

// readStatus reads speed, alias and status fields of a PORT_TABLE or
// LAG_TABLE entry; a bad speed leaves it unknown.
func readStatus(p *Port, h map[string]string, db, key string, ps *problems) {
	if v, ok := h[fieldSpeed]; ok {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > 10_000_000 {
			ps.add(db, key, fieldSpeed, v, "not a speed in Mb/s; speed unknown")
		} else {
			p.SpeedMbps = n
		}
	}
	p.Alias = h[fieldAlias]
	p.AdminUp = h[fieldAdminStatus] == "up"
	p.OperUp = h[fieldOperStatus] == "up"
}
