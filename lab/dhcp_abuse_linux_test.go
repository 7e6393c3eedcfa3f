package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
)

// dhcpAbuseScapy sends, from the LAN host, malformed DHCP to the router's
// server, a starvation run, and a static client's DISCOVER. Modes:
//
//	malformed            one datagram of each kind below, names printed
//	starve N SECS        N DISCOVER+REQUEST pairs from random MACs, spread
//	                     over SECS seconds; prints {"sent": N, "secs": took}
//	burst N SECS SERVER RANGE  N REQUESTs in SELECTING from new MACs for
//	                     random pool addresses; prints the ACKs seen
//	discover MAC         a DISCOVER from MAC; prints the OFFER's yiaddr or ""
const dhcpAbuseScapy = `
import json, os, random, struct, sys, time
from scapy.all import (BOOTP, DHCP, IP, UDP, AsyncSniffer, Ether, Raw, conf, fragment,
                       get_if_hwaddr, sendp, srp1)
conf.verb = 0
conf.checkIPaddr = False
IF = "eth0"
mode = sys.argv[1]
me = get_if_hwaddr(IF)

def mac2b(m):
    return bytes.fromhex(m.replace(":", ""))

def l2(payload, src=me):
    return Ether(src=src, dst="ff:ff:ff:ff:ff:ff") / IP(src="0.0.0.0", dst="255.255.255.255") / UDP(sport=68, dport=67) / payload

def bootp(mac, xid=None, op=1, htype=1, hlen=6):
    return BOOTP(op=op, htype=htype, hlen=hlen, xid=xid if xid is not None else random.getrandbits(32),
                 chaddr=mac2b(mac) + b"\x00" * 10, flags=0x8000)

COOKIE = b"\x63\x82\x53\x63"
def raw_bootp(mac, options, cookie=COOKIE):
    # A BOOTP header by hand, then cookie and options as given (scapy's
    # DHCP layer would repair them).
    b = bytes(bootp(mac))[:236]
    return Raw(b + cookie + options)

if mode == "malformed":
    mac = "02:77:01:ee:00:01"
    sent = []
    def send(name, p):
        sendp(l2(p), iface=IF)
        sent.append(name)
        time.sleep(0.02)
    send("empty", Raw(b""))
    send("short-header", Raw(bytes(bootp(mac))[:100]))
    send("wrong-magic-cookie", raw_bootp(mac, b"\x35\x01\x01\xff", cookie=b"\xde\xad\xbe\xef"))
    send("truncated-option", raw_bootp(mac, b"\x35\x01\x01\x3d\xc8\x01\x02\x03"))
    send("no-end-option", raw_bootp(mac, b"\x35\x01\x01\x0c\x03abc"))
    send("no-message-type", raw_bootp(mac, b"\x0c\x03abc\xff"))
    # Option overload (52) = both sname and file, whose contents run past
    # their fields.
    send("option-overload", Raw(bytes(bootp(mac))[:44] + b"\x0c\x7f" + b"A" * 62 + b"\x0c\xff" + b"B" * 126 + COOKIE + b"\x35\x01\x01\x34\x01\x03\xff"))
    # Option 61 in three parts (RFC 3396 concatenation): 765 bytes.
    send("giant-client-id", raw_bootp(mac, b"\x35\x01\x01" + (b"\x3d\xff" + b"\x01" * 255) * 3 + b"\xff"))
    send("client-id-1-byte", raw_bootp(mac, b"\x35\x01\x01\x3d\x01\x01\xff"))
    send("bad-hardware", bootp(mac, htype=6, hlen=16) / DHCP(options=[("message-type", "discover"), "end"]))
    send("bootreply-from-client", bootp(mac, op=2) / DHCP(options=[("message-type", "offer"), "end"]))
    send("offer-type", bootp(mac) / DHCP(options=[("message-type", "ack"), "end"]))
    send("request-without-fields", bootp(mac) / DHCP(options=[("message-type", "request"), "end"]))
    send("garbage-1400", Raw(os.urandom(1400)))
    # A DISCOVER in IP fragments, and one with a wrong UDP checksum.
    for f in fragment(IP(src="0.0.0.0", dst="255.255.255.255") / UDP(sport=68, dport=67) / bootp(mac) / DHCP(options=[("message-type", "discover"), "end"]) / Raw(b"P" * 600), fragsize=256):
        sendp(Ether(src=me, dst="ff:ff:ff:ff:ff:ff") / f, iface=IF)
    sent.append("fragmented-discover")
    p = l2(bootp(mac) / DHCP(options=[("message-type", "discover"), "end"]))
    p[UDP].chksum = 0x1234
    sendp(p, iface=IF)
    sent.append("bad-udp-checksum")
    print(json.dumps({"sent": sent}))
elif mode == "starve":
    n, secs = int(sys.argv[2]), float(sys.argv[3])
    server = sys.argv[4]
    first, last = [int(x.split(".")[3]) for x in sys.argv[5].split("-")]
    prefix = ".".join(sys.argv[5].split("-")[0].split(".")[:3])
    s = conf.L2socket(iface=IF)
    frames = []
    for i in range(n):
        mac = "02:ee:%02x:%02x:%02x:%02x" % (random.getrandbits(8), random.getrandbits(8), i >> 8 & 255, i & 255)
        xid = random.getrandbits(32)
        d = l2(bootp(mac, xid) / DHCP(options=[("message-type", "discover"), "end"]), src=mac)
        want = "%s.%d" % (prefix, random.randint(first, last))
        r = l2(bootp(mac, xid) / DHCP(options=[("message-type", "request"), ("server_id", server),
                                               ("requested_addr", want), "end"]), src=mac)
        frames.append(bytes(d))
        frames.append(bytes(r))
    start = time.time()
    per = secs / len(frames)
    for i, f in enumerate(frames):
        s.send(f)
        ahead = start + i * per - time.time()
        if ahead > 0:
            time.sleep(ahead)
    print(json.dumps({"sent": n, "secs": time.time() - start}))
elif mode == "burst":
    # N DISCOVER+REQUEST pairs from new MACs over SECS seconds, each
    # REQUEST for a random pool address; prints every ACK seen.
    n, secs, server, rng = int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
    first, last = [int(x.split(".")[3]) for x in rng.split("-")]
    prefix = ".".join(rng.split("-")[0].split(".")[:3])
    acks = []
    def prn(p):
        if p.haslayer(DHCP) and p[BOOTP].op == 2 and ("message-type", 5) in p[DHCP].options:
            acks.append({"mac": ":".join("%02x" % b for b in bytes(p[BOOTP].chaddr)[:6]), "addr": p[BOOTP].yiaddr})
    sn = AsyncSniffer(iface=IF, filter="udp and dst port 68", prn=prn, store=False)
    sn.start()
    time.sleep(0.5)
    s = conf.L2socket(iface=IF)
    start = time.time()
    for i in range(n):
        mac = "02:cc:00:00:%02x:%02x" % (i >> 8 & 255, i & 255)
        xid = random.getrandbits(32)
        want = "%s.%d" % (prefix, random.randint(first, last))
        s.send(bytes(l2(bootp(mac, xid) / DHCP(options=[("message-type", "request"), ("server_id", server),
                                                       ("requested_addr", want), "end"]), src=mac)))
        ahead = start + (i + 1) * secs / n - time.time()
        if ahead > 0:
            time.sleep(ahead)
    time.sleep(1.5)
    sn.stop()
    print(json.dumps({"acks": acks}))
elif mode == "discover":
    mac = sys.argv[2]
    p = Ether(src=mac, dst="ff:ff:ff:ff:ff:ff") / IP(src="0.0.0.0", dst="255.255.255.255") / UDP(sport=68, dport=67) / bootp(mac) / DHCP(options=[("message-type", "discover"), "end"])
    a = srp1(p, iface=IF, timeout=3, retry=2)
    print(json.dumps({"yiaddr": a[BOOTP].yiaddr if a is not None and a.haslayer(BOOTP) else ""}))
`

