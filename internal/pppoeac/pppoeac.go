//go:build linux

// Package pppoeac is a minimal PPPoE access concentrator for benches and
// tests on a machine whose kernel has no PPP: one session (RFC 2516
// discovery, LCP without authentication, IPCP handing the client an
// address) on a packet socket, its IPv4 relayed to and from a TUN device,
// so the host's own stack (iperf3) is the far end. Plain mode relays the
// same IPv4 as plain Ethernet frames (answering ARP for every address),
// the same user-space hop without the PPPoE framing: the control a bench
// compares the session against.
package pppoeac

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/gvrouter/gvrouter/pppoe"
)

// Config is one concentrator.
type Config struct {
	Iface string     // the link to the client, e.g. "lpac1"
	Tun   string     // an existing (persistent) TUN device, e.g. "actun"
	Local netip.Addr // the AC's address (IPCP's peer, plain's gateway)
	Peer  netip.Addr // the client's address (IPCP assigns it)
	Plain bool       // relay plain Ethernet IPv4 instead of a session
}

// Stats counts the relay's frames.
type Stats struct {
	Up, Down atomic.Uint64 // IPv4 packets client→tun and tun→client
	Control  atomic.Uint64 // discovery, LCP, IPCP frames handled
	Dropped  atomic.Uint64 // frames not for us or malformed
}

const (
	sessionID = 0x0a39
	tunMTU    = 1500
)

// AC is a running concentrator.
type AC struct {
	cfg   Config
	pkt   int // AF_PACKET socket
	tun   int
	mac   [6]byte
	Stats Stats

	mu     sync.Mutex
	client [6]byte // learnt from PADR (or ARP in plain mode)
	known  atomic.Bool
	up     atomic.Bool // session: IPCP opened; plain: client known
	id     uint8
	magic  uint32
	// lcpAcked and ipcpAcked: the client acked our request (read and
	// written by the link reader only); until then each request of the
	// client's repeats ours, in case it was lost.
	lcpAcked, ipcpAcked bool
}

// Open binds the packet socket to cfg.Iface and attaches cfg.Tun.
func Open(cfg Config) (*AC, error) {
	ifi, err := net.InterfaceByName(cfg.Iface)
	if err != nil {
		return nil, err
	}
	ac := &AC{cfg: cfg, magic: 0x5ac0ffee}
	copy(ac.mac[:], ifi.HardwareAddr)
	ac.pkt, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	if err := unix.SetsockoptInt(ac.pkt, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		ac.Close()
		return nil, fmt.Errorf("PACKET_IGNORE_OUTGOING: %w", err)
	}
	for _, o := range []int{unix.SO_RCVBUF, unix.SO_SNDBUF} {
		unix.SetsockoptInt(ac.pkt, unix.SOL_SOCKET, o, 4<<20)
	}
	if err := unix.Bind(ac.pkt, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		ac.Close()
		return nil, fmt.Errorf("bind %s: %w", cfg.Iface, err)
	}
	ac.tun, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		ac.Close()
		return nil, err
	}
	ifr, err := unix.NewIfreq(cfg.Tun)
	if err != nil {
		ac.Close()
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(ac.tun, unix.TUNSETIFF, ifr); err != nil {
		ac.Close()
		return nil, fmt.Errorf("TUNSETIFF %s: %w", cfg.Tun, err)
	}
	return ac, nil
}

// Close releases both descriptors; Run returns.
func (ac *AC) Close() error {
	if ac.pkt > 0 {
		unix.Close(ac.pkt)
	}
	if ac.tun > 0 {
		unix.Close(ac.tun)
	}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Up reports whether the relay carries IPv4: the session's IPCP is open,
// or in plain mode the client's MAC is known.
func (ac *AC) Up() bool { return ac.up.Load() }

// Run relays until ctx ends or a descriptor fails: one goroutine per
// direction, each with one read and one write system call per packet.
func (ac *AC) Run(ctx context.Context) error {
	errc := make(chan error, 2)
	go func() { errc <- ac.fromLink() }()
	go func() { errc <- ac.fromTun() }()
	select {
	case <-ctx.Done():
		ac.Close()
		return nil
	case err := <-errc:
		ac.Close()
		return err
	}
}

// hdr is the room the tun reader leaves before each packet: Ethernet
// (14), PPPoE (6) and the PPP protocol (2).
const hdr = 22

func (ac *AC) fromTun() error {
	buf := make([]byte, hdr+tunMTU+64)
	for {
		n, err := unix.Read(ac.tun, buf[hdr:])
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return fmt.Errorf("tun read: %w", err)
		}
		if !ac.up.Load() || n == 0 {
			ac.Stats.Dropped.Add(1)
			continue
		}
		ac.mu.Lock()
		client := ac.client
		ac.mu.Unlock()
		var f []byte
		if ac.cfg.Plain {
			f = buf[hdr-14 : hdr+n]
			binary.BigEndian.PutUint16(f[12:], 0x0800)
		} else {
			f = buf[:hdr+n]
			binary.BigEndian.PutUint16(f[12:], pppoe.EtherTypeSession)
			f[14], f[15] = 0x11, 0
			binary.BigEndian.PutUint16(f[16:], sessionID)
			binary.BigEndian.PutUint16(f[18:], uint16(n+2))
			binary.BigEndian.PutUint16(f[20:], 0x0021)
		}
		copy(f[0:6], client[:])
		copy(f[6:12], ac.mac[:])
		// A packet over the link's MTU (EMSGSIZE) or a full queue
		// (ENOBUFS) is dropped, as a link would.
		if _, err := unix.Write(ac.pkt, f); err != nil {
			if errors.Is(err, unix.EBADF) {
				return fmt.Errorf("link write: %w", err)
			}
			ac.Stats.Dropped.Add(1)
			continue
		}
		ac.Stats.Down.Add(1)
	}
}

