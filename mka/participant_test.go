package mka_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gvrouter/gvrouter/macsec"
	"github.com/gvrouter/gvrouter/mka"
	"github.com/gvrouter/gvrouter/mka/mkatest"
)

const (
	sciA macsec.SCI = 0x0200000000010001
	sciB macsec.SCI = 0x0200000000020001
	sciC macsec.SCI = 0x0200000000030001

	cakHex = "0123456789abcdef0123456789abcdef"
	cknHex = "6162636465666768696a6b6c6d6e6f707172737475767778797a303132333435"
)

func cak(t testing.TB, keyHex, nameHex string) mka.CAK {
	t.Helper()
	c, err := mka.ParseCAK(keyHex, nameHex)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type node struct {
	name string
	sci  macsec.SCI
	p    *mka.Participant
	secy *mkatest.SecY
	port *mkatest.Port
}

// lab is a set of participants on one in-memory wire with a fake clock.
type lab struct {
	t     *testing.T
	clock *mkatest.Clock
	wire  *mkatest.Wire
	nodes []*node
	// check, if set, runs after every delivered frame and every tick.
	check func()
}

func newLab(t *testing.T, cfgs ...mka.Config) *lab {
	l := &lab{t: t, clock: mkatest.NewClock(), wire: &mkatest.Wire{}}
	for i, cfg := range cfgs {
		if cfg.CAK.Len() == 0 {
			cfg.CAK = cak(t, cakHex, cknHex)
		}
		cfg.Clock = l.clock
		n := &node{name: string(rune('A' + i)), sci: cfg.SCI, secy: &mkatest.SecY{}}
		n.port = l.wire.NewPort(nil)
		p, err := mka.New(cfg, n.secy, n.port, nil)
		if err != nil {
			t.Fatal(err)
		}
		n.p = p
		n.port.SetReceiver(p.Receive)
		l.nodes = append(l.nodes, n)
	}
	return l
}

// run advances the clock in steps of 100 ms for d, ticking every
// participant and delivering frames after each step.
func (l *lab) run(d time.Duration) {
	l.t.Helper()
	for el := time.Duration(0); el < d; el += 100 * time.Millisecond {
		l.clock.Advance(100 * time.Millisecond)
		for _, n := range l.nodes {
			n.p.Tick()
			l.checkNow()
		}
		l.wire.Deliver(l.checkNow)
	}
}

func (l *lab) checkNow() {
	if l.check != nil {
		l.check()
	}
}

// noGap fails the test if a participant transmits with an AN for which a
// peer holding it as live has no receive SA with the same key: the
// RX-before-TX rule that makes a rollover lossless.
func (l *lab) noGap() {
	for _, tx := range l.nodes {
		_, txSAs, enc, on := tx.secy.Snapshot()
		if !on {
			continue
		}
		for _, rx := range l.nodes {
			if rx == tx || !hasLive(rx.p.State(), tx.sci) {
				continue
			}
			rxSAs, _, _, _ := rx.secy.Snapshot()
			sa := rxSAs[tx.sci][enc]
			if sa == nil || !sa.Config.Key.Equal(txSAs[enc].Config.Key) {
				l.t.Fatalf("%s transmits with AN %d but %s has no matching receive SA for it\n%s: %v\n%s: %v",
					tx.name, enc, rx.name, tx.name, tx.secy.EventLog(), rx.name, rx.secy.EventLog())
			}
		}
	}
}

// transmitsWith reports whether n's SecY transmits with AN an.
func transmitsWith(n *node, an uint8) bool {
	_, _, enc, on := n.secy.Snapshot()
	return on && enc == an
}

// other returns the node that is not n in a two-node lab.
func (l *lab) other(n *node) *node {
	if l.nodes[0] == n {
		return l.nodes[1]
	}
	return l.nodes[0]
}

func hasLive(s mka.State, sci macsec.SCI) bool {
	for _, p := range s.Live {
		if p.SCI == sci {
			return true
		}
	}
	return false
}

func twoNodes(t *testing.T, suite macsec.CipherSuite) *lab {
	l := newLab(t,
		mka.Config{SCI: sciA, KeyServerPriority: 16, CipherSuite: suite, Confidentiality: true},
		mka.Config{SCI: sciB, KeyServerPriority: 32, CipherSuite: suite, Confidentiality: true})
	l.check = l.noGap
	return l
}

// established checks that every node transmits with the same latest SAK
// and receives it from every other node.
func (l *lab) established() mka.KeyState {
	l.t.Helper()
	var want *mka.KeyState
	for _, n := range l.nodes {
		s := n.p.State()
		if len(s.Live) != len(l.nodes)-1 || len(s.Potential) != 0 {
			l.t.Fatalf("%s: live %v potential %v, want %d live", n.name, s.Live, s.Potential, len(l.nodes)-1)
		}
		if s.Latest == nil || !s.Latest.RX || !s.Latest.TX || s.Previous != nil {
			l.t.Fatalf("%s: latest %+v previous %+v, want latest in use for RX and TX alone", n.name, s.Latest, s.Previous)
		}
		if want == nil {
			want = s.Latest
		} else if s.Latest.KI != want.KI || s.Latest.AN != want.AN {
			l.t.Fatalf("%s: latest %v AN %d, %s has %v AN %d", n.name, s.Latest.KI, s.Latest.AN, l.nodes[0].name, want.KI, want.AN)
		}
		_, tx, enc, on := n.secy.Snapshot()
		if !on || enc != want.AN || tx[enc] == nil {
			l.t.Fatalf("%s: transmitting %v with AN %d, want AN %d", n.name, on, enc, want.AN)
		}
	}
	return *want
}

// TestEstablish: two participants elect the key server (lower priority
// value), become live through the peer lists, and install the key
// server's SAK for receive before transmit (802.1X 9.4.3, 9.5, 9.8).
func TestEstablish(t *testing.T) {
	for _, suite := range []macsec.CipherSuite{macsec.GCMAES128, macsec.GCMAES256, macsec.GCMAESXPN128, macsec.GCMAESXPN256} {
		t.Run(suite.String(), func(t *testing.T) {
			l := twoNodes(t, suite)
			l.run(3 * time.Second)
			a, b := l.nodes[0], l.nodes[1]
			sa, sb := a.p.State(), b.p.State()
			if !sa.KeyServer || sb.KeyServer || sb.KeyServerSCI != sciA || sb.KeyServerMI != sa.MI {
				t.Fatalf("key server: A %v, B %v (B thinks %v)", sa.KeyServer, sb.KeyServer, sb.KeyServerSCI)
			}
			k := l.established()
			if k.AN != 0 || k.KI.MI != sa.MI || k.KI.KN != 1 {
				t.Errorf("latest = %v AN %d, want KI %v/1 AN 0", k.KI, k.AN, sa.MI)
			}
			for _, n := range l.nodes {
				ev := strings.Join(n.secy.EventLog(), "; ")
				rx, tx := strings.Index(ev, "rxsa "), strings.Index(ev, "txsa 0")
				if rx < 0 || tx < rx || !strings.Contains(ev, "encoding 0") {
					t.Errorf("%s: events %q, want the receive SA installed before the transmit SA", n.name, ev)
				}
				if n.secy.Offset != mka.Offset0 {
					t.Errorf("%s: confidentiality %v, want offset-0", n.name, n.secy.Offset)
				}
			}
			rxA, txA, _, _ := a.secy.Snapshot()
			rxB, txB, _, _ := b.secy.Snapshot()
			if !txA[0].Config.Key.Equal(rxB[sciA][0].Config.Key) || !txB[0].Config.Key.Equal(rxA[sciB][0].Config.Key) ||
				!txA[0].Config.Key.Equal(txB[0].Config.Key) || txA[0].Config.Key.Len() != suite.KeyLen() {
				t.Errorf("A and B do not share one %d-octet SAK", suite.KeyLen())
			}
			wantKI := append(append([]byte(nil), sa.MI[:]...), 0, 0, 0, 1)
			if !bytes.Equal(txA[0].Config.KeyID, wantKI) || !bytes.Equal(rxB[sciA][0].Config.KeyID, wantKI) {
				t.Errorf("key ids %x, %x, want the KI %x", txA[0].Config.KeyID, rxB[sciA][0].Config.KeyID, wantKI)
			}
			if suite.XPN() {
				// B has the higher SCI, so SSCI 1; A gets 2. Both sides agree
				// on each transmitter's SSCI and on the salt.
				if txA[0].Config.SSCI != 2 || rxB[sciA][0].Config.SSCI != 2 || txB[0].Config.SSCI != 1 || rxA[sciB][0].Config.SSCI != 1 {
					t.Errorf("SSCIs: A tx %d, B rx of A %d, B tx %d, A rx of B %d; want 2 2 1 1",
						txA[0].Config.SSCI, rxB[sciA][0].Config.SSCI, txB[0].Config.SSCI, rxA[sciB][0].Config.SSCI)
				}
				salt := sa.MI
				salt[1] ^= 1 // KN 1 lands in the second octet
				if txA[0].Config.Salt != salt || rxB[sciA][0].Config.Salt != salt {
					t.Errorf("salt %x / %x, want %x", txA[0].Config.Salt, rxB[sciA][0].Config.Salt, salt)
				}
			}
			stA, stB := a.p.Stats(), b.p.Stats()
			if stA.SAKsGenerated.Load() != 1 || stB.SAKsReceived.Load() != 1 || stA.SAKRolls.Load() != 1 || stB.SAKRolls.Load() != 1 {
				t.Errorf("generated %d received %d rolls %d/%d, want 1 each", stA.SAKsGenerated.Load(),
					stB.SAKsReceived.Load(), stA.SAKRolls.Load(), stB.SAKRolls.Load())
			}
			for _, st := range []*mka.Stats{stA, stB} {
				if st.InvalidICV.Load()+st.Replayed.Load()+st.MalformedTotal()+st.SecYErrors.Load() != 0 || st.MKPDUsSent.Load() == 0 {
					t.Errorf("unexpected counters: invalid ICV %d, replayed %d, malformed %d, secy errors %d, sent %d",
						st.InvalidICV.Load(), st.Replayed.Load(), st.MalformedTotal(), st.SecYErrors.Load(), st.MKPDUsSent.Load())
				}
			}
		})
	}
}

// TestHelloInterval: with no news, a participant sends one MKPDU per
// hello time (2 s, or 0.5 s bounded).
func TestHelloInterval(t *testing.T) {
	for _, bounded := range []bool{false, true} {
		l := newLab(t, mka.Config{SCI: sciA, BoundedHello: bounded})
		l.run(10 * time.Second)
		want := uint64(5) // at 0.1 s, 2.1, 4.1, 6.1, 8.1
		if bounded {
			want = 20
		}
		if got := l.nodes[0].p.Stats().MKPDUsSent.Load(); got != want {
			t.Errorf("bounded %v: %d MKPDUs in 10 s, want %d", bounded, got, want)
		}
	}
}

// TestThreeMembers: the key server waits until every live peer reports
// receiving the SAK before it transmits with it.
func TestThreeMembers(t *testing.T) {
	l := newLab(t, mka.Config{SCI: sciB, KeyServerPriority: 7}, mka.Config{SCI: sciC, KeyServerPriority: 7},
		mka.Config{SCI: sciA, KeyServerPriority: 9})
	l.check = l.noGap
	l.run(4 * time.Second)
	k := l.established()
	if ks := l.nodes[0].p.State(); !ks.KeyServer || k.KI.MI != ks.MI {
		t.Errorf("B (priority 7, lowest SCI among the 7s) is not the key server: %+v", ks)
	}
}

// TestRekey: a forced rekey rolls every participant to the next AN
// without a moment in which someone transmits with a key its peer cannot
// receive, and the old SAs go once the new key is in use everywhere.
func TestRekey(t *testing.T) {
	l := twoNodes(t, macsec.GCMAES128)
	l.run(3 * time.Second)
	first := l.established()
	a, b := l.nodes[0], l.nodes[1]
	if err := b.p.Rekey(); !errors.Is(err, mka.ErrNotKeyServer) {
		t.Errorf("Rekey on B = %v, want ErrNotKeyServer", err)
	}
	rolled := a.p.State().LastRoll
	l.clock.Advance(time.Second)
	if err := a.p.Rekey(); err != nil {
		t.Fatal(err)
	}
	l.wire.Deliver(l.checkNow)
	// Once both transmit with the new AN, the old receive SAs stay for
	// RetireDelay: frames protected just before a peer's switch verify.
	newAN := (first.AN + 1) % 4
	var switched time.Duration
	for ; switched < 3*time.Second && !(transmitsWith(a, newAN) && transmitsWith(b, newAN)); switched += 100 * time.Millisecond {
		l.run(100 * time.Millisecond)
	}
	for _, n := range l.nodes {
		if rx, _, _, _ := n.secy.Snapshot(); !transmitsWith(n, newAN) || rx[l.other(n).sci][first.AN] == nil {
			t.Fatalf("%s %v after the rekey: transmits with AN %d: %v, old receive SA %d kept: %v", n.name, switched, newAN, transmitsWith(n, newAN), first.AN, rx[l.other(n).sci][first.AN] != nil)
		}
	}
	l.run(mka.RetireDelay - 200*time.Millisecond)
	for _, n := range l.nodes {
		if rx, _, _, _ := n.secy.Snapshot(); rx[l.other(n).sci][first.AN] == nil {
			t.Fatalf("%s retired the old receive SA within %v of the switch, want it kept for RetireDelay %v", n.name, mka.RetireDelay-200*time.Millisecond, mka.RetireDelay)
		}
	}
	l.run(3 * time.Second)
	second := l.established()
	if second.AN != (first.AN+1)%4 || second.KI.KN != first.KI.KN+1 {
		t.Errorf("after rekey: %v AN %d, want KN %d AN %d", second.KI, second.AN, first.KI.KN+1, first.AN+1)
	}
	if s := a.p.State(); !s.LastRoll.After(rolled) {
		t.Errorf("LastRoll %v not after %v", s.LastRoll, rolled)
	}
	for _, n := range l.nodes {
		rx, tx, _, _ := n.secy.Snapshot()
		for sci, sas := range rx {
			if sas[first.AN] != nil {
				t.Errorf("%s still has receive SA %d for %v", n.name, first.AN, sci)
			}
		}
		if tx[first.AN] != nil {
			t.Errorf("%s still has transmit SA %d", n.name, first.AN)
		}
		if got := n.p.Stats().SAKRolls.Load(); got != 2 {
			t.Errorf("%s: SAKRolls = %d, want 2", n.name, got)
		}
	}
	// Four more rekeys wrap the AN around.
	for i := 0; i < 4; i++ {
		if err := a.p.Rekey(); err != nil {
			t.Fatal(err)
		}
		l.run(3 * time.Second)
	}
	if k := l.established(); k.AN != second.AN || k.KI.KN != second.KI.KN+4 {
		t.Errorf("after 4 more rekeys: %v AN %d, want KN %d AN %d", k.KI, k.AN, second.KI.KN+4, second.AN)
	}
}

// TestPNExhaustion: the key server rekeys when its own transmit PN, or a
// peer's reported in SAK Use, reaches 0xC0000000.
func TestPNExhaustion(t *testing.T) {
	l := twoNodes(t, macsec.GCMAES128)
	l.run(3 * time.Second)
	first := l.established()
	for _, n := range l.nodes {
		_, tx, enc, _ := n.secy.Snapshot()
		tx[enc].Stats.NextPN.Store(mka.PNExhaustion - 1)
		l.run(3 * time.Second)
		if k := l.established(); k.KI != first.KI {
			t.Fatalf("%s: rekeyed at PN %#x", n.name, mka.PNExhaustion-1)
		}
		tx[enc].Stats.NextPN.Store(mka.PNExhaustion)
		l.run(5 * time.Second)
		k := l.established()
		if k.KI.KN != first.KI.KN+1 || k.AN != (first.AN+1)%4 {
			t.Fatalf("%s reached PN %#x: latest %v AN %d, want a new SAK", n.name, mka.PNExhaustion, k.KI, k.AN)
		}
		first = k
	}
}

// TestPeerTimeout: a participant that falls silent is dropped after the
// MKA Life Time (6 s), its receive SC removed, and transmission stops.
func TestPeerTimeout(t *testing.T) {
	l := twoNodes(t, macsec.GCMAES128)
	l.run(3 * time.Second)
	l.established()
	a, b := l.nodes[0], l.nodes[1]
	// B's last MKPDU went out at some tick; cut it just before its next.
	var lastHeard time.Time
	b.port.Tap = func([]byte) { lastHeard = l.clock.Now() }
	l.run(2 * time.Second)
	b.port.SetDown(true)
	l.check = nil
	heard := lastHeard
	for l.clock.Now().Sub(heard) < mka.LifeTime-100*time.Millisecond {
		l.run(100 * time.Millisecond)
	}
	if s := a.p.State(); len(s.Live) != 1 {
		t.Fatalf("B dropped %v after its last MKPDU, before the life time", l.clock.Now().Sub(heard))
	}
	l.run(200 * time.Millisecond)
	s := a.p.State()
	if len(s.Live) != 0 || len(s.Potential) != 0 || s.Latest != nil || s.KeyServer {
		t.Fatalf("6 s after B's last MKPDU: %+v, want no peers and no keys", s)
	}
	if got := a.p.Stats().PeerTimeouts.Load(); got != 1 {
		t.Errorf("PeerTimeouts = %d, want 1", got)
	}
	rx, tx, _, on := a.secy.Snapshot()
	if len(rx) != 0 || on || tx != [4]*mkatest.SA{} {
		t.Errorf("A's SecY after the timeout: rx %v tx %v transmitting %v, want empty", rx, tx, on)
	}
	// B comes back (same MI): they agree on a new SAK.
	b.port.SetDown(false)
	l.check = l.noGap
	l.run(10 * time.Second)
	l.established()
}

// TestWrongCAK: a peer with another CAK under the same name never becomes
// live; its MKPDUs fail the ICV check. A peer with another CKN is another
// CA.
func TestWrongCAK(t *testing.T) {
	l := newLab(t, mka.Config{SCI: sciA}, mka.Config{SCI: sciB, CAK: cak(t, "00112233445566778899aabbccddeeff", cknHex)})
	l.run(10 * time.Second)
	for _, n := range l.nodes {
		s := n.p.State()
		if len(s.Live)+len(s.Potential) != 0 || s.Latest != nil {
			t.Errorf("%s: %+v, want no peers", n.name, s)
		}
		if n.p.Stats().InvalidICV.Load() < 4 || n.p.Stats().MKPDUsAccepted.Load() != 0 {
			t.Errorf("%s: InvalidICV %d accepted %d, want >= 4 and 0", n.name, n.p.Stats().InvalidICV.Load(), n.p.Stats().MKPDUsAccepted.Load())
		}
		if len(n.secy.EventLog()) != 0 {
			t.Errorf("%s: SecY calls %v", n.name, n.secy.EventLog())
		}
	}
	l = newLab(t, mka.Config{SCI: sciA}, mka.Config{SCI: sciB, CAK: cak(t, cakHex, "616263")})
	l.run(5 * time.Second)
	if got := l.nodes[0].p.Stats().UnknownCKN.Load(); got < 2 || len(l.nodes[0].p.State().Potential) != 0 {
		t.Errorf("UnknownCKN = %d, want >= 2 and no peer", got)
	}
}

// TestReplay: an MKPDU received again is counted and changes nothing.
func TestReplay(t *testing.T) {
	l := twoNodes(t, macsec.GCMAES128)
	l.run(3 * time.Second)
	a, b := l.nodes[0], l.nodes[1]
	var captured []byte
	b.port.Tap = func(f []byte) { captured = append([]byte(nil), f...) }
	l.run(2 * time.Second)
	if captured == nil {
		t.Fatal("B sent nothing in 2 s")
	}
	before, events := a.p.State(), len(a.secy.EventLog())
	a.p.Receive(captured)
	if got := a.p.Stats().Replayed.Load(); got != 1 {
		t.Errorf("Replayed = %d, want 1", got)
	}
	if d := cmp.Diff(before, a.p.State()); d != "" || len(a.secy.EventLog()) != events {
		t.Errorf("replay changed A (-before +after):\n%s", d)
	}
	// Garbage is counted by reason.
	a.p.Receive(captured[:10])
	if got := a.p.Stats().MalformedBy(mka.ReasonShortFrame); got != 1 {
		t.Errorf("MalformedBy(short frame) = %d, want 1", got)
	}
}

// TestAgreement: the key server asks for confidentiality only when it is
// configured to and every peer can; a peer that offers integrity only
// gets integrity only; one that does not want MACsec gets no SAK.
func TestAgreement(t *testing.T) {
	tests := []struct {
		name string
		a, b mka.Config
		want mka.ConfidentialityOffset
		sak  bool
	}{
		{"both capable", mka.Config{Confidentiality: true}, mka.Config{}, mka.Offset0, true},
		{"integrity only peer", mka.Config{Confidentiality: true}, mka.Config{Capability: mka.CapabilityIntegrity}, mka.IntegrityOnly, true},
		{"key server not asking", mka.Config{}, mka.Config{Confidentiality: true}, mka.IntegrityOnly, true},
		{"peer not desiring", mka.Config{Confidentiality: true}, mka.Config{NotDesired: true}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.a.SCI, tt.a.KeyServerPriority, tt.b.SCI, tt.b.KeyServerPriority = sciA, 1, sciB, 2
			l := newLab(t, tt.a, tt.b)
			l.run(4 * time.Second)
			if !tt.sak {
				for _, n := range l.nodes {
					if s := n.p.State(); s.Latest != nil || len(s.Live) != 1 {
						t.Errorf("%s: %+v, want a live peer and no SAK", n.name, s)
					}
				}
				return
			}
			l.established()
			for _, n := range l.nodes {
				if n.secy.Offset != tt.want || n.p.State().Offset != tt.want {
					t.Errorf("%s: offset %v (state %v), want %v", n.name, n.secy.Offset, n.p.State().Offset, tt.want)
				}
			}
		})
	}
	// A SAK of another cipher suite is rejected.
	l := newLab(t, mka.Config{SCI: sciA, KeyServerPriority: 1, CipherSuite: macsec.GCMAES256}, mka.Config{SCI: sciB, KeyServerPriority: 2})
	l.run(4 * time.Second)
	if got := l.nodes[1].p.Stats().SAKRejected.Load(); got == 0 || l.nodes[1].p.State().Latest != nil {
		t.Errorf("B accepted a GCM-AES-256 SAK for its GCM-AES-128 SecY (rejected %d)", got)
	}
	if _, _, _, on := l.nodes[0].secy.Snapshot(); on {
		t.Error("A transmits although B never received its SAK")
	}
}