// TestLabDHCPServerAbuse attacks the router's DHCP server from the LAN
// host with scapy while busybox udhcpc holds a lease: malformed DHCP
// (truncated options, option overload, wrong magic cookie, a giant
// client-id, wrong op and hardware, fragments, bad checksums) is dropped
// and counted, then 10,000 DISCOVER/REQUEST pairs from random MACs in
// 10 s take what the new-lease budget allows of the pool (see
// TestLabDHCPStarvationLimit) without touching the existing client's
// renewals or the static lease; the router's RSS growth is stated and
// bounded.
func TestLabDHCPServerAbuse(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t, "udhcpc")
	requireScapy(t)
	runWithHook(t, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		u, err := l.startUdhcpc(ctx, "udhcpc", "victim")
		if err != nil {
			return err
		}
		defer u.stop()
		events := u.events
		bound, err := waitEvent(ctx, events, "bound", 20*time.Second)
		if err != nil {
			return err
		}
		before, err := l.lanServer(ctx)
		if err != nil {
			return err
		}

		// Malformed DHCP: every datagram dropped and counted; the router
		// answers nothing to them and keeps running.
		out, err := output(ctx, l.lanNS, scapyPython, "-c", dhcpAbuseScapy, "malformed")
		if err != nil {
			return fmt.Errorf("scapy malformed: %w", err)
		}
		var sent struct{ Sent []string }
		if err := json.Unmarshal(lastLine(out), &sent); err != nil {
			return fmt.Errorf("scapy malformed output %q: %w", out, err)
		}
		var after status.DHCPServer
		if err := waitFor(ctx, 5*time.Second, func() error {
			after, err = l.lanServer(ctx)
			if err != nil {
				return err
			}
			for _, reason := range []string{"malformed", "wrong_magic_cookie", "bad_client_id", "bad_hardware", "wrong_op", "wrong_type", "bad_request"} {
				if after.Drops[reason] <= before.Drops[reason] {
					return fmt.Errorf("drop %s stayed at %d after %v", reason, after.Drops[reason], sent.Sent)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		if after.Counters["offer"] != before.Counters["offer"] {
			return fmt.Errorf("the server offered %d times to malformed DHCP", after.Counters["offer"]-before.Counters["offer"])
		}
		t.Logf("malformed DHCP %v: drops %v", sent.Sent, after.Drops)

		// Starvation: 10,000 random MACs in 10 s.
		rss0, err := l.routerRSS()
		if err != nil {
			return err
		}
		renews := countEvents(events, "renew")
		out, err = output(ctx, l.lanNS, scapyPython, "-c", dhcpAbuseScapy, "starve", "10000", "10",
			lanRouter4.Addr().String(), lanDHCPRange)
		if err != nil {
			return fmt.Errorf("scapy starve: %w", err)
		}
		var flood struct {
			Sent int
			Secs float64
		}
		if err := json.Unmarshal(lastLine(out), &flood); err != nil {
			return fmt.Errorf("scapy starve output %q: %w", out, err)
		}
		rss1, err := l.routerRSS()
		if err != nil {
			return err
		}
		srv, err := l.lanServer(ctx)
		if err != nil {
			return err
		}
		if srv.PoolUsed > srv.PoolSize || len(srv.Leases) > srv.PoolSize+1 {
			return fmt.Errorf("after the flood: pool %d/%d, %d leases", srv.PoolUsed, srv.PoolSize, len(srv.Leases))
		}
		if d := srv.Counters["discover"] - after.Counters["discover"]; d < uint64(flood.Sent)/2 {
			return fmt.Errorf("discover counter rose by %d for %d sent", d, flood.Sent)
		}
		// The existing client renews through it (T1 is 10 s).
		if err := waitFor(ctx, 25*time.Second, func() error {
			if n := countEvents(events, "renew"); n <= renews {
				return fmt.Errorf("udhcpc (%s) did not renew during or after the flood (%d renewals before it)", bound["ip"], renews)
			}
			return nil
		}); err != nil {
			return err
		}
		// The static lease is still offered to its MAC.
		out, err = output(ctx, l.lanNS, scapyPython, "-c", dhcpAbuseScapy, "discover", labStaticMAC)
		if err != nil {
			return fmt.Errorf("scapy discover: %w", err)
		}
		var offer struct{ Yiaddr string }
		if err := json.Unmarshal(lastLine(out), &offer); err != nil || offer.Yiaddr != labStaticAddr {
			return fmt.Errorf("static MAC %s was offered %q (%v), want %s", labStaticMAC, offer.Yiaddr, err, labStaticAddr)
		}
		growth := rss1 - rss0
		t.Logf("starvation: %d DISCOVER/REQUEST pairs in %.1f s; pool %d/%d, pool_exhausted %d, ack %d; RSS %d → %d KiB (%+d KiB)",
			flood.Sent, flood.Secs, srv.PoolUsed, srv.PoolSize, srv.Counters["pool_exhausted"], srv.Counters["ack"], rss0>>10, rss1>>10, growth>>10)
		if growth > 32<<20 {
			return fmt.Errorf("RSS grew by %d KiB in the flood, want a bounded server (< 32 MiB)", growth>>10)
		}
		return nil
	})
}

// lanServer returns the LAN DHCP server's status.
func (l *lab) lanServer(ctx context.Context) (status.DHCPServer, error) {
	snap, err := l.statusSince(ctx, time.Now())
	if err != nil {
		return status.DHCPServer{}, err
	}
	for _, s := range snap.DHCPServers {
		return s, nil
	}
	return status.DHCPServer{}, fmt.Errorf("no DHCP server on the status page")
}

// lastLine returns the last non-empty line of out.
func lastLine(out []byte) []byte {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return []byte(lines[len(lines)-1])
}

// countEvents counts the udhcpc event log's lines for event.
func countEvents(path, event string) int {
	b, _ := os.ReadFile(path)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, event+" ") {
			n++
		}
	}
	return n
}

