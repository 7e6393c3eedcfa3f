package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ErrFilter is returned (wrapped) for a filter expression Parse cannot
// read: an unknown word, a missing or bad value.
var ErrFilter = errors.New("capture: bad filter")

// Filter selects frames. The zero Filter (and nil) matches every frame.
// It is immutable and safe for concurrent use.
//
// Syntax: primitives joined by "and", each optionally preceded by "not":
//
//	host ADDR     IPv4/IPv6 source or destination
//	net PREFIX    source or destination in PREFIX (10.0.0.0/8, fd00::/8)
//	port N        TCP/UDP source or destination port
//	proto P       IP protocol: tcp, udp, icmp, icmp6 or a number
//	tcp, udp, icmp, icmp6   short for proto P
//	ip, ip6, arp, macsec    EtherType 0x0800, 0x86dd, 0x0806, 0x88e5
//	vlan N        outermost 802.1Q/802.1ad VID is N
//
// Full tcpdump syntax (or, parentheses, byte offsets) is not supported.
type Filter struct {
	terms []term
}

type termKind uint8

const (
	kHost termKind = iota
	kNet
	kPort
	kProto
	kEtherType
	kVLAN
)

type term struct {
	kind   termKind
	not    bool
	prefix netip.Prefix // kHost (full length), kNet
	n      uint16       // port, proto, EtherType, VID
}

var protoNames = map[string]uint16{"tcp": 6, "udp": 17, "icmp": 1, "icmp6": 58}
var etherNames = map[string]uint16{"ip": 0x0800, "ip6": 0x86dd, "arp": 0x0806, "macsec": 0x88e5}

// Parse reads a filter expression (see Filter). An empty expression
// matches everything.
func Parse(expr string) (*Filter, error) {
	w := strings.Fields(expr)
	if len(w) > 0 && w[len(w)-1] == "and" {
		return nil, fmt.Errorf("%w: %q: nothing after and", ErrFilter, expr)
	}
	f := &Filter{}
	for i := 0; i < len(w); {
		t := term{}
		if w[i] == "not" {
			t.not = true
			i++
			if i == len(w) {
				return nil, fmt.Errorf("%w: %q: nothing after not", ErrFilter, expr)
			}
		}
		word := w[i]
		i++
		val := func() (string, error) {
			if i == len(w) {
				return "", fmt.Errorf("%w: %q: %s needs a value", ErrFilter, expr, word)
			}
			i++
			return w[i-1], nil
		}
		switch word {
		case "host":
			v, err := val()
			if err != nil {
				return nil, err
			}
			a, err := netip.ParseAddr(v)
			if err != nil {
				return nil, fmt.Errorf("%w: host %q: %v", ErrFilter, v, err)
			}
			t.kind, t.prefix = kHost, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		case "net":
			v, err := val()
			if err != nil {
				return nil, err
			}
			p, err := netip.ParsePrefix(v)
			if err != nil {
				return nil, fmt.Errorf("%w: net %q: %v", ErrFilter, v, err)
			}
			t.kind, t.prefix = kNet, p.Masked()
		case "port", "vlan":
			v, err := val()
			if err != nil {
				return nil, err
			}
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil || (word == "vlan" && n > 4094) {
				return nil, fmt.Errorf("%w: %s %q: not a number in range", ErrFilter, word, v)
			}
			t.kind, t.n = kPort, uint16(n)
			if word == "vlan" {
				t.kind = kVLAN
			}
		case "proto":
			v, err := val()
			if err != nil {
				return nil, err
			}
			n, ok := protoNames[v]
			if !ok {
				x, err := strconv.ParseUint(v, 10, 8)
				if err != nil {
					return nil, fmt.Errorf("%w: proto %q: want tcp, udp, icmp, icmp6 or 0-255", ErrFilter, v)
				}
				n = uint16(x)
			}
			t.kind, t.n = kProto, n
		case "and":
			if len(f.terms) == 0 || t.not {
				return nil, fmt.Errorf("%w: %q: misplaced and", ErrFilter, expr)
			}
			continue
		default:
			if n, ok := protoNames[word]; ok {
				t.kind, t.n = kProto, n
			} else if n, ok := etherNames[word]; ok {
				t.kind, t.n = kEtherType, n
			} else {
				return nil, fmt.Errorf("%w: %q: unknown word %q (full tcpdump syntax is not supported)", ErrFilter, expr, word)
			}
		}
		f.terms = append(f.terms, t)
		if i < len(w) && w[i] != "and" {
			return nil, fmt.Errorf("%w: %q: want and before %q", ErrFilter, expr, w[i])
		}
	}
	return f, nil
}

// view is what match needs of a frame, parsed once.
type view struct {
	vid       int // outermost VID, -1 if untagged
	etherType uint16
	src, dst  netip.Addr
	proto     int // -1 without IP
	sport     int // -1 without a TCP/UDP header
	dport     int
}

func isTPID(et uint16) bool { return et == 0x8100 || et == 0x88a8 || et == 0x9100 }

// parse reads frame (tags in-band). It does not allocate.
func parse(frame []byte) view {
	v := view{vid: -1, proto: -1, sport: -1, dport: -1}
	if len(frame) < 14 {
		return v
	}
	off := 12
	et := binary.BigEndian.Uint16(frame[off:])
	for isTPID(et) && len(frame) >= off+6 {
		if v.vid < 0 {
			v.vid = int(binary.BigEndian.Uint16(frame[off+2:]) & 0xfff)
		}
		off += 4
		et = binary.BigEndian.Uint16(frame[off:])
	}
	v.etherType = et
	ip := frame[off+2:]
	l4 := -1
	switch {
	case et == 0x0800 && len(ip) >= 20 && ip[0]>>4 == 4:
		v.src = netip.AddrFrom4([4]byte(ip[12:16]))
		v.dst = netip.AddrFrom4([4]byte(ip[16:20]))
		v.proto = int(ip[9])
		if binary.BigEndian.Uint16(ip[6:])&0x1fff == 0 {
			l4 = int(ip[0]&0xf) * 4
		}
	case et == 0x86dd && len(ip) >= 40 && ip[0]>>4 == 6:
		v.src = netip.AddrFrom16([16]byte(ip[8:24]))
		v.dst = netip.AddrFrom16([16]byte(ip[24:40]))
		v.proto = int(ip[6]) // extension headers are not walked
		l4 = 40
	}
	if (v.proto == 6 || v.proto == 17) && l4 >= 20 && len(ip) >= l4+4 {
		v.sport = int(binary.BigEndian.Uint16(ip[l4:]))
		v.dport = int(binary.BigEndian.Uint16(ip[l4+2:]))
	}
	return v
}

// Match reports whether frame (an Ethernet frame, tags in-band) passes
// f. It does not allocate.
func (f *Filter) Match(frame []byte) bool {
	if f == nil || len(f.terms) == 0 {
		return true
	}
	v := parse(frame)
	for i := range f.terms {
		t := &f.terms[i]
		var ok bool
		switch t.kind {
		case kHost, kNet:
			ok = (v.src.IsValid() && t.prefix.Contains(v.src)) || (v.dst.IsValid() && t.prefix.Contains(v.dst))
		case kPort:
			ok = v.sport == int(t.n) || v.dport == int(t.n)
		case kProto:
			ok = v.proto == int(t.n)
		case kEtherType:
			ok = v.etherType == t.n
		case kVLAN:
			ok = v.vid == int(t.n)
		}
		if ok == t.not {
			return false
		}
	}
	return true
}
