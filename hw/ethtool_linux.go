package hw

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethFlagLRO is ETH_FLAG_LRO (linux/ethtool.h), a bit of ETHTOOL_GFLAGS.
const ethFlagLRO = 1 << 15

// ethtoolValue is struct ethtool_value.
type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// ifreqData is struct ifreq with ifr_data set, padded to the kernel's size.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

func ethtool(fd int, ifname string, cmd, data uint32) (uint32, error) {
	var ifr ifreqData
	if len(ifname) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("interface name %q too long", ifname)
	}
	copy(ifr.name[:], ifname)
	v := ethtoolValue{cmd: cmd, data: data}
	ifr.data = unsafe.Pointer(&v)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if errno != 0 {
		return 0, errno
	}
	return v.data, nil
}

// ethtoolFeature is one boolean feature and its legacy get/set commands.
type ethtoolFeature struct {
	name     string
	get, set uint32
	field    func(*Offloads) *bool
}

var ethtoolFeatures = []ethtoolFeature{
	{"gro", unix.ETHTOOL_GGRO, unix.ETHTOOL_SGRO, func(o *Offloads) *bool { return &o.GRO }},
	{"tso", unix.ETHTOOL_GTSO, unix.ETHTOOL_STSO, func(o *Offloads) *bool { return &o.TSO }},
	{"gso", unix.ETHTOOL_GGSO, unix.ETHTOOL_SGSO, func(o *Offloads) *bool { return &o.GSO }},
	{"tx-checksum", unix.ETHTOOL_GTXCSUM, unix.ETHTOOL_STXCSUM, func(o *Offloads) *bool { return &o.TxCsum }},
	{"rx-checksum", unix.ETHTOOL_GRXCSUM, unix.ETHTOOL_SRXCSUM, func(o *Offloads) *bool { return &o.RxCsum }},
}

func unsupported(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP)
}

// ctlSocket opens a datagram socket for interface ioctls. It belongs to the
// calling thread's network namespace for its whole life.
func ctlSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	}
	if err != nil {
		return -1, fmt.Errorf("control socket: %w", err)
	}
	return fd, nil
}

// GetOffloads reads ifname's offload features with the SIOCETHTOOL ioctl,
// in the calling thread's network namespace. A feature the device does
// not implement reads as off.
func GetOffloads(ifname string) (Offloads, error) {
	fd, err := ctlSocket()
	if err != nil {
		return Offloads{}, fmt.Errorf("hw: offloads of %s: %w", ifname, err)
	}
	defer unix.Close(fd)
	return getOffloads(fd, ifname)
}

func getOffloads(fd int, ifname string) (Offloads, error) {
	var o Offloads
	for _, f := range ethtoolFeatures {
		v, err := ethtool(fd, ifname, f.get, 0)
		if err != nil && !unsupported(err) {
			return o, fmt.Errorf("hw: ethtool get %s on %s: %w", f.name, ifname, err)
		}
		*f.field(&o) = v != 0
	}
	flags, err := ethtool(fd, ifname, unix.ETHTOOL_GFLAGS, 0)
	if err != nil && !unsupported(err) {
		return o, fmt.Errorf("hw: ethtool get flags on %s: %w", ifname, err)
	}
	o.LRO = flags&ethFlagLRO != 0
	return o, nil
}

// setEthFlag turns one ETHTOOL_GFLAGS bit of ifname on or off, leaving
// the other flags as they are.
func setEthFlag(fd int, ifname string, bit uint32, on bool) error {
	flags, err := ethtool(fd, ifname, unix.ETHTOOL_GFLAGS, 0)
	if err != nil {
		return err
	}
	if on {
		flags |= bit
	} else {
		flags &^= bit
	}
	_, err = ethtool(fd, ifname, unix.ETHTOOL_SFLAGS, flags)
	return err
}

// SetOffloads sets ifname's offload features with the SIOCETHTOOL ioctl,
// in the calling thread's network namespace. Features that already have
// the wanted value are not touched; a feature the device cannot change
// (EOPNOTSUPP) is left as it is.
func SetOffloads(ifname string, o Offloads) error {
	fd, err := ctlSocket()
	if err != nil {
		return fmt.Errorf("hw: offloads of %s: %w", ifname, err)
	}
	defer unix.Close(fd)
	return setOffloads(fd, ifname, o, nil)
}

// setOffloads implements SetOffloads on an open control socket. skipped, if
// not nil, is called for each feature the device could not change.
func setOffloads(fd int, ifname string, want Offloads, skipped func(feature string, err error)) error {
	cur, err := getOffloads(fd, ifname)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range ethtoolFeatures {
		w := *f.field(&want)
		if *f.field(&cur) == w {
			continue
		}
		var v uint32
		if w {
			v = 1
		}
		if _, err := ethtool(fd, ifname, f.set, v); err != nil {
			if unsupported(err) {
				if skipped != nil {
					skipped(f.name, err)
				}
				continue
			}
			errs = append(errs, fmt.Errorf("hw: ethtool set %s=%v on %s: %w", f.name, w, ifname, err))
		}
	}
	if cur.LRO != want.LRO {
		if err := setEthFlag(fd, ifname, ethFlagLRO, want.LRO); err != nil {
			if unsupported(err) {
				if skipped != nil {
					skipped("lro", err)
				}
			} else {
				errs = append(errs, fmt.Errorf("hw: ethtool set lro=%v on %s: %w", want.LRO, ifname, err))
			}
		}
	}
	return errors.Join(errs...)
}
