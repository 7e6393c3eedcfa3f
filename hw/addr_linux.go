package hw

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/gvrouter/gvrouter/hw/takeover"
	"golang.org/x/sys/unix"
)

// Address attributes and flags of rtnetlink (linux/if_addr.h) that
// golang.org/x/sys/unix does not name.
const (
	ifaProto         = 11   // IFA_PROTO: u8, who added the address (Linux 5.18)
	ifaProtoKernelLL = 3    // IFAPROT_KERNEL_LL: a link-local made by addrconf
	ifaPermanent     = 0x80 // IFA_F_PERMANENT: configured, not autoconfigured
	// infinityLifetime is INFINITY_LIFE_TIME in struct ifa_cacheinfo.
	infinityLifetime = 0xFFFFFFFF
)

// ifaFlagNames are the IFA_F_* flags by bit, named as iproute2 names them
// (bit 0 is "temporary" for IPv6).
var ifaFlagNames = []string{"secondary", "nodad", "optimistic", "dadfailed", "home", "deprecated", "tentative",
	"permanent", "mngtmpaddr", "noprefixroute", "autojoin", "stable-privacy"}

// ifaStateFlags are flags the kernel sets by itself: an RTM_NEWADDR
// carries the others back.
var ifaStateFlags = []string{"secondary", "temporary", "dadfailed", "deprecated", "tentative", "permanent", "stable-privacy"}

func flagNames(family int, flags uint32) []string {
	var names []string
	for i, n := range ifaFlagNames {
		if flags&(1<<i) == 0 {
			continue
		}
		if i == 0 && family == unix.AF_INET6 {
			n = "temporary"
		}
		names = append(names, n)
	}
	return names
}

func flagBits(names []string) uint32 {
	var f uint32
	for _, n := range names {
		if n == "temporary" {
			n = "secondary"
		}
		if i := slices.Index(ifaFlagNames, n); i >= 0 {
			f |= 1 << i
		}
	}
	return f
}

var scopeNames = map[uint8]string{0: "global", 200: "site", 253: "link", 254: "host", 255: "nowhere"}

func scopeName(s uint8) string {
	if n, ok := scopeNames[s]; ok {
		return n
	}
	return strconv.Itoa(int(s))
}

func scopeValue(name string) (uint8, error) {
	for v, n := range scopeNames {
		if n == name {
			return v, nil
		}
	}
	v, err := strconv.ParseUint(name, 10, 8)
	if err != nil {
		return 0, fmt.Errorf("unknown scope %q", name)
	}
	return uint8(v), nil
}

// kernelAddr is one address as the kernel lists it: the decoded form and
// the raw ifaddrmsg payload (which deletes it exactly).
type kernelAddr struct {
	takeover.Address
	raw []byte
}

// listAddrs returns ifindex's addresses of one family (AF_INET or
// AF_INET6) in the kernel's order, in the calling thread's network
// namespace.
func listAddrs(ifindex, family int, now time.Time) ([]kernelAddr, error) {
	rib, err := syscall.NetlinkRIB(unix.RTM_GETADDR, family)
	if err != nil {
		return nil, err
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, err
	}
	var out []kernelAddr
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWADDR || len(m.Data) < unix.SizeofIfAddrmsg {
			continue
		}
		if int(m.Data[0]) != family || int(binary.NativeEndian.Uint32(m.Data[4:])) != ifindex {
			continue
		}
		a, err := decodeAddr(m.Data, now)
		if err != nil {
			continue // not an address we could restore; leave it alone
		}
		out = append(out, kernelAddr{Address: a, raw: slices.Clone(m.Data)})
	}
	return out, nil
}