func (ac *AC) fromLink() error {
	buf := make([]byte, 2048)
	for {
		n, _, err := unix.Recvfrom(ac.pkt, buf, 0)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return fmt.Errorf("link read: %w", err)
		}
		f := buf[:n]
		if n < 14 {
			ac.Stats.Dropped.Add(1)
			continue
		}
		et := binary.BigEndian.Uint16(f[12:])
		switch {
		case et == pppoe.EtherTypeSession && !ac.cfg.Plain && n >= 22 &&
			binary.BigEndian.Uint16(f[16:]) == sessionID && binary.BigEndian.Uint16(f[20:]) == 0x0021:
			l := int(binary.BigEndian.Uint16(f[18:]))
			if l < 2 || 20+l > n || !ac.up.Load() {
				ac.Stats.Dropped.Add(1)
				continue
			}
			ac.toTun(f[22 : 20+l])
		case et == 0x0800 && ac.cfg.Plain:
			ac.toTun(f[14:])
		case et == pppoe.EtherTypeSession && !ac.cfg.Plain && n >= 22:
			ac.session(f)
		case et == pppoe.EtherTypeDiscovery && !ac.cfg.Plain:
			ac.discovery(f)
		case et == 0x0806 && ac.cfg.Plain:
			ac.arp(f)
		default:
			ac.Stats.Dropped.Add(1)
		}
	}
}

func (ac *AC) toTun(p []byte) {
	if _, err := unix.Write(ac.tun, p); err != nil {
		ac.Stats.Dropped.Add(1)
		return
	}
	ac.Stats.Up.Add(1)
}

func (ac *AC) send(f []byte) {
	ac.Stats.Control.Add(1)
	unix.Write(ac.pkt, f)
}

// arp answers every who-has with the AC's MAC and learns the asker.
func (ac *AC) arp(f []byte) {
	if len(f) < 42 || binary.BigEndian.Uint16(f[20:]) != 1 {
		return
	}
	ac.mu.Lock()
	copy(ac.client[:], f[22:28])
	ac.mu.Unlock()
	ac.up.Store(true)
	r := make([]byte, 42)
	copy(r[0:6], f[22:28])
	copy(r[6:12], ac.mac[:])
	copy(r[12:22], f[12:22])
	binary.BigEndian.PutUint16(r[20:], 2)
	copy(r[22:28], ac.mac[:])
	copy(r[28:32], f[38:42]) // the asked address is ours
	copy(r[32:42], f[22:32])
	ac.send(r)
}

func (ac *AC) discovery(f []byte) {
	var tags [pppoe.MaxTags]pppoe.Tag
	d, err := pppoe.ParseDiscovery(f[14:], tags[:])
	if err != nil {
		ac.Stats.Dropped.Add(1)
		return
	}
	src := [6]byte(f[6:12])
	reply := []pppoe.Tag{{Type: pppoe.TagACName, Value: []byte("gvlab-ac")}}
	if hu, ok := d.Tag(pppoe.TagHostUniq); ok {
		reply = append(reply, pppoe.Tag{Type: pppoe.TagHostUniq, Value: hu})
	}
	sn, _ := d.Tag(pppoe.TagServiceName)
	reply = append(reply, pppoe.Tag{Type: pppoe.TagServiceName, Value: sn})
	code, sid := uint8(0), uint16(0)
	switch d.Code {
	case pppoe.CodePADI:
		code = pppoe.CodePADO
	case pppoe.CodePADR:
		code, sid = pppoe.CodePADS, sessionID
		ac.mu.Lock()
		ac.client = src
		ac.mu.Unlock()
		ac.up.Store(false)
		ac.lcpAcked, ac.ipcpAcked = false, false
	case pppoe.CodePADT:
		ac.up.Store(false)
		return
	default:
		return
	}
	b := append(append(append([]byte{}, src[:]...), ac.mac[:]...), 0x88, 0x63)
	ac.send(pppoe.AppendDiscovery(b, code, sid, reply...))
	if code == pppoe.CodePADS {
		ac.lcpRequest()
	}
}

