package linkstats

// Interface counters for the sFlow if_counters and ethernet_counters
// structures (sFlow v5 "Counter Data Types", formats 1 and 2).
//
// Sources on Linux:
//   - packet/byte/error/drop counters: netlink RTM_GETLINK, IFLA_STATS64
//     (struct rtnl_link_stats64), 64-bit, the same numbers `ip -s link`
//     prints;
//   - speed and duplex: the ethtool ioctl (ETHTOOL_GLINKSETTINGS, then the
//     legacy ETHTOOL_GSET), then /sys/class/net/NAME/speed and duplex;
//   - admin/oper status and promiscuity: the same RTM_GETLINK answer;
//   - dot3 (EtherLike-MIB) counters: driver statistics (ETHTOOL_GSTATS)
//     under the names listed in dot3StatNames, when the driver has them.
//
// Linux keeps no per-device broadcast counters, no outgoing multicast
// counter and no unknown-protocol counter (frames with an unknown
// EtherType are counted in rx_dropped; rx_nohandler only counts frames on
// inactive bond slaves). Those fields are UnknownCounter, which the sFlow
// encoder writes as the maximum counter value: sFlow v5 says "Unknown
// counter. Use the maximum counter value to indicate that the counter is
// not available."

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/netnsutil"
)

// UnknownCounter marks a counter the interface does not provide. Truncated
// to 32 bits it is 0xFFFFFFFF, sFlow's "counter not available" value.
const UnknownCounter uint64 = math.MaxUint64

// Duplex is an interface's duplex mode, numbered like sFlow's ifDirection
// (if_counters: 0 = unknown, 1 = full-duplex, 2 = half-duplex).
type Duplex uint32

// Duplex modes.
const (
	DuplexUnknown Duplex = 0
	DuplexFull    Duplex = 1
	DuplexHalf    Duplex = 2
)

// String returns "full", "half" or "unknown".
func (d Duplex) String() string {
	switch d {
	case DuplexFull:
		return "full"
	case DuplexHalf:
		return "half"
	}
	return "unknown"
}

// Counters is one reading of an interface's counters and state.
type Counters struct {
	Index int    // ifindex
	Name  string // interface name at the time of the reading

	// From IFLA_STATS64 (struct rtnl_link_stats64), all 64-bit.
	RxBytes     uint64 // rx_bytes
	RxPackets   uint64 // rx_packets (unicast + multicast + broadcast)
	RxMulticast uint64 // multicast: received multicast frames, broadcast not included; UnknownCounter for drivers that never count it (veth)
	RxErrors    uint64 // rx_errors
	RxDropped   uint64 // rx_dropped (also frames with an unknown protocol)
	TxBytes     uint64 // tx_bytes
	TxPackets   uint64 // tx_packets
	TxErrors    uint64 // tx_errors
	TxDropped   uint64 // tx_dropped

	// Not kept by Linux: always UnknownCounter.
	RxBroadcast     uint64
	TxMulticast     uint64
	TxBroadcast     uint64
	RxUnknownProtos uint64

	// SpeedMbps is the link speed in Mb/s, 0 if the driver does not say
	// (sFlow ifSpeed is an integer: 0 means unknown; ifSpeed = SpeedMbps*1e6).
	SpeedMbps uint64
	Duplex    Duplex

	AdminUp bool // IFF_UP
	// OperUp: operstate UP, or operstate UNKNOWN with carrier
	// (IFF_LOWER_UP), as for drivers that do not report an operstate.
	OperUp bool
	// Promiscuous: the device accepts all frames: IFF_PROMISC set by a
	// user, or a promiscuity count > 0 (bridge ports, packet sniffers).
	Promiscuous bool
}

// EthernetCounters are the dot3 counters of sFlow ethernet_counters
// (RFC 2358 dot3Stats*). A field the driver does not provide is
// UnknownCounter.
type EthernetCounters struct {
	AlignmentErrors           uint64
	FCSErrors                 uint64
	SingleCollisionFrames     uint64
	MultipleCollisionFrames   uint64
	SQETestErrors             uint64
	DeferredTransmissions     uint64
	LateCollisions            uint64
	ExcessiveCollisions       uint64
	InternalMacTransmitErrors uint64
	CarrierSenseErrors        uint64
	FrameTooLongs             uint64
	InternalMacReceiveErrors  uint64
	SymbolErrors              uint64
}