// TestLabDHCPLeaseCrash kills the router (SIGKILL) in the middle of a
// burst of lease writes (REQUESTs from 300 new MACs in 3 s, ACKs
// recorded on the LAN host's wire), restarts it and finds every ACKed
// lease in its table; then it corrupts the lease file, and the restarted
// router reports it, keeps it as .corrupt and serves on.
func TestLabDHCPLeaseCrash(t *testing.T) {
	parallelLab(t)
	requireScapy(t)
	runWithHook(t, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		burst := command(ctx, l.lanNS, scapyPython, "-c", dhcpAbuseScapy, "burst", "300", "3",
			lanRouter4.Addr().String(), lanDHCPRange)
		var out strings.Builder
		burst.Stdout = &out
		if err := burst.Start(); err != nil {
			return err
		}
		// Kill it mid-burst: once 40 ACKs (and lease writes) are out.
		if err := waitFor(ctx, 20*time.Second, func() error {
			srv, err := l.lanServer(ctx)
			if err == nil && srv.Counters["ack"] < 40 {
				err = fmt.Errorf("%d ACKs so far", srv.Counters["ack"])
			}
			return err
		}); err != nil {
			return fmt.Errorf("burst: %w", err)
		}
		if err := l.router.cmd.Process.Kill(); err != nil {
			return err
		}
		<-l.router.done
		l.router = nil
		if err := burst.Wait(); err != nil {
			return fmt.Errorf("scapy burst: %w", err)
		}
		var res struct{ Acks []struct{ MAC, Addr string } }
		if err := json.Unmarshal(lastLine([]byte(out.String())), &res); err != nil {
			return fmt.Errorf("scapy burst output %q: %w", out.String(), err)
		}
		if len(res.Acks) == 0 {
			return fmt.Errorf("no ACK before the SIGKILL: nothing to check")
		}
		if err := l.startRouter(ctx); err != nil {
			return err
		}
		srv, err := l.lanServer(ctx)
		if err != nil {
			return err
		}
		have := map[string]string{}
		for _, ls := range srv.Leases {
			have[ls.MAC.String()] = ls.Addr.String()
		}
		var lost []string
		for _, a := range res.Acks {
			if have[a.MAC] != a.Addr {
				lost = append(lost, a.MAC+"="+a.Addr)
			}
		}
		if len(lost) > 0 {
			return fmt.Errorf("%d of %d ACKed leases lost in the SIGKILL: %v", len(lost), len(res.Acks), lost)
		}
		t.Logf("SIGKILL after 40 ACKs of a 300-REQUEST burst: all %d ACKed leases in the table after restart (%d leases)", len(res.Acks), len(srv.Leases))

		// A corrupt lease file: reported, kept aside, replaced; the server serves.
		if err := l.stopRouter(); err != nil {
			return err
		}
		file := filepath.Join(l.dir, "state-router", "dhcp4", "lan.json")
		if _, err := os.Stat(file); err != nil {
			return fmt.Errorf("lease file: %w", err)
		}
		if err := os.WriteFile(file, []byte(`{"version": 1, "leases": [{"mac": "02:cc`), 0o600); err != nil {
			return err
		}
		if err := l.startRouter(ctx); err != nil {
			return fmt.Errorf("router with a corrupt lease file: %w", err)
		}
		srv, err = l.lanServer(ctx)
		if err != nil {
			return err
		}
		if !strings.Contains(srv.LeaseFileError, "corrupt") {
			return fmt.Errorf("status lease_file_error = %q, want the corrupt file reported", srv.LeaseFileError)
		}
		if _, err := os.Stat(file + ".corrupt"); err != nil {
			return fmt.Errorf("the corrupt file was not kept aside: %w", err)
		}
		out2, err := output(ctx, l.lanNS, scapyPython, "-c", dhcpAbuseScapy, "discover", labStaticMAC)
		if err != nil {
			return err
		}
		var offer struct{ Yiaddr string }
		if err := json.Unmarshal(lastLine(out2), &offer); err != nil || offer.Yiaddr != labStaticAddr {
			return fmt.Errorf("after the corrupt file: static MAC offered %q (%v), want %s", offer.Yiaddr, err, labStaticAddr)
		}
		t.Logf("corrupt lease file: %q", srv.LeaseFileError)
		return nil
	})
}
