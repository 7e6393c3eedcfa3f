package hw

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Netdev features by name, for the ones the legacy ethtool flag and
// offload calls have no bit for (rx-vlan-stag-hw-parse): the kernel's
// feature-name string set gives each feature's bit, and
// ETHTOOL_GFEATURES / ETHTOOL_SFEATURES read and change any of them, as
// `ethtool -k` / `ethtool -K` do.

const (
	ethSSFeatures  = 4  // ETH_SS_FEATURES
	ethGStringLen  = 32 // ETH_GSTRING_LEN
	maxFeatureBits = 256
)

// featureRxSTag is NETIF_F_HW_VLAN_STAG_RX's name: the driver strips the
// outer 802.1ad tag into the packet's metadata.
const featureRxSTag = "rx-vlan-stag-hw-parse"

// ethtoolRaw runs SIOCETHTOOL on ifname with buf, whose first word is
// the command, and returns the ioctl's result.
func ethtoolRaw(fd int, ifname string, buf []byte) (int, error) {
	var ifr ifreqData
	if len(ifname) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("interface name %q too long", ifname)
	}
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(&buf[0])
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// featureBit returns the bit of the named feature on ifname's device.
// A kernel without the name gives EOPNOTSUPP.
func featureBit(fd int, ifname, name string) (bit, count int, err error) {
	// struct ethtool_sset_info: cmd, reserved, sset_mask (u64), data[1].
	info := make([]byte, 4+4+8+4)
	binary.NativeEndian.PutUint32(info[0:], unix.ETHTOOL_GSSET_INFO)
	binary.NativeEndian.PutUint64(info[8:], 1<<ethSSFeatures)
	if _, err := ethtoolRaw(fd, ifname, info); err != nil {
		return 0, 0, err
	}
	if binary.NativeEndian.Uint64(info[8:]) == 0 {
		return 0, 0, unix.EOPNOTSUPP
	}
	count = int(binary.NativeEndian.Uint32(info[16:]))
	if count <= 0 || count > maxFeatureBits {
		return 0, 0, fmt.Errorf("%d feature names", count)
	}
	// struct ethtool_gstrings: cmd, string_set, len, data[len*32].
	strs := make([]byte, 12+count*ethGStringLen)
	binary.NativeEndian.PutUint32(strs[0:], unix.ETHTOOL_GSTRINGS)
	binary.NativeEndian.PutUint32(strs[4:], ethSSFeatures)
	binary.NativeEndian.PutUint32(strs[8:], uint32(count))
	if _, err := ethtoolRaw(fd, ifname, strs); err != nil {
		return 0, 0, err
	}
	for i := range count {
		s := strs[12+i*ethGStringLen : 12+(i+1)*ethGStringLen]
		if j := bytes.IndexByte(s, 0); j >= 0 {
			s = s[:j]
		}
		if string(s) == name {
			return i, count, nil
		}
	}
	return 0, 0, unix.EOPNOTSUPP
}

// featureBlocks is the number of 32-bit blocks for count features.
func featureBlocks(count int) int { return (count + 31) / 32 }

// getFeature reports whether the named feature is active on ifname and
// whether the device can change it. A feature the device lacks gives
// EOPNOTSUPP.
func getFeature(fd int, ifname, name string) (active, changeable bool, err error) {
	bit, count, err := featureBit(fd, ifname, name)
	if err != nil {
		return false, false, err
	}
	// struct ethtool_gfeatures: cmd, size, then per block available,
	// requested, active, never_changed.
	n := featureBlocks(count)
	buf := make([]byte, 8+n*16)
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GFEATURES)
	binary.NativeEndian.PutUint32(buf[4:], uint32(n))
	if _, err := ethtoolRaw(fd, ifname, buf); err != nil {
		return false, false, err
	}
	blk := buf[8+(bit/32)*16:]
	mask := uint32(1) << (bit % 32)
	available := binary.NativeEndian.Uint32(blk[0:])&mask != 0
	active = binary.NativeEndian.Uint32(blk[8:])&mask != 0
	never := binary.NativeEndian.Uint32(blk[12:])&mask != 0
	return active, available && !never, nil
}

// setFeature turns the named feature on ifname on or off and checks that
// it took. A device that cannot change it gives EOPNOTSUPP.
func setFeature(fd int, ifname, name string, on bool) error {
	active, changeable, err := getFeature(fd, ifname, name)
	if err != nil {
		return err
	}
	if active == on {
		return nil
	}
	if !changeable {
		return unix.EOPNOTSUPP
	}
	bit, count, err := featureBit(fd, ifname, name)
	if err != nil {
		return err
	}
	// struct ethtool_sfeatures: cmd, size, then per block valid,
	// requested.
	n := featureBlocks(count)
	buf := make([]byte, 8+n*8)
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_SFEATURES)
	binary.NativeEndian.PutUint32(buf[4:], uint32(n))
	blk := buf[8+(bit/32)*8:]
	mask := uint32(1) << (bit % 32)
	binary.NativeEndian.PutUint32(blk[0:], mask)
	if on {
		binary.NativeEndian.PutUint32(blk[4:], mask)
	}
	if _, err := ethtoolRaw(fd, ifname, buf); err != nil {
		return err
	}
	if got, _, err := getFeature(fd, ifname, name); err != nil {
		return err
	} else if got != on {
		// The request was stored but the driver kept the feature
		// (ETHTOOL_F_WISH): it depends on another.
		return fmt.Errorf("%s stays %v: %w", name, got, unix.EOPNOTSUPP)
	}
	return nil
}
