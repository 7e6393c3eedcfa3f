package linuxpeer_test

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gvrouter/gvrouter/internal/linuxpeer"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/macsec"
	"github.com/gvrouter/gvrouter/mka"
	"github.com/gvrouter/gvrouter/mka/mkatest"
)

// saFailRE matches wpa_supplicant's report of the kernel refusing an SA.
var saFailRE = regexp.MustCompile(`macsec_drv_create_(receive|transmit)_sa: failed to communicate: .*`)

// packetTransport is an mka.Transport on an AF_PACKET socket.
type packetTransport struct{ fd int }

// Send implements mka.Transport.
func (t packetTransport) Send(frame []byte) error {
	_, err := unix.Write(t.fd, frame)
	return err
}

// TestMKAAgainstWPASupplicant runs package mka's Participant, as key
// server (priority 16 against wpa_supplicant's 255), on the tap against
// Debian's wpa_supplicant 2.10 (driver macsec_linux) in the guest, both
// with the same CAK and CKN: both must list the other as a live peer,
// the participant distributes a SAK (AES Key Wrap) that wpa_supplicant
// unwraps to the very key the participant installed in its own (fake,
// recording) SecY, and for GCM-AES-128 the guest kernel's SecY must get a
// receive and a transmit SA whose key identifier is the participant's
// KI. For GCM-AES-256 wpa_supplicant 2.10 accepts and unwraps the SAK,
// but its macsec_linux driver keeps the SecY it made for GCM-AES-128 and
// the kernel refuses the 32-octet SAs (EINVAL): the test checks the
// unwrap and reports what the kernel did.
func TestMKAAgainstWPASupplicant(t *testing.T) {
	for _, tc := range []struct {
		name  string
		suite macsec.CipherSuite
		klen  int
	}{
		{"gcm-aes-128", macsec.GCMAES128, 16},
		{"gcm-aes-256", macsec.GCMAES256, 32},
	} {
		t.Run(tc.name, func(t *testing.T) { testMKA(t, tc.suite, tc.klen) })
	}
}

