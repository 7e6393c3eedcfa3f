package lab

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gvrouter/gvrouter/router/status"
)

// pnRec is one MACsec frame seen on the link: its SA (SCI, AN) and PN.
type pnRec struct {
	sci uint64
	an  uint8
	pn  uint32
}

// capture reads frames from an AF_PACKET socket on one interface of a
// namespace (the first 64 octets of each, enough for a SecTAG) until
// stopped. It keeps the SecTAG of every MACsec frame and counts the
// others by EtherType.
type capture struct {
	fd   int
	done chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	recs   []pnRec
	others map[uint16]int
	clear  []byte // the first of the others, to name who sent it
	err    error
}

// captureMaxRecs bounds a capture's memory.
const captureMaxRecs = 2_000_000

func startCapture(ns, ifname string) (*capture, error) {
	c := &capture{done: make(chan struct{}), others: map[uint16]int{}}
	err := inNetns(ns, func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		proto := int(htons(unix.ETH_P_ALL))
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return err
		}
		// A large buffer: the capture competes for 2 cores with iperf3
		// and two routers.
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 256<<20)
		tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		c.fd = fd
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("capture on %s in %s: %w", ifname, ns, err)
	}
	c.wg.Add(1)
	go c.routineRead()
	return c, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (c *capture) routineRead() {
	defer c.wg.Done()
	buf := make([]byte, 64)
	for {
		select {
		case <-c.done:
			return
		default:
		}
		n, _, err := unix.Recvfrom(c.fd, buf, unix.MSG_TRUNC)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			return
		}
		f := buf[:min(n, len(buf))]
		if len(f) < 14 {
			continue
		}
		et := binary.BigEndian.Uint16(f[12:])
		c.mu.Lock()
		if et == 0x88e5 && len(f) >= 20 {
			r := pnRec{an: f[14] & 3, pn: binary.BigEndian.Uint32(f[16:])}
			if f[14]&0x20 != 0 && len(f) >= 28 {
				r.sci = binary.BigEndian.Uint64(f[20:])
			}
			if len(c.recs) < captureMaxRecs {
				c.recs = append(c.recs, r)
			}
		} else {
			c.others[et]++
			if c.clear == nil {
				c.clear = append([]byte(nil), f...)
			}
		}
		c.mu.Unlock()
	}
}

// count returns the MACsec frames captured so far.
func (c *capture) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

// stop ends the capture and returns what it saw and the kernel's count
// of frames it dropped (PACKET_STATISTICS).
func (c *capture) stop() (recs []pnRec, others map[uint16]int, dropped uint32, err error) {
	close(c.done)
	c.wg.Wait()
	st, serr := unix.GetsockoptTpacketStats(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if serr == nil {
		dropped = st.Drops
	}
	unix.Close(c.fd)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recs, c.others, dropped, c.err
}

// checkPNOrder returns, per SA, the frames seen and the first PN that did
// not strictly increase, if any.
func checkPNOrder(recs []pnRec) (perSA map[string]int, err error) {
	type sa struct {
		sci uint64
		an  uint8
	}
	last := map[sa]uint32{}
	perSA = map[string]int{}
	var errs []error
	for i, r := range recs {
		k := sa{r.sci, r.an}
		perSA[fmt.Sprintf("%016x/%d", r.sci, r.an)]++
		if p, ok := last[k]; ok && r.pn <= p && len(errs) < 10 {
			errs = append(errs, fmt.Errorf("frame %d: SA %016x/%d PN %d after %d", i, r.sci, r.an, r.pn, p))
		}
		last[k] = r.pn
	}
	return perSA, errors.Join(errs...)
}

// routerStatus fetches path ("/", "/api/status", "/metrics") from the
// router whose host-socket status listener is in ns.
func routerStatus(ctx context.Context, ns, path string) ([]byte, error) {
	return httpGet(ctx, ns, "http://127.0.0.1:"+strconv.Itoa(routerStatusPort)+path)
}

func secyStatus(ctx context.Context, ns string) (status.MACsec, error) {
	body, err := routerStatus(ctx, ns, "/api/status")
	if err != nil {
		return status.MACsec{}, err
	}
	var s status.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return status.MACsec{}, err
	}
	if len(s.MACsec) != 1 {
		return status.MACsec{}, fmt.Errorf("status in %s has %d SecYs, want 1", ns, len(s.MACsec))
	}
	return s.MACsec[0], nil
}

