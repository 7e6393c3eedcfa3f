package lab

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// ctMaxSysctl is the kernel's conntrack table limit. Outside the initial
// namespace the kernel makes it read-only (nf_conntrack_standalone.c:
// "Don't allow non-init_net ns to alter global sysctls").
const ctMaxSysctl = "net/netfilter/nf_conntrack_max"

// ipctnlMsgCTDelete is IPCTNL_MSG_CT_DELETE (linux/netfilter/nfnetlink_conntrack.h);
// without a tuple it flushes the table.
const ipctnlMsgCTDelete = 2

// benchKernelFlood is bench mode k: the flood of mode f, measured the same
// way, with the router stopped and the router namespace's kernel doing
// the NAT as in mode n (forwarding, nftables masquerade, conntrack) on the
// same veths. It tells what the flood costs the established flow on this
// machine when the router is not in the path. The table limit is
// floodTableMax where the kernel lets the namespace set it; otherwise the
// kernel runs with the host's limit and the line says so. RSS is not
// measured: the kernel's memory is no one process's.
func (l *lab) benchKernelFlood(ctx context.Context) error {
	defer func() {
		// The flood leaves tens of thousands of SYN_SENT entries for 120 s.
		if err := flushConntrack(l.rtrNS); err != nil {
			l.log.Warn("lab: flush the router namespace's conntrack table", "err", err)
		}
	}()
	_, undo, err := l.benchSetup(ctx, 'n')
	if undo != nil {
		defer undo()
	}
	if err != nil {
		return err
	}
	limit, restore := l.limitConntrack()
	defer restore()
	k0 := l.kernelState()
	r, err := l.floodThrough(ctx, l.kernelProbe())
	forwarded := l.kernelState().ForwDatagrams - k0.ForwDatagrams
	fmt.Fprintf(l.out, "\n(k) kernel nftables masquerade, router stopped: flood: %s; conntrack entries %v (%s); early drops %d, drops %d; kernel forwarded %d IPv4 packets; %s\n",
		r.sentString(), r.Flows, limit, r.EarlyDropped, r.TableFull, forwarded, r.flowString())
	if err != nil {
		return err
	}
	errs := r.flowErrs(true)
	if limit.set {
		errs = append(errs, r.tableErrs()...)
	}
	if err := floodErr(errs); err != nil {
		fmt.Fprintf(l.out, "(k) FAILS: %v\n", err)
		return nil
	}
	fmt.Fprintf(l.out, "(k) holds: every flood interval >= half the pre-flood median\n")
	return nil
}

// ctLimit is the conntrack limit mode k ran with.
type ctLimit struct {
	set  bool   // nf_conntrack_max of the router namespace was floodTableMax
	note string // why not, if not
}

func (c ctLimit) String() string {
	if c.set {
		return fmt.Sprintf("limit %d", floodTableMax)
	}
	return "NO 10,000 LIMIT: " + c.note
}

// limitConntrack sets nf_conntrack_max of the router namespace to
// floodTableMax if the kernel allows it there, and never changes the
// host's: the returned function restores the namespace's value.
func (l *lab) limitConntrack() (ctLimit, func()) {
	nop := func() {}
	host, err := readSysctl(ctMaxSysctl)
	if err != nil {
		return ctLimit{note: fmt.Sprintf("read the host's nf_conntrack_max: %v", err)}, nop
	}
	var old string
	err = inNetns(l.rtrNS, func() (err error) {
		if old, err = readSysctl(ctMaxSysctl); err != nil {
			return err
		}
		return writeSysctl(ctMaxSysctl, strconv.Itoa(floodTableMax), false)
	})
	if err != nil {
		return ctLimit{note: fmt.Sprintf("cannot set nf_conntrack_max in the router namespace (%v), so the kernel ran with the host's %s", err, host)}, nop
	}
	restore := func() {
		if err := inNetns(l.rtrNS, func() error { return writeSysctl(ctMaxSysctl, old, false) }); err != nil {
			l.log.Warn("lab: restore nf_conntrack_max of the router namespace", "err", err)
		}
	}
	if now, err := readSysctl(ctMaxSysctl); err != nil || now != host {
		// A kernel whose value is one for all namespaces: undo at once.
		restore()
		if err == nil {
			err = writeSysctl(ctMaxSysctl, host, false)
		}
		return ctLimit{note: fmt.Sprintf("nf_conntrack_max is global on this kernel (left at the host's %s; %v)", host, err)}, nop
	}
	return ctLimit{set: true}, restore
}

// kernelProbe reads the router namespace's conntrack table: its size and
// the early_drop and drop counters of /proc/net/stat/nf_conntrack.
func (l *lab) kernelProbe() floodProbe {
	return floodProbe{table: func(context.Context) (flows int, early, full uint64, err error) {
		err = inNetns(l.rtrNS, func() error {
			n, err := readSysctl("net/netfilter/nf_conntrack_count")
			if err != nil {
				return err
			}
			if flows, err = strconv.Atoi(n); err != nil {
				return err
			}
			stat, err := os.ReadFile("/proc/thread-self/net/stat/nf_conntrack")
			if err != nil {
				return err
			}
			if early, err = ctStatSum(stat, "early_drop"); err != nil {
				return err
			}
			full, err = ctStatSum(stat, "drop")
			return err
		})
		if err != nil {
			err = fmt.Errorf("lab: conntrack of %s: %w", l.rtrNS, err)
		}
		return flows, early, full, err
	}}
}

// flushConntrack empties the conntrack table of namespace ns, as
// `conntrack -F` does: ctnetlink IPCTNL_MSG_CT_DELETE without a tuple.
func flushConntrack(ns string) error {
	return inNetns(ns, func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			return fmt.Errorf("netlink socket: %w", err)
		}
		defer unix.Close(fd)
		tv := unix.NsecToTimeval((5 * time.Second).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		// nlmsghdr, then nfgenmsg {family AF_UNSPEC, version 0, res_id 0}.
		msg := make([]byte, unix.NLMSG_HDRLEN+4)
		binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
		binary.NativeEndian.PutUint16(msg[4:], unix.NFNL_SUBSYS_CTNETLINK<<8|ipctnlMsgCTDelete)
		binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
		binary.NativeEndian.PutUint32(msg[8:], 1)
		if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return fmt.Errorf("ctnetlink flush: %w", err)
		}
		buf := make([]byte, 4096)
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("ctnetlink flush ack: %w", err)
		}
		if n < unix.NLMSG_HDRLEN+4 || binary.NativeEndian.Uint16(buf[4:]) != unix.NLMSG_ERROR {
			return fmt.Errorf("ctnetlink flush: unexpected reply %x", buf[:n])
		}
		if e := int32(binary.NativeEndian.Uint32(buf[unix.NLMSG_HDRLEN:])); e != 0 {
			return fmt.Errorf("ctnetlink flush: %w", unix.Errno(-e))
		}
		return nil
	})
}