// decodeAddr decodes an ifaddrmsg payload and its IFA_* attributes.
func decodeAddr(data []byte, now time.Time) (takeover.Address, error) {
	var a takeover.Address
	fam, plen, flags8, scope := data[0], data[1], data[2], data[3]
	attrs, err := syscall.ParseNetlinkRouteAttr(&syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.RTM_NEWADDR}, Data: data})
	if err != nil {
		return a, err
	}
	var local, address netip.Addr
	flags := uint32(flags8)
	protoSeen := false
	for _, at := range attrs {
		switch at.Attr.Type {
		case unix.IFA_LOCAL:
			local, _ = netip.AddrFromSlice(at.Value)
		case unix.IFA_ADDRESS:
			address, _ = netip.AddrFromSlice(at.Value)
		case unix.IFA_BROADCAST:
			a.Broadcast, _ = netip.AddrFromSlice(at.Value)
		case unix.IFA_LABEL:
			a.Label = string(trimNUL(at.Value))
		case unix.IFA_FLAGS:
			if len(at.Value) >= 4 {
				flags = binary.NativeEndian.Uint32(at.Value)
			}
		case ifaProto:
			if len(at.Value) >= 1 {
				a.Protocol, protoSeen = at.Value[0], true
			}
		case unix.IFA_CACHEINFO:
			if len(at.Value) >= 8 {
				pref := binary.NativeEndian.Uint32(at.Value[0:])
				valid := binary.NativeEndian.Uint32(at.Value[4:])
				if valid != infinityLifetime {
					a.ValidUntil = now.Add(time.Duration(valid) * time.Second).UTC()
				}
				if pref != infinityLifetime {
					a.PreferredUntil = now.Add(time.Duration(pref) * time.Second).UTC()
				}
			}
		}
	}
	switch fam {
	case unix.AF_INET:
		a.Family = "inet"
		if !local.IsValid() {
			local = address
		}
		if address.IsValid() && address != local {
			a.Peer = address
		}
	case unix.AF_INET6:
		a.Family = "inet6"
		if !address.IsValid() {
			address = local
		}
		if local.IsValid() && local != address {
			// IFA_LOCAL is the local end when IFA_ADDRESS is the peer.
			a.Peer, address = address, local
		}
		local = address
	default:
		return a, fmt.Errorf("family %d", fam)
	}
	if !local.IsValid() {
		return a, errors.New("no address")
	}
	a.Local = netip.PrefixFrom(local.Unmap(), int(plen))
	a.Scope = scopeName(scope)
	a.Flags = flagNames(int(fam), flags)
	a.Generated = fam == unix.AF_INET6 && local.IsLinkLocalUnicast() && protoSeen && a.Protocol == ifaProtoKernelLL
	return a, nil
}

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// encodeAddr is decodeAddr's inverse: the RTM_NEWADDR payload that adds a
// on ifindex, with what is left of its lifetimes at now. It fails for an
// address whose valid lifetime has ended.
func encodeAddr(a takeover.Address, ifindex int, now time.Time) ([]byte, error) {
	var fam uint8
	switch a.Family {
	case "inet":
		fam = unix.AF_INET
	case "inet6":
		fam = unix.AF_INET6
	default:
		return nil, fmt.Errorf("family %q", a.Family)
	}
	scope, err := scopeValue(a.Scope)
	if err != nil {
		return nil, err
	}
	flags := flagBits(slices.DeleteFunc(slices.Clone(a.Flags), func(f string) bool { return slices.Contains(ifaStateFlags, f) }))
	b := make([]byte, unix.SizeofIfAddrmsg, 64)
	b[0], b[1], b[2], b[3] = fam, uint8(a.Local.Bits()), uint8(flags), scope
	binary.NativeEndian.PutUint32(b[4:], uint32(ifindex))
	local := a.Local.Addr().AsSlice()
	address := local
	if a.Peer.IsValid() {
		address = a.Peer.AsSlice()
	}
	b = appendAttr(b, unix.IFA_LOCAL, local)
	b = appendAttr(b, unix.IFA_ADDRESS, address)
	if a.Broadcast.IsValid() {
		b = appendAttr(b, unix.IFA_BROADCAST, a.Broadcast.AsSlice())
	}
	if a.Label != "" {
		b = appendAttr(b, unix.IFA_LABEL, append([]byte(a.Label), 0))
	}
	b = appendAttr(b, unix.IFA_FLAGS, binary.NativeEndian.AppendUint32(nil, flags))
	if a.Protocol != 0 {
		b = appendAttr(b, ifaProto, []byte{a.Protocol})
	}
	if !a.ValidUntil.IsZero() {
		valid := a.ValidUntil.Sub(now)
		if valid < time.Second {
			return nil, fmt.Errorf("its valid lifetime ended at %s", a.ValidUntil.Format(time.RFC3339))
		}
		pref := time.Duration(0)
		if !a.PreferredUntil.IsZero() {
			pref = max(a.PreferredUntil.Sub(now), 0)
		} else {
			pref = valid
		}
		ci := make([]byte, 16)
		binary.NativeEndian.PutUint32(ci[0:], uint32(pref/time.Second))
		binary.NativeEndian.PutUint32(ci[4:], uint32(valid/time.Second))
		b = appendAttr(b, unix.IFA_CACHEINFO, ci)
	}
	return b, nil
}