// dot3StatNames maps driver statistic names (ETHTOOL_GSTRINGS of
// ETH_SS_STATS) to dot3 counters. Names come from drivers that expose
// IEEE 802.3 MAC counters (e1000/e1000e/igb "rx_align_errors",
// "tx_single_coll_ok", ...; ixgbe/i40e/bnxt/mlx5 style names) and from the
// IEEE 802.3 names ethtool uses for its standard MAC statistics. The first
// name the driver has wins.
var dot3StatNames = []struct {
	field func(*EthernetCounters) *uint64
	names []string
}{
	{func(c *EthernetCounters) *uint64 { return &c.AlignmentErrors }, []string{"AlignmentErrors", "rx_align_errors", "rx_alignment_errors"}},
	{func(c *EthernetCounters) *uint64 { return &c.FCSErrors }, []string{"FrameCheckSequenceErrors", "rx_crc_errors", "rx_fcs_errors", "rx_crc_errors_phy"}},
	{func(c *EthernetCounters) *uint64 { return &c.SingleCollisionFrames }, []string{"SingleCollisionFrames", "tx_single_coll_ok", "tx_single_collisions"}},
	{func(c *EthernetCounters) *uint64 { return &c.MultipleCollisionFrames }, []string{"MultipleCollisionFrames", "tx_multi_coll_ok", "tx_multiple_collisions"}},
	{func(c *EthernetCounters) *uint64 { return &c.SQETestErrors }, []string{"SQETestErrors", "tx_sqe_test_errors"}},
	{func(c *EthernetCounters) *uint64 { return &c.DeferredTransmissions }, []string{"FramesWithDeferredXmissions", "tx_deferred_ok", "tx_deferred"}},
	{func(c *EthernetCounters) *uint64 { return &c.LateCollisions }, []string{"LateCollisions", "tx_late_collisions", "tx_window_errors"}},
	{func(c *EthernetCounters) *uint64 { return &c.ExcessiveCollisions }, []string{"FramesAbortedDueToXSColls", "tx_excessive_collisions", "tx_aborted_errors"}},
	{func(c *EthernetCounters) *uint64 { return &c.InternalMacTransmitErrors }, []string{"FramesLostDueToIntMACXmitError", "tx_mac_errors"}},
	{func(c *EthernetCounters) *uint64 { return &c.CarrierSenseErrors }, []string{"CarrierSenseErrors", "tx_carrier_errors", "tx_carrier_sense_errors"}},
	{func(c *EthernetCounters) *uint64 { return &c.FrameTooLongs }, []string{"FrameTooLongErrors", "rx_long_length_errors", "rx_frame_too_long_errors"}},
	{func(c *EthernetCounters) *uint64 { return &c.InternalMacReceiveErrors }, []string{"FramesLostDueToIntMACRcvError", "rx_mac_errors"}},
	{func(c *EthernetCounters) *uint64 { return &c.SymbolErrors }, []string{"SymbolErrorDuringCarrier", "rx_symbol_errors", "rx_symbol_err"}},
}

// ethernetFromStats picks the dot3 counters out of a driver's statistics;
// ok is false when the driver has none of them.
func ethernetFromStats(names []string, values []uint64) (c EthernetCounters, ok bool) {
	byName := make(map[string]uint64, len(names))
	for i, n := range names {
		if i < len(values) {
			byName[n] = values[i]
		}
	}
	for _, d := range dot3StatNames {
		p := d.field(&c)
		*p = UnknownCounter
		for _, n := range d.names {
			if v, found := byName[n]; found {
				*p, ok = v, true
				break
			}
		}
	}
	return c, ok
}

// Reader reads counters of the links of one network namespace.
// It keeps a netlink socket and an ethtool socket open in that namespace,
// so a poller can read many ports cheaply. Not safe for concurrent use.
type Reader struct {
	nl      *netlink.Handle
	ethtool int // AF_INET datagram socket for SIOCETHTOOL, in the namespace
	current bool
	// raw is a netlink socket in the namespace for RTM_GETSTATS
	// requests (l2stats.go), which the library's handle cannot send.
	raw *nl.NetlinkSocket
}

// NewReader opens a reader for namespace ns; ns <= 0 means the
// namespace of the calling thread.
func NewReader(ns netns.NsHandle) (*Reader, error) {
	h, ethtool, err := OpenSockets(ns)
	if err != nil {
		return nil, fmt.Errorf("linkstats: %w", err)
	}
	sns := ns
	if sns <= 0 {
		sns = netns.None() // the calling thread's namespace, as the others
	}
	raw, err := nl.GetNetlinkSocketAt(sns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		h.Close()
		unix.Close(ethtool)
		return nil, fmt.Errorf("linkstats: netlink stats socket: %w", err)
	}
	return &Reader{nl: h, ethtool: ethtool, current: ns <= 0, raw: raw}, nil
}