func TestElection(t *testing.T) {
	tests := []struct {
		name   string
		pa, pb uint8
		ks     macsec.SCI // 0: none
	}{
		{"lower priority value wins", 40, 30, sciB},
		{"equal priority, lower SCI", 30, 30, sciA},
		{"0xff never serves", 0xff, 200, sciB},
		{"nobody willing", 0xff, 0xff, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLab(t, mka.Config{SCI: sciA, KeyServerPriority: tt.pa}, mka.Config{SCI: sciB, KeyServerPriority: tt.pb})
			l.run(4 * time.Second)
			for _, n := range l.nodes {
				s := n.p.State()
				if s.KeyServerSCI != tt.ks || s.KeyServer != (n.sci == tt.ks) {
					t.Errorf("%s: key server %v (self %v), want %v", n.name, s.KeyServerSCI, s.KeyServer, tt.ks)
				}
				if (s.Latest != nil) != (tt.ks != 0) {
					t.Errorf("%s: latest SAK %+v", n.name, s.Latest)
				}
			}
		})
	}
}

// patternReader gives 12 octets of mi (the MI), then 0xdeadbeef repeated
// (the SAKs).
type patternReader struct {
	mi byte
	n  int
}

func (r *patternReader) Read(b []byte) (int, error) {
	for i := range b {
		if r.n < 12 {
			b[i] = r.mi
		} else {
			b[i] = []byte{0xde, 0xad, 0xbe, 0xef}[r.n%4]
		}
		r.n++
	}
	return len(b), nil
}