func testMKA(t *testing.T, suite macsec.CipherSuite, klen int) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const (
		cakHex = "135bd758b0ee5c11c55ff6ab19fdb199"
		cknHex = "96437a93ccf10d9dfe347846cce52c7d"
	)
	p, ns := linuxpeer.StartT(t, ctx, "mka", map[string]string{
		"MKA_CAK": cakHex, "MKA_CKN": cknHex, "MKA_PRIORITY": "255", "ADDR": "10.77.0.2/24",
	})
	part, secy, stop := startParticipant(t, ctx, p, ns, cakHex, cknHex, 16, suite)

	guestSCI := macsec.SCI(0x525400770002_0001)
	var st mka.State
	deadline := time.Now().Add(30 * time.Second)
	for {
		st = part.State()
		live := len(st.Live) == 1 && st.Live[0].SCI == guestSCI
		if live && st.KeyServer && st.Latest != nil && st.Latest.TX && st.Latest.RX {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("participant state after 30 s: %+v; stats %+v", st, part.Stats())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("participant: key server, live peer %v (MI %v), SAK %v AN %d", st.Live[0].SCI, st.Live[0].MI, st.Latest.KI, st.Latest.AN)

	if _, err := p.WaitConsole(ctx, regexp.MustCompile(`(?m)^LPEER MACSEC-IF (\S+)`), 20*time.Second); err != nil {
		t.Fatalf("guest made no SecY: %v", err)
	}
	// The kernel shows the 16-octet key identifier wpa_supplicant gave
	// it: the key server's MI and then the KN, which wpa_supplicant 2.10
	// writes in host (little-endian) order, not the network order of
	// 802.1X 9.8 (its ieee802_1x_kay.c copies the u32 as it is).
	kn := st.Latest.KI.KN
	mi := hex.EncodeToString(st.Latest.KI.MI[:])
	kiBE := mi + hex.EncodeToString([]byte{byte(kn >> 24), byte(kn >> 16), byte(kn >> 8), byte(kn)})
	kiLE := mi + hex.EncodeToString([]byte{byte(kn), byte(kn >> 8), byte(kn >> 16), byte(kn >> 24)})
	saRE := regexp.MustCompile(`(?m)^\s+` + strconv.Itoa(int(st.Latest.AN)) + `: PN \d+, state on, key (` + kiBE + `|` + kiLE + `)$`)
	// wpa_supplicant -K prints the unwrapped SAK; it must be ours (checked
	// once the participant has stopped and its SecY may be read).
	m, err := p.WaitConsole(ctx, regexp.MustCompile(`(?m)AES Key Unwrap of SAK\.*: - hexdump\(len=`+strconv.Itoa(klen)+`\): ([0-9a-f ]+)$`), 30*time.Second)
	if err != nil {
		t.Fatalf("no %d-octet SAK in wpa_supplicant's debug output: %v", klen, err)
	}
	sak, err := hex.DecodeString(strings.ReplaceAll(m[1], " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	var show string
	// wpa_supplicant 2.10 elects itself at first (our first MKPDUs, with
	// no live peer yet, do not claim Key Server), rejects our SAK and
	// drops our MKPDUs until our peer entry expires; it then elects us.
	// That takes about 10 s.
	deadline = time.Now().Add(30 * time.Second)
	for {
		show = p.MustRun(t, ctx, "ip macsec show", 10*time.Second)
		if len(saRE.FindAllString(show, -1)) >= 2 {
			break
		}
		if f := saFailRE.FindString(p.Console()); suite == macsec.GCMAES256 && f != "" {
			t.Logf("wpa_supplicant 2.10 accepted the GCM-AES-256 SAK, but the kernel refused its SAs: %s", f)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("guest's ip macsec show has no TX and RX SA %d with key %s:\n%s", st.Latest.AN, kiBE, show)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if saRE.MatchString(show) && !strings.Contains(show, kiBE) {
		t.Logf("the guest's key identifier carries the KN in little-endian order (wpa_supplicant 2.10)")
	}
	if !strings.Contains(p.Console(), "Peer "+mi+" was elected as the key server") {
		t.Errorf("wpa_supplicant did not report electing the participant (MI %s) key server", mi)
	}
	t.Logf("guest:\n%s", show)

	stop()
	tx := secy.TX[st.Latest.AN]
	if tx == nil || !tx.Config.Key.Equal(macsec.NewKey(sak)) {
		t.Errorf("the SAK wpa_supplicant unwrapped is not the one the participant installed for transmit (AN %d)", st.Latest.AN)
	}
}

// startParticipant runs an mka.Participant with a recording SecY on p's
// tap (an AF_PACKET socket in ns) until stop is called or t ends; after
// stop the SecY may be read.
func startParticipant(t *testing.T, ctx context.Context, p *linuxpeer.Peer, ns *netnstest.Netns, cakHex, cknHex string, prio uint8, suite macsec.CipherSuite) (*mka.Participant, *mkatest.SecY, func()) {
	t.Helper()
	cak, err := mka.ParseCAK(cakHex, cknHex)
	if err != nil {
		t.Fatal(err)
	}
	fd := ns.PacketSocket(t, p.Tap, mka.EtherType)
	t.Cleanup(func() { unix.Close(fd) })
	// 802.1X 11.1.1: MKPDUs go to the PAE group address; join it so that a
	// NIC's filter would pass it (a tap passes everything).
	ns.Do(t, func() {
		var ifi *net.Interface
		if ifi, err = net.InterfaceByName(p.Tap); err != nil {
			return
		}
		mreq := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_MULTICAST, Alen: 6}
		copy(mreq.Address[:], mka.PAEGroupAddress[:])
		err = unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq)
	})
	if err != nil {
		t.Fatalf("join the PAE group address: %v", err)
	}
	mac, _ := hex.DecodeString(strings.ReplaceAll(linuxpeer.HostMAC, ":", ""))
	var sci macsec.SCI
	for _, b := range mac {
		sci = sci<<8 | macsec.SCI(b)
	}
	sci = sci<<16 | 1
	secy := &mkatest.SecY{}
	part, err := mka.New(mka.Config{CAK: cak, SCI: sci, KeyServerPriority: prio, Confidentiality: true, CipherSuite: suite},
		secy, packetTransport{fd}, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	stopped := false
	stop := func() { // ends the participant's goroutines; after it, secy may be read
		if !stopped {
			stopped = true
			rcancel()
			<-done
			<-done
		}
	}
	go func() {
		defer func() { done <- struct{}{} }()
		part.Run(rctx)
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 2048)
		for rctx.Err() == nil {
			n, err := unix.Read(fd, buf)
			if err != nil {
				if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
					continue
				}
				return
			}
			part.Receive(append([]byte(nil), buf[:n]...))
		}
	}()
	t.Cleanup(stop)
	return part, secy, stop
}

// TestMKAWPASupplicantKeyServer is TestMKAAgainstWPASupplicant with the
// roles swapped: wpa_supplicant (priority 16) is key server and the
// participant (priority 200) must install, for receive on the guest's SC
// and for transmit, the GCM-AES-128 SAK wpa_supplicant generated and
// wrapped (its debug output shows it), with wpa_supplicant's KI.
func TestMKAWPASupplicantKeyServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const (
		cakHex = "0b9a9c5d6e52e4e0f6f8e1bb3c1d2a77"
		cknHex = "d1c4f0a3"
	)
	p, ns := linuxpeer.StartT(t, ctx, "mka", map[string]string{
		"MKA_CAK": cakHex, "MKA_CKN": cknHex, "MKA_PRIORITY": "16", "ADDR": "10.77.0.2/24",
	})
	part, secy, stop := startParticipant(t, ctx, p, ns, cakHex, cknHex, 200, macsec.GCMAES128)
	guestSCI := macsec.SCI(0x525400770002_0001)
	var st mka.State
	deadline := time.Now().Add(30 * time.Second)
	for {
		st = part.State()
		live := len(st.Live) == 1 && st.Live[0].SCI == guestSCI
		if live && !st.KeyServer && st.KeyServerSCI == guestSCI && st.Latest != nil && st.Latest.TX && st.Latest.RX {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("participant state after 30 s: %+v; stats %+v", st, part.Stats())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("participant: key server is the guest %v (MI %v), SAK %v AN %d", st.KeyServerSCI, st.KeyServerMI, st.Latest.KI, st.Latest.AN)
	if st.Latest.KI.MI != st.KeyServerMI {
		t.Errorf("SAK KI %v is not the key server's MI %v", st.Latest.KI, st.KeyServerMI)
	}
	if !strings.Contains(p.Console(), "I am elected as key server") {
		t.Errorf("wpa_supplicant did not report being elected key server")
	}
	m := sakGenRE.FindAllStringSubmatch(p.Console(), -1)
	if m == nil {
		for _, l := range strings.Split(p.Console(), "\n") {
			if strings.Contains(l, "SAK") && strings.Contains(l, "hexdump") {
				t.Logf("guest: %s", l)
			}
		}
		t.Fatalf("no generated SAK in wpa_supplicant's debug output")
	}
	sak, err := hex.DecodeString(strings.ReplaceAll(m[len(m)-1][1], " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	tx := secy.TX[st.Latest.AN]
	rx := secy.RX[guestSCI]
	if tx == nil || !tx.Config.Key.Equal(macsec.NewKey(sak)) {
		t.Errorf("the participant's transmit SA %d does not hold the SAK wpa_supplicant generated", st.Latest.AN)
	}
	if rx == nil || rx[st.Latest.AN] == nil || !rx[st.Latest.AN].Config.Key.Equal(macsec.NewKey(sak)) {
		t.Errorf("the participant's receive SA %d on %v does not hold the SAK wpa_supplicant generated", st.Latest.AN, guestSCI)
	}
}

// sakGenRE matches the SAK wpa_supplicant (-K) generated as key server.
var sakGenRE = regexp.MustCompile(`(?m)KaY: generated new SAK - hexdump\(len=16\): ([0-9a-f ]+)$`)
