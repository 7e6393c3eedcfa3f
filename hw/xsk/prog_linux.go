package xsk

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Action is what the XDP program does with a frame whose receive queue
// has no socket in the map.
type Action int

const (
	// ActionPass hands the frame to the kernel (XDP_PASS). This is the
	// default: on a router port the takeover's ingress drop (nftables
	// netdev or tc) still keeps the kernel's stack silent, while the
	// frame stays visible to AF_PACKET taps and counted by the kernel,
	// so a port with more hardware queues than sockets shows up as
	// frames in the wrong place rather than as a silent loss.
	ActionPass Action = iota
	// ActionDrop drops the frame in the driver (XDP_DROP): the cheapest,
	// and the right choice when every queue is known to have a socket.
	ActionDrop
)

func (a Action) xdp() int32 {
	if a == ActionDrop {
		return 1 // XDP_DROP
	}
	return 2 // XDP_PASS
}

// AttachMode chooses the XDP hook.
type AttachMode int

const (
	// AttachAuto tries the driver's hook (native) and falls back to the
	// generic one.
	AttachAuto AttachMode = iota
	// AttachNative insists on the driver's hook (XDP_FLAGS_DRV_MODE).
	AttachNative
	// AttachGeneric uses the generic hook after the skb is built
	// (XDP_FLAGS_SKB_MODE): slower, works on every netdev.
	AttachGeneric
)

// XDPMode is the hook an attached program runs in.
type XDPMode int

const (
	// XDPNone: not attached.
	XDPNone XDPMode = iota
	// XDPNative: in the driver, before any skb exists.
	XDPNative
	// XDPGeneric: in the core receive path, on an skb.
	XDPGeneric
)

func (m XDPMode) String() string {
	switch m {
	case XDPNone:
		return "none"
	case XDPNative:
		return "native"
	case XDPGeneric:
		return "generic"
	}
	return fmt.Sprintf("XDPMode(%d)", int(m))
}

var (
	// ErrPermission means the process lacks a capability that AF_XDP or
	// its XDP program needs (CAP_BPF and CAP_NET_ADMIN to load and attach
	// the program, CAP_NET_RAW for the sockets; root has all). A caller
	// may fall back to AF_PACKET.
	ErrPermission = errors.New("not permitted")
	// ErrUnsupported means the kernel cannot do what was asked: no BPF
	// links for XDP, no XSKMAP, or no XDP on the interface in the mode
	// asked for. A caller may fall back to AF_PACKET.
	ErrUnsupported = errors.New("not supported")
)

// Program is the XDP program of one interface: it redirects each frame
// to the socket registered for the frame's receive queue
// (bpf_redirect_map(&xsks, ctx->rx_queue_index, fallback)). It is
// attached through a BPF link, which the kernel removes when the last
// descriptor of it is closed, so the program goes away with the process
// even when the process is killed. A Program is safe for concurrent use.
type Program struct {
	queues int
	xsks   *ebpf.Map
	prog   *ebpf.Program

	mu   sync.Mutex // protects link, mode
	link link.Link
	mode XDPMode
}

// ProgramConfig describes a Program.
type ProgramConfig struct {
	// Queues is the number of receive queues the map has room for, e.g.
	// 4: at least the interface's count (ethtool -l), since a frame's
	// queue index is its key.
	Queues int
	// Fallback is what happens to frames of a queue with no socket.
	Fallback Action
}

// xdpMdRxQueueIndex is the offset of rx_queue_index in struct xdp_md
// (data, data_end, data_meta, ingress_ifindex, rx_queue_index: u32 each;
// linux/bpf.h).
const xdpMdRxQueueIndex = 16

// instructions is the program. Since Linux 5.3 bpf_redirect_map's
// flags' low bits are the action taken when the key has no entry, so no
// separate lookup is needed.
func instructions(xsksFD int, fallback Action) asm.Instructions {
	return asm.Instructions{
		// r2 = ctx->rx_queue_index
		asm.LoadMem(asm.R2, asm.R1, xdpMdRxQueueIndex, asm.Word),
		// r1 = &xsks
		asm.LoadMapPtr(asm.R1, xsksFD),
		// r3 = fallback action
		asm.Mov.Imm(asm.R3, fallback.xdp()),
		// r0 = bpf_redirect_map(r1, r2, r3)
		asm.FnRedirectMap.Call(),
		asm.Return(),
	}
}

// NewProgram creates the XSKMAP and loads the program into the kernel.
// It is not attached until Attach.
func NewProgram(cfg ProgramConfig) (*Program, error) {
	if cfg.Queues < 1 || cfg.Queues > 1<<16 {
		return nil, fmt.Errorf("xsk: program: %d queues, want 1 to 65536", cfg.Queues)
	}
	if cfg.Fallback != ActionPass && cfg.Fallback != ActionDrop {
		return nil, fmt.Errorf("xsk: program: bad fallback action %d", cfg.Fallback)
	}
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       "gvrouter_xsks",
		Type:       ebpf.XSKMap,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: uint32(cfg.Queues),
	})
	if err != nil {
		return nil, fmt.Errorf("xsk: create XSKMAP: %w", classify(err, "CAP_BPF", "CAP_NET_ADMIN"))
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "gvrouter_xsk",
		Type:         ebpf.XDP,
		Instructions: instructions(xsks.FD(), cfg.Fallback),
		// The program calls no GPL-only helper; the kernel wants a
		// license string all the same.
		License: "Dual MIT/GPL",
	})
	if err != nil {
		xsks.Close()
		return nil, fmt.Errorf("xsk: load XDP program: %w", classify(err, "CAP_BPF", "CAP_NET_ADMIN"))
	}
	return &Program{queues: cfg.Queues, xsks: xsks, prog: prog}, nil
}