// OpenSockets opens a netlink route socket and an ethtool ioctl socket
// (AF_INET datagram, for SIOCETHTOOL) in namespace ns (ns <= 0: the
// calling thread's).
func OpenSockets(ns netns.NsHandle) (*netlink.Handle, int, error) {
	var (
		h   *netlink.Handle
		err error
	)
	if ns <= 0 {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	} else {
		h, err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	}
	if err != nil {
		return nil, -1, fmt.Errorf("netlink socket: %w", err)
	}
	fd, err := socketInNetns(ns, unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		h.Close()
		return nil, -1, fmt.Errorf("ethtool socket: %w", err)
	}
	return h, fd, nil
}

// Close releases the reader's sockets.
func (r *Reader) Close() error {
	r.nl.Close()
	r.raw.Close()
	if err := unix.Close(r.ethtool); err != nil {
		return fmt.Errorf("linkstats: close ethtool socket: %w", err)
	}
	return nil
}

// Read returns the counters and state of link ifindex.
func (r *Reader) Read(ifindex int) (Counters, error) {
	link, err := r.nl.LinkByIndex(ifindex)
	if err != nil {
		return Counters{}, fmt.Errorf("linkstats: link %d: %w", ifindex, err)
	}
	a := link.Attrs()
	c := Counters{
		Index:           a.Index,
		Name:            a.Name,
		RxBroadcast:     UnknownCounter,
		TxMulticast:     UnknownCounter,
		TxBroadcast:     UnknownCounter,
		RxUnknownProtos: UnknownCounter,
		AdminUp:         a.Flags&net.FlagUp != 0,
		OperUp:          OperUp(a),
		Promiscuous:     a.Promisc > 0 || a.RawFlags&unix.IFF_PROMISC != 0,
	}
	if s := a.Statistics; s != nil {
		c.RxBytes, c.RxPackets, c.RxMulticast = s.RxBytes, s.RxPackets, s.Multicast
		c.RxErrors, c.RxDropped = s.RxErrors, s.RxDropped
		c.TxBytes, c.TxPackets = s.TxBytes, s.TxPackets
		c.TxErrors, c.TxDropped = s.TxErrors, s.TxDropped
	}
	if !countsMulticast(link) {
		c.RxMulticast = UnknownCounter
	}
	c.SpeedMbps, c.Duplex = r.speedDuplex(a)
	return c, nil
}

// countsMulticast is false for drivers whose multicast statistic is always
// 0 whatever they receive: veth (veth_get_stats64 never sets it; measured:
// multicast frames through a veth leave it at 0, while the bridge behind it
// counts them). Reporting that 0 would be a made-up value.
func countsMulticast(l netlink.Link) bool {
	return l.Type() != "veth"
}

// OperUp reports RFC 2863 ifOperStatus up: operstate UP, or UNKNOWN (the
// driver does not track it) while the device has carrier.
func OperUp(a *netlink.LinkAttrs) bool {
	return a.OperState == netlink.OperUp ||
		(a.OperState == netlink.OperUnknown && a.RawFlags&unix.IFF_LOWER_UP != 0)
}

// speedDuplex asks ethtool, then sysfs. Both answer "unknown" (0,
// DuplexUnknown) when the driver does not report a speed.
func (r *Reader) speedDuplex(a *netlink.LinkAttrs) (uint64, Duplex) {
	speed, duplex, err := EthtoolLinkSettings(r.ethtool, a.Name)
	if err == nil {
		return speed, duplex
	}
	if r.current {
		return sysfsSpeedDuplex(a)
	}
	return 0, DuplexUnknown
}

// Ethernet returns the dot3 counters of link ifindex from its driver
// statistics; ok is false when the driver exposes none (veth, bridge,
// loopback, most virtual devices).
func (r *Reader) Ethernet(ifindex int) (EthernetCounters, bool, error) {
	link, err := r.nl.LinkByIndex(ifindex)
	if err != nil {
		return EthernetCounters{}, false, fmt.Errorf("linkstats: link %d: %w", ifindex, err)
	}
	names, values, err := ethtoolStats(r.ethtool, link.Attrs().Name)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP) {
		return EthernetCounters{}, false, nil
	}
	if err != nil {
		return EthernetCounters{}, false, fmt.Errorf("linkstats: %s: %w", link.Attrs().Name, err)
	}
	c, ok := ethernetFromStats(names, values)
	return c, ok, nil
}

