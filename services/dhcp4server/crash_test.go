package dhcp4server

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gvrouter/gvrouter/services/rawudp"
)

// crashEnv, when set to a lease file's path, makes the test binary a
// server child (see TestMain) for TestLeaseFileCrash.
const crashEnv = "DHCP4SERVER_CRASH_CHILD"

func TestMain(m *testing.M) {
	if file := os.Getenv(crashEnv); file != "" {
		os.Exit(crashChild(file))
	}
	os.Exit(m.Run())
}

func crashConfig(file string) Config {
	return Config{
		ServerAddr: ip("10.0.0.1"),
		Subnet:     netip.MustParsePrefix("10.0.0.0/16"),
		RangeStart: ip("10.0.1.0"),
		RangeEnd:   ip("10.0.8.255"),
		LeaseTime:  time.Hour,
		LeaseFile:  file,
		// Bursts of 600 new clients at once.
		NewLeaseBurst: MaxNewLeaseBurst, NewLeaseRate: MaxNewLeaseRate,
	}
}

// crashChild serves over stdin and stdout until stdin ends or it is
// killed.
func crashChild(file string) int {
	s, err := New(crashConfig(file), &pipeTransport{r: bufio.NewReader(os.Stdin), w: os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if p := s.Status().LeaseFileProblem; p != "" {
		fmt.Fprintln(os.Stderr, "child:", p)
		return 3
	}
	if err := s.Run(context.Background()); err != nil && err != io.EOF {
		fmt.Fprintln(os.Stderr, err)
	}
	return 0
}

// pipeTransport carries DHCP payloads over a byte stream, each behind a
// 2-byte length.
type pipeTransport struct {
	r  io.Reader
	mu sync.Mutex
	w  io.Writer
}

func (p *pipeTransport) Recv(ctx context.Context) (rawudp.Packet, error) {
	b, err := readFrame(p.r)
	if err != nil {
		return rawudp.Packet{}, err
	}
	return rawudp.Packet{Payload: b, Src: netip.MustParseAddrPort("0.0.0.0:68"),
		Dst: netip.MustParseAddrPort("255.255.255.255:67"), SrcMAC: b[28:34]}, nil
}

func (p *pipeTransport) Send(pkt rawudp.Packet) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return writeFrame(p.w, pkt.Payload)
}

func writeFrame(w io.Writer, b []byte) error {
	_, err := w.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...))
	return err
}

func readFrame(r io.Reader) ([]byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint16(h[:]))
	_, err := io.ReadFull(r, b)
	return b, err
}

// TestLeaseFileCrash runs the server as a child process, SIGKILLs it in
// the middle of a burst of REQUESTs, and checks that every lease it had
// ACKed is in the lease file, which is never torn; three rounds, each
// child starting from the file the last one left.
func TestLeaseFileCrash(t *testing.T) {
	file := filepath.Join(t.TempDir(), "leases.json")
	acked := map[string]netip.Addr{}
	const perRound, killAfter = 600, 150
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashEnv+"="+file)
		cmd.Stderr = os.Stderr
		in, _ := cmd.StdinPipe()
		outPipe, _ := cmd.StdoutPipe()
		out := bufio.NewReader(outPipe)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		hw := func(i int) net.HardwareAddr {
			return net.HardwareAddr{0x02, 0x33, byte(round), 0, byte(i >> 8), byte(i)}
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		go func() { // the pipes hold less than a burst: write while reading
			for i := range perRound {
				if writeFrame(in, bcast(msg(dhcpv4.MessageTypeDiscover, hw(i))).Payload) != nil {
					return
				}
			}
		}()
		offers := make([]string, perRound)
		for range perRound {
			b, err := readFrame(out)
			if err != nil {
				t.Fatalf("round %d: reading OFFERs: %v", round, err)
			}
			m, _ := dhcpv4.FromBytes(b)
			offers[int(m.ClientHWAddr[4])<<8|int(m.ClientHWAddr[5])] = m.YourIPAddr.String()
		}
		go func() {
			for i := range perRound {
				if writeFrame(in, bcast(msg(dhcpv4.MessageTypeRequest, hw(i), withReq(offers[i]), withSID(ip("10.0.0.1")))).Payload) != nil {
					return
				}
			}
		}()
		n := 0
		for {
			b, err := readFrame(out)
			if err != nil {
				break // the child is dead: every whole ACK it sent is read
			}
			m, err := dhcpv4.FromBytes(b)
			if err != nil || m.MessageType() != dhcpv4.MessageTypeAck {
				t.Fatalf("round %d: reply %v %v, want ACK", round, m, err)
			}
			acked[m.ClientHWAddr.String()] = ip4(m.YourIPAddr)
			if n++; n == killAfter {
				cmd.Process.Kill() // SIGKILL
			}
		}
		cmd.Wait()
		in.Close()
		s, err := New(crashConfig(file), nil)
		if err != nil {
			t.Fatal(err)
		}
		st := s.Status()
		if st.LeaseFileProblem != "" {
			t.Fatalf("round %d: lease file after SIGKILL: %s", round, st.LeaseFileProblem)
		}
		have := map[string]netip.Addr{}
		for _, l := range st.Leases {
			have[l.MAC.String()] = l.Addr
		}
		for m, a := range acked {
			if have[m] != a {
				t.Errorf("round %d: ACKed lease %s → %v is %v in the file", round, m, a, have[m])
			}
		}
		t.Logf("round %d: %d ACKs read before and after SIGKILL, %d leases in the file", round, n, len(st.Leases))
		if n < killAfter {
			t.Fatalf("round %d: only %d ACKs before the child died", round, n)
		}
	}
}
