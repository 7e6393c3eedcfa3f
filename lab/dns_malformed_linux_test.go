package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// dnsMalformedScapy sends, from the LAN host to the router's forwarder
// (argv[1]:53), malformed DNS over UDP (built with scapy's raw bytes:
// scapy's DNS layer would repair them) and over TCP, and prints what it
// sent and what came back.
const dnsMalformedScapy = `
import json, socket, struct, sys, time
from scapy.all import DNS, DNSQR, raw
server = sys.argv[1]
def hdr(qd=1, an=0, flags=0x0100, id=0x4242):
    return struct.pack("!HHHHHH", id, flags, qd, an, 0, 0)
q = b"\x00\x01\x00\x01"
cases = {
    "empty": b"",
    "one-byte": b"\x01",
    "header-only-no-question": hdr(qd=0),
    "compression-loop": hdr() + b"\xc0\x0c" + q,
    "compression-forward": hdr() + b"\xc0\x20" + q,
    "truncated-label": hdr() + b"\x3fabc",
    "label-over-63": hdr() + b"\x40" + b"a" * 64 + b"\x00" + q,
    "name-over-255": hdr() + (b"\x3f" + b"a" * 63) * 5 + b"\x00" + q,
    "qdcount-5-one-question": hdr(qd=5) + b"\x03www\x03isp\x04test\x00" + q,
    "response-to-the-server": hdr(flags=0x8180) + b"\x03www\x03isp\x04test\x00" + q,
    "garbage-1400": bytes(range(256)) * 5 + b"x" * 120,
}
answers = {}
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.3)
for name, payload in cases.items():
    s.sendto(payload, (server, 53))
    try:
        data, _ = s.recvfrom(65535)
        answers[name] = "rcode=%d" % (data[3] & 15) if len(data) >= 4 else "short"
    except socket.timeout:
        answers[name] = "none"
# TCP: a 64 KiB message of garbage, a length prefix promising more than
# is sent, and a loop in a well-framed message.
tcp = {}
def tcp_case(name, data, wait=1.0):
    c = socket.create_connection((server, 53), timeout=3)
    try:
        c.sendall(data)
        c.settimeout(wait)
        try:
            got = c.recv(65535)
            tcp[name] = "closed" if not got else "answer %d bytes" % len(got)
        except socket.timeout:
            tcp[name] = "none"
    except (ConnectionResetError, BrokenPipeError):
        tcp[name] = "reset"
    finally:
        c.close()
tcp_case("64k-garbage", struct.pack("!H", 65535) + b"\xff" * 65535)
tcp_case("short-length", struct.pack("!H", 500) + hdr(), wait=0.5)
loop = hdr() + b"\xc0\x0c" + q
tcp_case("tcp-compression-loop", struct.pack("!H", len(loop)) + loop)
# A good query still answers afterwards.
good = raw(DNS(id=7, rd=1, qd=DNSQR(qname="www.isp.test", qtype="A")))
s.settimeout(3)
s.sendto(good, (server, 53))
data, _ = s.recvfrom(65535)
print(json.dumps({"udp": answers, "tcp": tcp, "good": DNS(data).an.rdata if DNS(data).an else ""}))
`

// TestLabDNSMalformed sends malformed DNS to the router's forwarder from
// the LAN host with scapy and plain sockets: compression loops, truncated
// and over-long labels and names, wrong counts, a response, garbage, a
// 64 KiB TCP message and a short TCP frame. Each is dropped or answered
// FORMERR, counted as malformed, nothing reaches the ISP, and the
// forwarder answers a good query afterwards.
func TestLabDNSMalformed(t *testing.T) {
	parallelLab(t)
	requireScapy(t)
	runWithHook(t, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		before, err := l.dnsStatus(ctx)
		if err != nil {
			return err
		}
		upstreamBefore := before.UpstreamQueries
		out, err := output(ctx, l.lanNS, scapyPython, "-c", dnsMalformedScapy, lanRouter4.Addr().String())
		if err != nil {
			return fmt.Errorf("scapy: %w: %s", err, out)
		}
		var res struct {
			UDP  map[string]string
			TCP  map[string]string
			Good string
		}
		if err := json.Unmarshal(lastLine(out), &res); err != nil {
			return fmt.Errorf("scapy output %q: %w", out, err)
		}
		t.Logf("UDP %v; TCP %v; good query → %s", res.UDP, res.TCP, res.Good)
		for name, got := range res.UDP {
			if got != "none" && got != "rcode=1" { // no answer, or FORMERR
				return fmt.Errorf("UDP %s: %s, want no answer or FORMERR", name, got)
			}
		}
		if res.Good != ispWebAddr.String() {
			return fmt.Errorf("a good query after the malformed ones = %q, want %s", res.Good, ispWebAddr)
		}
		after, err := l.dnsStatus(ctx)
		if err != nil {
			return err
		}
		// At least the unreadable ones: empty, one byte, the loop, the
		// truncated and over-long labels and names, garbage, and the
		// TCP loop.
		if d := after.Drops["malformed"] - before.Drops["malformed"]; d < 7 {
			return fmt.Errorf("malformed drops rose by %d for %d malformed UDP and %d TCP messages, want at least 7", d, len(res.UDP), len(res.TCP))
		}
		// Only the good query (a miss, or none if cached) went upstream.
		if n := after.UpstreamQueries - upstreamBefore; n > 1 {
			return fmt.Errorf("%d upstream queries during the malformed run, want at most the good one's", n)
		}
		t.Logf("malformed drops %d → %d", before.Drops["malformed"], after.Drops["malformed"])
		return nil
	})
}