// TestNoKeysInOutput: CAK and SAK bytes appear in no String, fmt verb,
// error, State or log line.
func TestNoKeysInOutput(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clock, wire := mkatest.NewClock(), &mkatest.Wire{}
	var ps []*mka.Participant
	var secys []*mkatest.SecY
	for i, sci := range []macsec.SCI{sciA, sciB} {
		s := &mkatest.SecY{}
		port := wire.NewPort(nil)
		p, err := mka.New(mka.Config{CAK: cak(t, cakHex, cknHex), SCI: sci, KeyServerPriority: uint8(i),
			Rand: &patternReader{mi: byte(0x11 * (i + 1))}, Clock: clock}, s, port, log)
		if err != nil {
			t.Fatal(err)
		}
		port.SetReceiver(p.Receive)
		ps, secys = append(ps, p), append(secys, s)
	}
	for i := 0; i < 30; i++ {
		clock.Advance(100 * time.Millisecond)
		for _, p := range ps {
			p.Tick()
		}
		wire.Deliver(nil)
	}
	if _, tx, _, _ := secys[0].Snapshot(); tx[0] == nil || !tx[0].Config.Key.Equal(macsec.NewKey(bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 4))) {
		t.Fatal("the SAK is not the pattern; the test would prove nothing")
	}
	c := cak(t, cakHex, cknHex)
	_, err := mka.ParseCAK(cakHex+"zz", cknHex)
	outs := []string{logs.String(), err.Error()}
	for _, v := range []any{ps[0], ps[1], c, &c, ps[0].State(), ps[1].State()} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
			outs = append(outs, fmt.Sprintf(verb, v))
		}
	}
	secrets := []string{cakHex, strings.ToUpper(cakHex), "deadbeef", "DEADBEEF", "222, 173", "[222 173", "\xde\xad\xbe\xef",
		hex.EncodeToString([]byte(cakHex))}
	for _, o := range outs {
		for _, s := range secrets {
			if strings.Contains(o, s) {
				t.Errorf("key material %q visible in %q", s, o)
			}
		}
	}
}

