package hw

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/gvrouter/gvrouter/hw/takeover"
	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/mdlayher/netlink"
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
// the library's message (which deletes it exactly).
type kernelAddr struct {
	takeover.Address
	msg rtnetlink.AddressMessage
}

// listAddrs returns ifindex's addresses of one family (AF_INET or
// AF_INET6) in the kernel's order, in the calling thread's network
// namespace. The dump goes through github.com/jsimonetti/rtnetlink/v2;
// its AddressAttributes have no IFA_PROTO, so that one attribute is read
// from the raw message the library hands back beside the decoded one.
func listAddrs(ifindex, family int, now time.Time) ([]kernelAddr, error) {
	c, err := rtnetlink.Dial(nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := c.Send(&rtnetlink.AddressMessage{Family: uint8(family)}, unix.RTM_GETADDR, netlink.Request|netlink.Dump); err != nil {
		return nil, err
	}
	msgs, raw, err := c.Receive()
	if err != nil {
		return nil, err
	}
	var out []kernelAddr
	for i, m := range msgs {
		am, ok := m.(*rtnetlink.AddressMessage)
		if !ok || raw[i].Header.Type != unix.RTM_NEWADDR || am.Attributes == nil {
			continue
		}
		if int(am.Family) != family || int(am.Index) != ifindex {
			continue
		}
		proto, protoSeen := addrProto(raw[i].Data)
		a, err := decodeAddr(am, proto, protoSeen, now)
		if err != nil {
			continue // not an address we could restore; leave it alone
		}
		out = append(out, kernelAddr{Address: a, msg: *am})
	}
	return out, nil
}

// addrProto returns the IFA_PROTO attribute of an ifaddrmsg payload.
func addrProto(data []byte) (uint8, bool) {
	if len(data) < unix.SizeofIfAddrmsg {
		return 0, false
	}
	ad, err := netlink.NewAttributeDecoder(data[unix.SizeofIfAddrmsg:])
	if err != nil {
		return 0, false
	}
	for ad.Next() {
		if ad.Type() == ifaProto && len(ad.Bytes()) >= 1 {
			return ad.Bytes()[0], true
		}
	}
	return 0, false
}

// ipAddr converts a library address (nil when absent) to netip.
func ipAddr(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// decodeAddr decodes an address message (proto is its IFA_PROTO, if
// protoSeen).
func decodeAddr(m *rtnetlink.AddressMessage, proto uint8, protoSeen bool, now time.Time) (takeover.Address, error) {
	var a takeover.Address
	at := m.Attributes
	local, address := ipAddr(at.Local), ipAddr(at.Address)
	a.Broadcast = ipAddr(at.Broadcast)
	a.Label = at.Label
	flags := uint32(m.Flags)
	if at.Flags != 0 {
		flags = at.Flags // IFA_FLAGS: all 32 bits (the header has 8)
	}
	if protoSeen {
		a.Protocol = proto
	}
	if ci := at.CacheInfo; ci != (rtnetlink.CacheInfo{}) {
		if ci.Valid != infinityLifetime {
			a.ValidUntil = now.Add(time.Duration(ci.Valid) * time.Second).UTC()
		}
		if ci.Preferred != infinityLifetime {
			a.PreferredUntil = now.Add(time.Duration(ci.Preferred) * time.Second).UTC()
		}
	}
	switch m.Family {
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
		return a, fmt.Errorf("family %d", m.Family)
	}
	if !local.IsValid() {
		return a, errors.New("no address")
	}
	a.Local = netip.PrefixFrom(local, int(m.PrefixLength))
	a.Scope = scopeName(m.Scope)
	a.Flags = flagNames(int(m.Family), flags)
	a.Generated = m.Family == unix.AF_INET6 && local.IsLinkLocalUnicast() && protoSeen && a.Protocol == ifaProtoKernelLL
	return a, nil
}

// encodeAddr is decodeAddr's inverse: the RTM_NEWADDR payload that adds a
// on ifindex, with what is left of its lifetimes at now. It fails for an
// address whose valid lifetime has ended. The library builds the message;
// its encoder writes neither IFA_CACHEINFO nor IFA_PROTO, so those two are
// appended with its attribute encoder (without the lifetimes a restored
// address would become permanent).
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
	local := net.IP(a.Local.Addr().AsSlice())
	address := local
	if a.Peer.IsValid() {
		address = a.Peer.AsSlice()
	}
	m := &rtnetlink.AddressMessage{
		Family: fam, PrefixLength: uint8(a.Local.Bits()), Flags: uint8(flags), Scope: scope, Index: uint32(ifindex),
		Attributes: &rtnetlink.AddressAttributes{Local: local, Address: address, Label: a.Label, Flags: flags},
	}
	if a.Broadcast.IsValid() {
		m.Attributes.Broadcast = a.Broadcast.AsSlice()
	}
	b, err := m.MarshalBinary()
	if err != nil {
		return nil, err
	}
	ae := netlink.NewAttributeEncoder()
	if a.Protocol != 0 {
		ae.Uint8(ifaProto, a.Protocol)
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
		ae.Bytes(unix.IFA_CACHEINFO, ci)
	}
	extra, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	return append(b, extra...), nil
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
	c, err := rtnetlink.Dial(nil)
	if err != nil {
		return fmt.Errorf("hw: remove addresses from %s: %w", k.ifname, err)
	}
	defer c.Close()
	for _, a := range slices.Backward(remove) {
		err := c.Address.Delete(&a.msg)
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
		if err := addrRequest(msg); err != nil {
			errs = append(errs, fmt.Errorf("hw: restore address %s on %s: %w", a, k.ifname, err))
			left = append(left, a)
		}
	}
	k.rec.Addresses = left
	return errors.Join(errs...)
}

// addrRequest sends an RTM_NEWADDR request with payload (create or
// replace) through github.com/mdlayher/netlink and waits for its
// acknowledgement, in the calling thread's network namespace. It is not
// the rtnetlink library's AddressService.New, which always sets NLM_F_EXCL
// and takes a message its encoder cannot extend (encodeAddr).
func addrRequest(payload []byte) error {
	c, err := netlink.Dial(unix.NETLINK_ROUTE, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  unix.RTM_NEWADDR,
			Flags: netlink.Request | netlink.Acknowledge | netlink.Create | netlink.Replace,
		},
		Data: payload,
	})
	return err
}