// Register makes frames received on s's queue go to s.
func (p *Program) Register(s *Socket) error {
	if s.Queue() >= p.queues {
		return fmt.Errorf("xsk: register queue %d: the map has %d entries", s.Queue(), p.queues)
	}
	if err := p.xsks.Put(uint32(s.Queue()), uint32(s.FD())); err != nil {
		return fmt.Errorf("xsk: register queue %d: %w", s.Queue(), err)
	}
	return nil
}

// Unregister removes the socket of queue from the map; its frames then
// meet the fallback action.
func (p *Program) Unregister(queue int) error {
	if err := p.xsks.Delete(uint32(queue)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("xsk: unregister queue %d: %w", queue, err)
	}
	return nil
}

// Attach links the program to interface ifindex of the calling thread's
// network namespace, in the hook mode asks for (AttachAuto: native, else
// generic), and returns the hook it got. A program is attached to one
// interface at most.
func (p *Program) Attach(ifindex int, mode AttachMode) (XDPMode, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.link != nil {
		return p.mode, fmt.Errorf("xsk: attach to ifindex %d: already attached", ifindex)
	}
	try := func(flags link.XDPAttachFlags) error {
		l, err := link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: ifindex, Flags: flags})
		if err != nil {
			return err
		}
		p.link = l
		return nil
	}
	switch mode {
	case AttachNative, AttachAuto:
		err := try(link.XDPDriverMode)
		if err == nil {
			p.mode = XDPNative
			return p.mode, nil
		}
		if mode == AttachNative || !fallbackToGeneric(err) {
			return XDPNone, fmt.Errorf("xsk: attach XDP (native) to ifindex %d: %w", ifindex, classify(err, "CAP_NET_ADMIN"))
		}
		if gerr := try(link.XDPGenericMode); gerr != nil {
			return XDPNone, fmt.Errorf("xsk: attach XDP to ifindex %d: native: %v; generic: %w", ifindex, err, classify(gerr, "CAP_NET_ADMIN"))
		}
		p.mode = XDPGeneric
		return p.mode, nil
	case AttachGeneric:
		if err := try(link.XDPGenericMode); err != nil {
			return XDPNone, fmt.Errorf("xsk: attach XDP (generic) to ifindex %d: %w", ifindex, classify(err, "CAP_NET_ADMIN"))
		}
		p.mode = XDPGeneric
		return p.mode, nil
	}
	return XDPNone, fmt.Errorf("xsk: attach: bad mode %d", mode)
}

// fallbackToGeneric reports whether a native attach failed in a way the
// generic hook may not: the driver has no XDP, or refuses this program
// (MTU, queue layout). A missing privilege, or another program already
// on the interface, fails the same way in both modes.
func fallbackToGeneric(err error) bool {
	return !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.ENODEV)
}

// Mode returns the hook the program is attached in (XDPNone before
// Attach and after Detach).
func (p *Program) Mode() XDPMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Detach removes the program from its interface.
func (p *Program) Detach() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.link == nil {
		return nil
	}
	err := p.link.Close()
	p.link, p.mode = nil, XDPNone
	return err
}

// Close detaches the program and frees it and its map.
func (p *Program) Close() error {
	return errors.Join(p.Detach(), p.prog.Close(), p.xsks.Close())
}

// classify wraps EPERM in ErrPermission, naming which of caps the process
// lacks, and ebpf's "not supported" in ErrUnsupported.
func classify(err error, caps ...string) error {
	switch {
	case errors.Is(err, unix.EPERM):
		missing := missingCaps(caps...)
		if missing == "" {
			missing = strings.Join(caps, " and ") + " (held, yet refused: a seccomp or LSM policy?)"
		}
		return fmt.Errorf("%w: needs %s: %w", ErrPermission, missing, err)
	case errors.Is(err, ebpf.ErrNotSupported), errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return err
}

// capBits are the capability numbers (linux/capability.h) classify names.
var capBits = map[string]uint{"CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13, "CAP_SYS_ADMIN": 21, "CAP_BPF": 39}

// missingCaps returns those of caps the process's effective set lacks
// (/proc/self/status CapEff), joined with "and"; "" if it has them all or
// cannot tell.
func missingCaps(caps ...string) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	var eff uint64
	found := false
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			found = err == nil
		}
	}
	if !found {
		return ""
	}
	var miss []string
	for _, c := range caps {
		if eff&(1<<capBits[c]) == 0 {
			miss = append(miss, c)
		}
	}
	return strings.Join(miss, " and ")
}