// TestRun: Run ticks until its context ends and leaves no goroutine.
func TestRun(t *testing.T) {
	before := runtime.NumGoroutine()
	var wire mkatest.Wire
	port := wire.NewPort(nil)
	p, err := mka.New(mka.Config{CAK: cak(t, cakHex, cknHex), SCI: sciA}, &mkatest.SecY{}, port, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().MKPDUsSent.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if p.Stats().MKPDUsSent.Load() == 0 {
		t.Error("Run sent no MKPDU")
	}
	for time.Now().Before(deadline) && runtime.NumGoroutine() > before {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Run returned, %d before", n, before)
	}
}

// TestCancelRekey: a rekey asked for during a rollover waits for it, and
// CancelRekey withdraws it.
func TestCancelRekey(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		l := twoNodes(t, macsec.GCMAES128)
		l.run(3 * time.Second)
		first := l.established()
		a := l.nodes[0]
		if err := a.p.Rekey(); err != nil {
			t.Fatal(err)
		}
		if err := a.p.Rekey(); err != nil { // the first rollover is under way
			t.Fatal(err)
		}
		if cancel {
			a.p.CancelRekey()
		}
		l.run(6 * time.Second)
		want := first.KI.KN + 2
		if cancel {
			want = first.KI.KN + 1
		}
		if k := l.established(); k.KI.KN != want {
			t.Errorf("cancel %v: KN %d after two rekeys, want %d", cancel, k.KI.KN, want)
		}
	}
}
