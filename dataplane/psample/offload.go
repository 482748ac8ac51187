package psample

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtool ioctl commands and the feature string set (linux/ethtool.h).
const (
	ethtoolGStrings  = 0x1b
	ethtoolGSsetInfo = 0x37
	ethtoolGFeatures = 0x3a
	ethSSFeatures    = 4
	ethGStringLen    = 32
)

// FeatureTCOffload is the ethtool feature of a port whose tc rules the
// hardware runs (NETIF_F_HW_TC): switchdev ASIC ports.
const FeatureTCOffload = "hw-tc-offload"

// ifreq is struct ifreq with ifr_data.
type ifreq struct {
	name [unix.IFNAMSIZ]byte
	data uintptr
	_    [16]byte
}

func ethtool(fd int, name string, buf []byte) error {
	var ifr ifreq
	copy(ifr.name[:], name)
	ifr.data = uintptr(unsafe.Pointer(&buf[0]))
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if errno != 0 {
		return errno
	}
	return nil
}

// TCOffload reports whether port name (in the calling thread's network
// namespace) has ethtool's hw-tc-offload feature on: its tc filters are
// offloaded to the hardware (`ethtool -k PORT | grep hw-tc-offload`).
func TCOffload(name string) (bool, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("ethtool socket: %w", err)
	}
	defer unix.Close(fd)
	// The number of feature names.
	// struct ethtool_sset_info: cmd, reserved, sset_mask (u64), data[].
	info := make([]byte, 16+4)
	binary.NativeEndian.PutUint32(info[0:], ethtoolGSsetInfo)
	binary.NativeEndian.PutUint64(info[8:], 1<<ethSSFeatures)
	if err := ethtool(fd, name, info); err != nil {
		return false, fmt.Errorf("ethtool %s: ETHTOOL_GSSET_INFO: %w", name, err)
	}
	n := int(binary.NativeEndian.Uint32(info[16:]))
	if n <= 0 || n > 4096 {
		return false, fmt.Errorf("ethtool %s: %d feature names", name, n)
	}
	strs := make([]byte, 12+n*ethGStringLen)
	binary.NativeEndian.PutUint32(strs[0:], ethtoolGStrings)
	binary.NativeEndian.PutUint32(strs[4:], ethSSFeatures)
	binary.NativeEndian.PutUint32(strs[8:], uint32(n))
	if err := ethtool(fd, name, strs); err != nil {
		return false, fmt.Errorf("ethtool %s: ETHTOOL_GSTRINGS: %w", name, err)
	}
	bit := -1
	for i := 0; i < n; i++ {
		s := strs[12+i*ethGStringLen : 12+(i+1)*ethGStringLen]
		if string(bytes.TrimRight(s, "\x00")) == FeatureTCOffload {
			bit = i
			break
		}
	}
	if bit < 0 {
		return false, nil // a kernel without the feature
	}
	blocks := (n + 31) / 32
	feat := make([]byte, 8+blocks*16)
	binary.NativeEndian.PutUint32(feat[0:], ethtoolGFeatures)
	binary.NativeEndian.PutUint32(feat[4:], uint32(blocks))
	if err := ethtool(fd, name, feat); err != nil {
		return false, fmt.Errorf("ethtool %s: ETHTOOL_GFEATURES: %w", name, err)
	}
	// struct ethtool_get_features_block: available, requested, active,
	// never_changed.
	blk := feat[8+(bit/32)*16:]
	active := binary.NativeEndian.Uint32(blk[8:])
	return active&(1<<(bit%32)) != 0, nil
}