// lcpRequest asks for MRU 1492 and the AC's magic number.
func (ac *AC) lcpRequest() {
	ac.sendControl(pppoe.ProtoLCP, pppoe.CodeConfReq, ac.nextID(), pppoe.AppendOption(
		pppoe.AppendOption(nil, 1, []byte{0x05, 0xd4}), 5, binary.BigEndian.AppendUint32(nil, ac.magic)))
}

// ipcpRequest asks for the AC's own address.
func (ac *AC) ipcpRequest() {
	ac.sendControl(pppoe.ProtoIPCP, pppoe.CodeConfReq, ac.nextID(), pppoe.AppendOption(nil, 3, ac.cfg.Local.AsSlice()))
}

func (ac *AC) nextID() uint8 { ac.id++; return ac.id }

func (ac *AC) sendControl(proto uint16, code, id uint8, data []byte) {
	ac.mu.Lock()
	client := ac.client
	ac.mu.Unlock()
	b := append(append(append([]byte{}, client[:]...), ac.mac[:]...), 0x88, 0x64)
	b = append(b, 0x11, 0, byte(sessionID>>8), byte(sessionID&0xff), 0, 0)
	b = binary.BigEndian.AppendUint16(b, proto)
	b = pppoe.AppendControl(b, code, id, data)
	binary.BigEndian.PutUint16(b[18:], uint16(len(b)-20))
	ac.send(b)
}

// session answers the client's LCP and IPCP: every LCP request is
// acked (the client asks only for MRU and magic), IPCP's address and
// DNS options are nak'd to Peer and Local until they match; any other
// protocol (IPv6CP) is rejected.
func (ac *AC) session(f []byte) {
	l := int(binary.BigEndian.Uint16(f[18:]))
	if 20+l > len(f) || l < 2 {
		ac.Stats.Dropped.Add(1)
		return
	}
	proto := binary.BigEndian.Uint16(f[20:])
	c, err := pppoe.ParseControl(f[22 : 20+l])
	if err != nil {
		ac.Stats.Dropped.Add(1)
		return
	}
	switch proto {
	case pppoe.ProtoLCP:
		switch c.Code {
		case pppoe.CodeConfReq:
			ac.sendControl(proto, pppoe.CodeConfAck, c.ID, c.Data)
			if !ac.lcpAcked {
				ac.lcpRequest()
			}
		case pppoe.CodeConfAck:
			if !ac.lcpAcked {
				ac.lcpAcked = true
				ac.ipcpRequest()
			}
		case pppoe.CodeEchoReq:
			ac.sendControl(proto, pppoe.CodeEchoReply, c.ID, binary.BigEndian.AppendUint32(nil, ac.magic))
		case pppoe.CodeTermReq:
			ac.up.Store(false)
			ac.lcpAcked, ac.ipcpAcked = false, false
			ac.sendControl(proto, pppoe.CodeTermAck, c.ID, nil)
		}
	case pppoe.ProtoIPCP:
		switch c.Code {
		case pppoe.CodeConfReq:
			var optBuf [pppoe.MaxOptions]pppoe.Option
			opts, err := pppoe.DecodeOptions(c.Data, optBuf[:])
			if err != nil {
				return
			}
			var nak []byte
			for _, o := range opts {
				want := ac.cfg.Local
				if o.Type == 3 {
					want = ac.cfg.Peer
				}
				if (o.Type == 3 || o.Type == 129 || o.Type == 131) && (len(o.Data) != 4 || netip.AddrFrom4([4]byte(o.Data)) != want) {
					nak = pppoe.AppendOption(nak, o.Type, want.AsSlice())
				}
			}
			if nak != nil {
				ac.sendControl(proto, pppoe.CodeConfNak, c.ID, nak)
			} else {
				ac.sendControl(proto, pppoe.CodeConfAck, c.ID, c.Data)
				ac.up.Store(true)
			}
			if !ac.ipcpAcked {
				ac.ipcpRequest()
			}
		case pppoe.CodeConfAck:
			ac.ipcpAcked = true
		}
	default:
		data := binary.BigEndian.AppendUint16(nil, proto)
		ac.sendControl(pppoe.ProtoLCP, pppoe.CodeProtoRej, ac.nextID(), append(data, f[22:20+l]...))
	}
}