// ReadCounters reads the counters of link ifindex in namespace ns
// (ns <= 0: the calling thread's namespace). Pollers reading many ports
// should keep a Reader instead.
func ReadCounters(ns netns.NsHandle, ifindex int) (Counters, error) {
	r, err := NewReader(ns)
	if err != nil {
		return Counters{}, err
	}
	c, err := r.Read(ifindex)
	if cerr := r.Close(); err == nil && cerr != nil {
		return c, cerr
	}
	return c, err
}

// ReadEthernetCounters reads the dot3 counters of link ifindex in namespace
// ns; ok is false when the driver has none (for example veth).
func ReadEthernetCounters(ns netns.NsHandle, ifindex int) (c EthernetCounters, ok bool, err error) {
	r, err := NewReader(ns)
	if err != nil {
		return EthernetCounters{}, false, err
	}
	c, ok, err = r.Ethernet(ifindex)
	if cerr := r.Close(); err == nil && cerr != nil {
		return c, ok, cerr
	}
	return c, ok, err
}

// socketInNetns opens a socket in namespace ns (ns <= 0: the calling
// thread's). A socket stays in the namespace it was created in, so only
// the creation runs in ns.
func socketInNetns(ns netns.NsHandle, domain, typ, proto int) (int, error) {
	fd := -1
	err := netnsutil.Do(ns, func() error {
		var err error
		fd, err = unix.Socket(domain, typ, proto)
		return err
	})
	if err != nil && fd >= 0 {
		unix.Close(fd) // opened, but the thread could not leave ns
		fd = -1
	}
	return fd, err
}

// hostEndian is the byte order of the kernel's ethtool structures.
var hostEndian = binary.NativeEndian

// ethtoolIfreq is struct ifreq with ifr_data, as SIOCETHTOOL expects.
type ethtoolIfreq struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte // ifreq is 40 bytes
}

// ethtoolIoctl runs SIOCETHTOOL on device name with buf as the command
// structure (its first u32 is the command).
func ethtoolIoctl(fd int, name string, buf []byte) error {
	if len(name) >= unix.IFNAMSIZ {
		return fmt.Errorf("interface name %q too long", name)
	}
	var ifr ethtoolIfreq
	copy(ifr.name[:], name)
	ifr.data = unsafe.Pointer(&buf[0])
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(buf)
	if errno != 0 {
		return errno
	}
	return nil
}

const (
	ethtoolSpeedUnknown  = 0xFFFFFFFF // SPEED_UNKNOWN (-1)
	ethtoolDuplexHalf    = 0x00
	ethtoolDuplexFull    = 0x01
	ethtoolLinkSettingsV = 48 // sizeof(struct ethtool_link_settings)
	ethtoolCmdSize       = 44 // sizeof(struct ethtool_cmd)
	ethtoolGstringLen    = 32 // ETH_GSTRING_LEN
	ethtoolSSStats       = 1  // ETH_SS_STATS
)

// EthtoolLinkSettings returns speed (Mb/s, 0 = unknown) and duplex from
// ETHTOOL_GLINKSETTINGS, or from ETHTOOL_GSET on drivers without it.
func EthtoolLinkSettings(fd int, name string) (uint64, Duplex, error) {
	// struct ethtool_link_settings: cmd u32 @0, speed u32 @4, duplex u8 @8,
	// link_mode_masks_nwords s8 @15, then 3 masks of nwords u32 each after
	// the 48-byte header. The first call (nwords 0) makes the kernel
	// answer with -nwords; the second call passes nwords.
	buf := make([]byte, ethtoolLinkSettingsV+3*127*4)
	hostEndian.PutUint32(buf[0:], unix.ETHTOOL_GLINKSETTINGS)
	err := ethtoolIoctl(fd, name, buf)
	if err == nil && int8(buf[15]) < 0 {
		nwords := -int8(buf[15])
		clear(buf)
		hostEndian.PutUint32(buf[0:], unix.ETHTOOL_GLINKSETTINGS)
		buf[15] = byte(nwords)
		err = ethtoolIoctl(fd, name, buf)
	}
	if err == nil {
		return ethtoolSpeed(hostEndian.Uint32(buf[4:])), ethtoolDuplex(buf[8]), nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) {
		return 0, DuplexUnknown, fmt.Errorf("ETHTOOL_GLINKSETTINGS %s: %w", name, err)
	}
	// struct ethtool_cmd: speed u16 @12, duplex u8 @14, speed_hi u16 @28.
	cmd := make([]byte, ethtoolCmdSize)
	hostEndian.PutUint32(cmd[0:], unix.ETHTOOL_GSET)
	if err := ethtoolIoctl(fd, name, cmd); err != nil {
		return 0, DuplexUnknown, fmt.Errorf("ETHTOOL_GSET %s: %w", name, err)
	}
	speed := uint32(hostEndian.Uint16(cmd[28:]))<<16 | uint32(hostEndian.Uint16(cmd[12:]))
	return ethtoolSpeed(speed), ethtoolDuplex(cmd[14]), nil
}