// appendAttr appends one rtnetlink attribute, padded to 4 bytes.
func appendAttr(b []byte, typ uint16, val []byte) []byte {
	l := unix.SizeofRtAttr + len(val)
	b = binary.NativeEndian.AppendUint16(b, uint16(l))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, val...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// removeAddrs records and removes ifindex's addresses of one family
// (AF_INET or AF_INET6). Of IPv6, the kernel's own link-local addresses
// are recorded but not removed: disabling IPv6 removes them, and enabling
// it makes the kernel generate them again. Addresses are removed last
// first, so that IPv4 secondaries go before their primary.
func (k *kernelState) removeAddrs(family int) error {
	addrs, err := listAddrs(k.ifindex, family, k.now())
	if err != nil {
		return fmt.Errorf("hw: list addresses of %s: %w", k.ifname, err)
	}
	var remove []kernelAddr
	changed := false
	for _, a := range addrs {
		if family == unix.AF_INET6 && !a.Generated && !a.HasFlag("permanent") {
			continue // autoconfigured (SLAAC, privacy): comes back from the network
		}
		if k.rec.AddAddress(a.Address) {
			changed = true
		}
		if !a.Generated {
			remove = append(remove, a)
		}
	}
	if changed {
		if err := k.save(); err != nil {
			return err
		}
	}
	for _, a := range slices.Backward(remove) {
		err := netlinkRequest(unix.RTM_DELADDR, 0, a.raw)
		if errors.Is(err, unix.EADDRNOTAVAIL) {
			continue // a secondary that went with its primary
		}
		if err != nil {
			return fmt.Errorf("hw: remove address %s from %s: %w", a.Local, k.ifname, err)
		}
		k.log.Info("removed address from router port", "addr", a.Local.String())
	}
	return nil
}

// restoreAddrs adds the recorded addresses back, in the recorded order.
// It runs after IPv6 is enabled again, so that a generated link-local
// address the kernel made again is left as the kernel made it.
func (k *kernelState) restoreAddrs() error {
	now := k.now()
	var present []kernelAddr
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		as, err := listAddrs(k.ifindex, fam, now)
		if err != nil {
			return fmt.Errorf("hw: list addresses of %s: %w", k.ifname, err)
		}
		present = append(present, as...)
	}
	var errs []error
	var left []takeover.Address
	for _, a := range k.rec.Addresses {
		if a.Generated && slices.ContainsFunc(present, func(p kernelAddr) bool { return p.Key() == a.Key() }) {
			continue
		}
		msg, err := encodeAddr(a, k.ifindex, now)
		if err != nil {
			k.log.Warn("address not restored", "addr", a.String(), "err", err)
			continue
		}
		if err := netlinkRequest(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, msg); err != nil {
			errs = append(errs, fmt.Errorf("hw: restore address %s on %s: %w", a, k.ifname, err))
			left = append(left, a)
		}
	}
	k.rec.Addresses = left
	return errors.Join(errs...)
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
