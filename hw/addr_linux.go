package hw

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// ifaPermanent is IFA_F_PERMANENT: an address configured by hand rather
// than by autoconfiguration.
const ifaPermanent = 0x80

// removeAddrs removes ifindex's addresses of one family (AF_INET or
// AF_INET6) and keeps them for restoreAddrs. Of IPv6, only permanent
// (configured) addresses are kept; link-local and autoconfigured ones come
// back by themselves when IPv6 is enabled again.
func (k *kernelState) removeAddrs(family int) error {
	rib, err := syscall.NetlinkRIB(unix.RTM_GETADDR, family)
	if err != nil {
		return fmt.Errorf("hw: list addresses of %s: %w", k.ifname, err)
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return fmt.Errorf("hw: list addresses of %s: %w", k.ifname, err)
	}
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWADDR || len(m.Data) < unix.SizeofIfAddrmsg {
			continue
		}
		fam, flags := m.Data[0], m.Data[2]
		index := binary.NativeEndian.Uint32(m.Data[4:])
		if int(fam) != family || int(index) != k.ifindex {
			continue
		}
		if fam == unix.AF_INET6 && flags&ifaPermanent == 0 {
			continue
		}
		if err := netlinkRequest(unix.RTM_DELADDR, 0, m.Data); err != nil {
			return fmt.Errorf("hw: remove address %s from %s: %w", addrString(m.Data), k.ifname, err)
		}
		k.log.Info("removed address from router port", "addr", addrString(m.Data))
		k.addrs = append(k.addrs, append([]byte(nil), m.Data...))
	}
	return nil
}

func (k *kernelState) restoreAddrs() error {
	var errs []error
	for _, a := range k.addrs {
		if err := netlinkRequest(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, a); err != nil {
			errs = append(errs, fmt.Errorf("hw: restore address %s on %s: %w", addrString(a), k.ifname, err))
		}
	}
	k.addrs = nil
	return errors.Join(errs...)
}

// addrString formats the IFA_ADDRESS or IFA_LOCAL of an ifaddrmsg payload.
func addrString(data []byte) string {
	attrs, err := syscall.ParseNetlinkRouteAttr(&syscall.NetlinkMessage{
		Header: syscall.NlMsghdr{Type: unix.RTM_NEWADDR},
		Data:   data,
	})
	if err != nil {
		return "?"
	}
	var s string
	for _, a := range attrs {
		if a.Attr.Type == unix.IFA_LOCAL || (a.Attr.Type == unix.IFA_ADDRESS && s == "") {
			if ip, ok := netip.AddrFromSlice(a.Value); ok {
				s = fmt.Sprintf("%s/%d", ip, data[1])
			}
		}
	}
	return s
}

// netlinkRequest sends one rtnetlink request with payload and waits for
// its acknowledgement, in the calling thread's network namespace.
func netlinkRequest(typ uint16, flags uint16, payload []byte) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	msg := make([]byte, unix.NLMSG_HDRLEN+len(payload))
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|flags)
	binary.NativeEndian.PutUint32(msg[8:], 1) // seq
	copy(msg[unix.NLMSG_HDRLEN:], payload)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
				if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
					return unix.Errno(-e)
				}
				return nil
			}
		}
	}
}