func ethtoolSpeed(s uint32) uint64 {
	if s == ethtoolSpeedUnknown || s == 0xFFFF { // 0xFFFF: old drivers' u16 -1
		return 0
	}
	return uint64(s)
}

func ethtoolDuplex(d byte) Duplex {
	switch d {
	case ethtoolDuplexFull:
		return DuplexFull
	case ethtoolDuplexHalf:
		return DuplexHalf
	}
	return DuplexUnknown // DUPLEX_UNKNOWN 0xff
}

// sysfsSpeedDuplex reads /sys/class/net/NAME/{speed,duplex}. /sys shows the
// namespace it was mounted in, which need not be the thread's (nsenter does
// not remount it), so it is used only if the sysfs entry has the link's
// ifindex and MAC address.
func sysfsSpeedDuplex(a *netlink.LinkAttrs) (uint64, Duplex) {
	dir := filepath.Join("/sys/class/net", a.Name)
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	if read("ifindex") != strconv.Itoa(a.Index) || read("address") != a.HardwareAddr.String() {
		return 0, DuplexUnknown
	}
	var speed uint64
	// speed is -1 or absent (EINVAL) when unknown.
	if s, err := strconv.ParseInt(read("speed"), 10, 64); err == nil && s > 0 {
		speed = uint64(s)
	}
	switch read("duplex") {
	case "full":
		return speed, DuplexFull
	case "half":
		return speed, DuplexHalf
	}
	return speed, DuplexUnknown
}

// ethtoolStats returns the names and values of the driver statistics
// (ETH_SS_STATS) of device name.
func ethtoolStats(fd int, name string) ([]string, []uint64, error) {
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, name)
	if err != nil {
		return nil, nil, fmt.Errorf("ETHTOOL_GDRVINFO: %w", err)
	}
	n := int(info.N_stats)
	if n == 0 {
		return nil, nil, unix.EOPNOTSUPP
	}
	// The count may change between calls (queues added); the kernel writes
	// as many entries as it has now, so leave room and check.
	room := 2*n + 64
	// struct ethtool_gstrings: cmd u32, string_set u32, len u32, data.
	sbuf := make([]byte, 12+room*ethtoolGstringLen)
	hostEndian.PutUint32(sbuf[0:], unix.ETHTOOL_GSTRINGS)
	hostEndian.PutUint32(sbuf[4:], ethtoolSSStats)
	hostEndian.PutUint32(sbuf[8:], uint32(n))
	if err := ethtoolIoctl(fd, name, sbuf); err != nil {
		return nil, nil, fmt.Errorf("ETHTOOL_GSTRINGS: %w", err)
	}
	ns := int(hostEndian.Uint32(sbuf[8:]))
	// struct ethtool_stats: cmd u32, n_stats u32, data u64[].
	vbuf := make([]byte, 8+room*8)
	hostEndian.PutUint32(vbuf[0:], unix.ETHTOOL_GSTATS)
	hostEndian.PutUint32(vbuf[4:], uint32(n))
	if err := ethtoolIoctl(fd, name, vbuf); err != nil {
		return nil, nil, fmt.Errorf("ETHTOOL_GSTATS: %w", err)
	}
	nv := int(hostEndian.Uint32(vbuf[4:]))
	if ns != nv || ns > room {
		return nil, nil, fmt.Errorf("ethtool statistics changed size (%d names, %d values)", ns, nv)
	}
	names := make([]string, ns)
	values := make([]uint64, ns)
	for i := range ns {
		s := sbuf[12+i*ethtoolGstringLen : 12+(i+1)*ethtoolGstringLen]
		if j := strings.IndexByte(string(s), 0); j >= 0 {
			s = s[:j]
		}
		names[i] = string(s)
		values[i] = hostEndian.Uint64(vbuf[8+i*8:])
	}
	return names, values, nil
}