func rxCounter(m status.MACsec, name string) uint64 {
	var n uint64
	for _, sc := range m.RXSC {
		n += sc.Counters[name]
	}
	return n
}

// labKeys returns the hex keys of the lab run (both cases).
func labKeys(l *lab) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(l.dir, "ms-router*.key"))
	if err != nil || len(files) != 2 {
		return nil, fmt.Errorf("lab key files %v: %v", files, err)
	}
	var keys []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		k := strings.TrimSpace(string(b))
		keys = append(keys, strings.ToLower(k), strings.ToUpper(k))
	}
	return keys, nil
}

// TestRunMACsec runs the MACsec lab against the real router binary: ping
// and TCP cross the MACsec link both ways in both families, only MACsec
// crosses the link, both SecYs count verified frames, and no output of
// either router (logs at debug level, status page, JSON, metrics) nor any
// `gvrouter check` error ever shows a key.
func TestRunMACsec(t *testing.T) {
	requirePrivileged(t)
	bin := buildRouter(t)
	var out bytes.Buffer
	var leakChecked bool
	opt := Options{
		RouterBinary: bin,
		StatusPort:   freePort(t),
		Topology:     TopologyMACsec,
		Log:          testLogger(t),
		Stdout:       &out,
		routerArgs:   []string{"-debug"},
		testHook: func(l *lab) error {
			ctx := context.Background()
			if got := labNamespaces(t, os.Getpid()); len(got) != 4 {
				return fmt.Errorf("lab namespaces = %v, want 4", got)
			}
			k2Before, err := readKernelState(l.rtr2NS)
			if err != nil {
				return err
			}
			capt, err := startCapture(l.rtr2NS, msPort)
			if err != nil {
				return err
			}
			if _, err := ping(ctx, l.lanNS, wanHost4.Addr()); err != nil {
				capt.stop()
				return err
			}
			// Router 2's namespace: its kernel forwarded nothing and holds
			// no address on the router's ports, like router 1's (proofs).
			k2After, err := readKernelState(l.rtr2NS)
			if err != nil {
				return err
			}
			if err := kernelSilent(k2Before, k2After); err != nil {
				return fmt.Errorf("router 2 namespace: %w", err)
			}
			for _, dev := range []string{msPort, wanPort} {
				if a, err := ifAddrs(ctx, l.rtr2NS, dev); err != nil || len(a) > 0 {
					return fmt.Errorf("router 2 namespace: kernel addresses on %s: %v, %v", dev, a, err)
				}
			}
			recs, others, _, err := capt.stop()
			if err != nil {
				return err
			}
			if len(recs) < 6 {
				return fmt.Errorf("%d MACsec frames on the link during a ping, want >= 6", len(recs))
			}
			if others[0x0800]+others[0x86dd]+others[0x0806] > 0 {
				return fmt.Errorf("frames in clear on the MACsec link: %v, the first % x", others, capt.clear)
			}
			var errs []error
			for _, ns := range []string{l.rtrNS, l.rtr2NS} {
				m, err := secyStatus(ctx, ns)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if ok := rxCounter(m, "InPktsOK"); ok == 0 || !m.Encrypt || m.TXSC["OutPktsEncrypted"] == 0 {
					errs = append(errs, fmt.Errorf("%s: SecY %+v: want InPktsOK and OutPktsEncrypted > 0", ns, m))
				}
			}
			// The key grep.
			keys, err := labKeys(l)
			if err != nil {
				return err
			}
			var outputs []struct {
				what string
				b    []byte
			}
			add := func(what string, b []byte) {
				outputs = append(outputs, struct {
					what string
					b    []byte
				}{what, b})
			}
			for _, ns := range []string{l.rtrNS, l.rtr2NS} {
				for _, p := range []string{"/", "/api/status", "/metrics"} {
					b, err := routerStatus(ctx, ns, p)
					if err != nil {
						errs = append(errs, err)
					}
					add(ns+" "+p, b)
				}
			}
			for _, f := range []string{"router.log", "router2.log"} {
				b, err := os.ReadFile(filepath.Join(l.dir, f))
				if err != nil || len(b) == 0 {
					errs = append(errs, fmt.Errorf("log %s: %d bytes, %v", f, len(b), err))
				}
				add(f, b)
			}
			// router check on broken configs that name or hold the keys.
			open := filepath.Join(l.dir, "open.key")
			os.WriteFile(open, []byte(keys[0]+"\n"), 0o644)
			os.Chmod(open, 0o644)
			for i, bad := range []string{
				"key_file: " + open,                             // mode 0644
				"key: " + keys[0] + "00",                        // wrong length
				"key: x" + keys[0],                              // not hex
				"key_file: " + filepath.Join(l.dir, "lab.yaml"), // not a key
				"key: " + keys[0] + ", key_file: " + open,       // both
				"key: " + keys[2][:len(keys[2])-1] + "g",        // bad hex digit
			} {
				cfg := fmt.Sprintf(`ports: [{name: lan0}, {name: ms0}]
interfaces:
  - {name: lan, port: lan0, role: lan, addresses: [10.1.0.1/24]}
  - {name: link, port: ms0, role: wan}
macsec:
  - name: ms1
    on: link
    cipher: gcm-aes-256
    tx: [{an: 0, key_id: "01", %s}]
`, bad)
				p := filepath.Join(l.dir, fmt.Sprintf("check%d.yaml", i))
				os.WriteFile(p, []byte(cfg), 0o600)
				b, err := exec.Command(l.opt.RouterBinary, "check", "-config", p).CombinedOutput()
				if err == nil {
					errs = append(errs, fmt.Errorf("router check %s passed, want an error", bad))
				}
				add("router check "+strconv.Itoa(i), b)
			}
			for _, o := range outputs {
				for _, k := range keys {
					if bytes.Contains(o.b, []byte(k)) {
						errs = append(errs, fmt.Errorf("%s shows a key", o.what))
					}
				}
			}
			t.Logf("key grep: %d outputs of %d bytes checked for %d key spellings", len(outputs), func() int {
				n := 0
				for _, o := range outputs {
					n += len(o.b)
				}
				return n
			}(), len(keys))
			leakChecked = true
			return errors.Join(errs...)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := Run(ctx, opt)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatalf("Run() error: %v", err)
	}
	if !leakChecked {
		t.Errorf("the key grep did not run")
	}
	for _, want := range []string{
		"MACsec link",
		"ok   ping LAN→WAN IPv4", "ok   ping WAN→LAN IPv4", "ok   ping LAN→WAN IPv6", "ok   ping WAN→LAN IPv6",
		"ok   TCP LAN→WAN IPv4", "ok   TCP WAN→LAN IPv4", "ok   TCP LAN→WAN IPv6", "ok   TCP WAN→LAN IPv6",
		"ok   router counters rose",
		"proofs passed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if ns := labNamespaces(t, os.Getpid()); len(ns) != 0 {
		t.Errorf("namespaces left after Run: %v", ns)
	}
}

// pnOrderFrames is how many MACsec frames TestMACsecPNOrder captures.
const pnOrderFrames = 100_000

// TestMACsecPNOrder sends an iperf3 flow across the MACsec lab while both
// crypto workers of each router are busy, captures at least
// pnOrderFrames frames on the link and checks offline that PNs strictly
// increase per SA; the receiving routers, with replay window 0, count no
// InPktsLate. The SecYs run with parallel: always. A worker counts as
// busy with at least 5% of the frames.
//
// The routers are built with -tags labyield (macsec.Config.
// YieldBetweenRuns): each worker yields its core before each run of
// frames it claims, so the helper a call readied joins at once, on the
// caller's core. Without it the helper's share depended on the flow and
// on the machine, not on the router: its wakeup takes 100-170 us on a
// 2-vCPU VM, as long as sealing ~100 frames, so it shared only calls that
// came back to back. An unpaced flow on a machine with a core to spare
// gave it 14-25 % of router 1's frames (with the V3 ring alone and with
// the light ring); the same flow paced smooth at 30, 60 or 150 Mbit/s
// (iperf3 --fq-rate), as a busy machine makes it, 2-5 % with either
// ring, and 35-37 % with the yield.
func TestMACsecPNOrder(t *testing.T) {
	requirePrivileged(t, "iperf3")
	bin := buildRouterTags(t, "labyield")
	opt := Options{
		RouterBinary: bin,
		StatusPort:   freePort(t),
		Topology:     TopologyMACsec,
		Log:          testLogger(t),
		// Share every batch worth splitting with the helpers: left to
		// itself the router would not wake them for the lab's small
		// batches on a VM (macsec/help.go), and this test is about order
		// under parallel crypto.
		macsecParallel: "always",
		fewProofs:      true, // its iperf3 crosses the fast path and the SecY
		testHook: func(l *lab) error {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			srv, err := startChild(l.log, "iperf3 server", l.wanNS, filepath.Join(l.dir, "iperf3-server.log"), "iperf3", "-s", "-p", strconv.Itoa(benchPort))
			if err != nil {
				return err
			}
			defer srv.stop()
			if err := waitListening(ctx, l.wanNS, benchPort, srv); err != nil {
				return err
			}
			capt, err := startCapture(l.rtr2NS, msPort)
			if err != nil {
				return err
			}
			start := time.Now()
			cli := command(ctx, l.lanNS, "iperf3", "-c", wanHost4.Addr().String(), "-p", strconv.Itoa(benchPort), "-t", "40", "-J")
			var cliOut bytes.Buffer
			cli.Stdout = &cliOut
			if err := cli.Start(); err != nil {
				capt.stop()
				return err
			}
			for capt.count() < pnOrderFrames && time.Since(start) < 45*time.Second {
				time.Sleep(100 * time.Millisecond)
			}
			// Enough frames: stop the flow (a short run keeps the test
			// modest), then the capture.
			cli.Process.Signal(os.Interrupt)
			cli.Wait()
			recs, others, dropped, err := capt.stop()
			if err != nil {
				return err
			}
			perSA, orderErr := checkPNOrder(recs)
			t.Logf("captured %d MACsec frames in %v (socket drops %d), per SA %v, others %v",
				len(recs), time.Since(start).Round(time.Millisecond), dropped, perSA, others)
			var errs []error
			if len(recs) < pnOrderFrames {
				errs = append(errs, fmt.Errorf("captured %d MACsec frames, want >= %d", len(recs), pnOrderFrames))
			}
			if orderErr != nil {
				errs = append(errs, fmt.Errorf("PN order: %w", orderErr))
			}
			for i, ns := range []string{l.rtrNS, l.rtr2NS} {
				m, err := secyStatus(ctx, ns)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				busy := 0
				var total uint64
				for _, n := range m.WorkerFrames {
					total += n
				}
				for _, n := range m.WorkerFrames {
					if total > 0 && n*20 >= total {
						busy++
					}
				}
				t.Logf("router %d: window %d, InPktsOK %d, InPktsLate %d, worker frames %v (%d busy)",
					i+1, m.Window, rxCounter(m, "InPktsOK"), rxCounter(m, "InPktsLate"), m.WorkerFrames, busy)
				if m.Window != 0 || !m.Replay {
					errs = append(errs, fmt.Errorf("router %d: replay %v window %d, want on, 0", i+1, m.Replay, m.Window))
				}
				if late := rxCounter(m, "InPktsLate"); late != 0 {
					errs = append(errs, fmt.Errorf("router %d: InPktsLate = %d, want 0", i+1, late))
				}
				if busy < 2 {
					errs = append(errs, fmt.Errorf("router %d: %d workers did >= 5%% of the crypto (%v), want >= 2", i+1, busy, m.WorkerFrames))
				}
			}
			return errors.Join(errs...)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := Run(ctx, opt); err != nil {
		t.Fatalf("Run() error: %v", err)
	}
}

// TestMACsecRekeyReload rolls router 1's transmit key over by reload, as
// an operator (or MKA) would: router 2 first learns receive SA 1, then
// router 1 installs transmit SA 1 and moves encoding_sa to it, while UDP
// datagrams and a TCP connection cross the link. Not one datagram is
// lost, the TCP connection lives on, and neither SecY counts a frame it
// could not place or verify.
func TestMACsecRekeyReload(t *testing.T) {
	requirePrivileged(t)
	bin := buildRouter(t)
	opt := Options{
		RouterBinary: bin,
		StatusPort:   freePort(t),
		Topology:     TopologyMACsec,
		Log:          testLogger(t),
		fewProofs:    true, // the hook sends its own UDP and TCP across the rekey
		testHook: func(l *lab) error {
			ctx := context.Background()
			o, err := l.macsecKeys()
			if err != nil {
				return err
			}
			o.rekeyFile = filepath.Join(l.dir, "ms-router1-rekey.key")
			if err := os.WriteFile(o.rekeyFile, []byte(strings.Repeat("5a", 16)+"\n"), 0o600); err != nil {
				return err
			}
			reload := func(n int, path string, c *child, ns string, want func(status.MACsec) bool) error {
				b, err := macsecRouterConfig(l.prefix, n, routerStatusPort, o)
				if err != nil {
					return err
				}
				if err := os.WriteFile(path, b, 0o600); err != nil {
					return err
				}
				if err := c.cmd.Process.Signal(unix.SIGHUP); err != nil {
					return err
				}
				for deadline := time.Now().Add(proofTimeout); ; {
					m, err := secyStatus(ctx, ns)
					if err == nil && want(m) {
						return nil
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("router %d did not take the new SAs: %+v, %v", n, m, err)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			if err := reload(2, filepath.Join(l.dir, "lab-router2.yaml"), l.router2, l.rtr2NS, func(m status.MACsec) bool {
				return len(m.RXSC) == 1 && len(m.RXSC[0].SA) == 2
			}); err != nil {
				return err
			}

			ringBefore, err := portDrops(ctx, l.rtrNS, lanPort, "ring", time.Now())
			if err != nil {
				return err
			}
			// A UDP stream from host A to host B across the rollover.
			const datagrams = 2000
			pc, err := listenPacketIn(l.wanNS, netip.AddrPortFrom(wanHost4.Addr(), 0).String())
			if err != nil {
				return err
			}
			defer pc.Close()
			got := make(chan int, 1)
			go func() {
				seen := map[uint32]bool{}
				buf := make([]byte, 64)
				for len(seen) < datagrams {
					pc.SetReadDeadline(time.Now().Add(3 * time.Second))
					n, _, err := pc.ReadFrom(buf)
					if err != nil {
						break
					}
					if n >= 4 {
						seen[binary.BigEndian.Uint32(buf)] = true
					}
				}
				got <- len(seen)
			}()
			cc, err := dialPacketIn(ctx, l.lanNS, pc.LocalAddr().String())
			if err != nil {
				return err
			}
			defer cc.Close()
			sent := make(chan error, 1)
			go func() {
				var b [32]byte
				for i := range datagrams {
					binary.BigEndian.PutUint32(b[:], uint32(i))
					if _, err := cc.Write(b[:]); err != nil {
						sent <- err
						return
					}
					time.Sleep(2 * time.Millisecond)
				}
				sent <- nil
			}()
			time.Sleep(500 * time.Millisecond)
			if err := reload(1, filepath.Join(l.dir, "lab.yaml"), l.router, l.rtrNS, func(m status.MACsec) bool {
				return m.EncodingSA == 1 && len(m.TXSA) == 2
			}); err != nil {
				return err
			}
			if err := <-sent; err != nil {
				return err
			}
			n := <-got
			var errs []error
			// Frames the LAN port's receive ring overran under CPU contention
			// (the machine is shared; the ring holds ~16 ms of this light
			// traffic) never reached the SecY: they are counted, and they
			// are not the rollover's.
			ringAfter, err := portDrops(ctx, l.rtrNS, lanPort, "ring", time.Now())
			if err != nil {
				return err
			}
			ring := ringAfter - ringBefore
			if uint64(n)+ring < datagrams {
				errs = append(errs, fmt.Errorf("host B got %d of %d datagrams across the key rollover; %d ring overruns at router 1's LAN port account for only part of the loss", n, datagrams, ring))
			}
			if _, err := tcpEcho(ctx, l.lanNS, l.wanNS, wanHost4.Addr()); err != nil {
				errs = append(errs, fmt.Errorf("TCP after the rollover: %w", err))
			}
			m1, err1 := secyStatus(ctx, l.rtrNS)
			m2, err2 := secyStatus(ctx, l.rtr2NS)
			if err := errors.Join(err1, err2); err != nil {
				return err
			}
			var sa1 uint64
			for _, sa := range m1.TXSA {
				if sa.AN == 1 {
					sa1 = sa.Counters["OutPktsEncrypted"]
				}
			}
			if sa1 == 0 {
				errs = append(errs, fmt.Errorf("router 1 sent nothing with SA 1 after the rollover: %+v", m1.TXSA))
			}
			for _, c := range []string{"InPktsNoSA", "InPktsNoSAError", "InPktsNotValid", "InPktsInvalid", "InPktsLate"} {
				if v := rxCounter(m2, c); v != 0 {
					errs = append(errs, fmt.Errorf("router 2 %s = %d, want 0", c, v))
				}
			}
			for _, c := range []string{"OutPktsNoActiveSA", "OutPktsTooLong"} {
				if v := m1.Counters[c]; v != 0 {
					errs = append(errs, fmt.Errorf("router 1 %s = %d, want 0", c, v))
				}
			}
			t.Logf("rollover: %d/%d datagrams (%d ring overruns at router 1's LAN port), router 1 SA 1 sent %d, router 2 rx SC %v", n, datagrams, ring, sa1, m2.RXSC[0].Counters)
			return errors.Join(errs...)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := Run(ctx, opt); err != nil {
		t.Fatalf("Run() error: %v", err)
	}
}

// listenPacketIn opens a UDP socket on addr in namespace ns.
func listenPacketIn(ns, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := inNetns(ns, func() error {
		var err error
		pc, err = net.ListenPacket("udp", addr)
		return err
	})
	return pc, err
}

// dialPacketIn opens a UDP socket in namespace ns connected to addr.
func dialPacketIn(ctx context.Context, ns, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNetns(ns, func() error {
		var err error
		var d net.Dialer
		c, err = d.DialContext(ctx, "udp", addr)
		return err
	})
	return c, err
}

// portDrops returns a drop counter of a port of the router whose status
// listener is in ns, from a status sample taken after since.
func portDrops(ctx context.Context, ns, port, reason string, since time.Time) (uint64, error) {
	for deadline := since.Add(statusFreshTimeout); ; {
		b, err := routerStatus(ctx, ns, "/api/status")
		if err != nil {
			return 0, err
		}
		var st status.Snapshot
		if err := json.Unmarshal(b, &st); err != nil {
			return 0, err
		}
		if !st.Time.Before(since) || time.Now().After(deadline) {
			for _, p := range st.Ports {
				if p.Name == port {
					return p.Drops[reason], nil
				}
			}
			return 0, fmt.Errorf("no port %s in %s", port, ns)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
