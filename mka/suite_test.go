package mka_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/macsec"
	"github.com/gvrouter/gvrouter/mka"
	"github.com/gvrouter/gvrouter/mka/mkatest"
)

// suiteLab is newLab with each fake SecY running its node's configured
// suite, so that an SA of the wrong key length is refused.
func suiteLab(t *testing.T, cfgs ...mka.Config) *lab {
	l := newLab(t, cfgs...)
	for i, n := range l.nodes {
		n.secy.Suite = cmpOr(cfgs[i].CipherSuite, macsec.GCMAES128)
	}
	return l
}

func cmpOr(a, b macsec.CipherSuite) macsec.CipherSuite {
	if a != 0 {
		return a
	}
	return b
}

// keysFit fails unless every SA n's SecY holds has a key of suite's
// length: the SAs of the old suite are gone.
func keysFit(t *testing.T, n *node, suite macsec.CipherSuite) {
	t.Helper()
	rx, tx, _, _ := n.secy.Snapshot()
	for sci, sas := range rx {
		for an, sa := range sas {
			if sa != nil && sa.Config.Key.Len() != suite.KeyLen() {
				t.Errorf("%s: receive SA %d of %v has a %d-octet key, want %v's %d", n.name, an, sci, sa.Config.Key.Len(), suite, suite.KeyLen())
			}
		}
	}
	for an, sa := range tx {
		if sa != nil && sa.Config.Key.Len() != suite.KeyLen() {
			t.Errorf("%s: transmit SA %d has a %d-octet key, want %v's %d", n.name, an, sa.Config.Key.Len(), suite, suite.KeyLen())
		}
	}
}

// TestSuiteSwitch: a GCM-AES-256 participant that also accepts
// GCM-AES-128 (Config.CipherSuites) takes a GCM-AES-128 key server's SAK
// (as wpa_supplicant 2.10 distributes): its SecY switches suite before any
// SA of the SAK is installed, and its MI and peer survive.
func TestSuiteSwitch(t *testing.T) {
	l := suiteLab(t,
		mka.Config{SCI: sciA, KeyServerPriority: 1, CipherSuite: macsec.GCMAES128, Confidentiality: true},
		mka.Config{SCI: sciB, KeyServerPriority: 2, CipherSuite: macsec.GCMAES256, Confidentiality: true,
			CipherSuites: []macsec.CipherSuite{macsec.GCMAES128}})
	l.check = l.noGap
	a, b := l.nodes[0], l.nodes[1]
	mi := b.p.State().MI
	l.run(4 * time.Second)
	l.established()
	s := b.p.State()
	if s.CipherSuite != macsec.GCMAES128 || b.secy.Suite != macsec.GCMAES128 {
		t.Errorf("B: state suite %v, SecY suite %v, want GCM-AES-128", s.CipherSuite, b.secy.Suite)
	}
	if s.MI != mi || !hasLive(s, sciA) {
		t.Errorf("B after the switch: MI %v (was %v), live %v; want the same MI and A live", s.MI, mi, s.Live)
	}
	ev := b.secy.EventLog()
	i := slices.Index(ev, "suite gcm-aes-128")
	if i < 0 || slices.IndexFunc(ev, func(e string) bool { return strings.HasPrefix(e, "rxsa ") || strings.HasPrefix(e, "txsa ") }) < i {
		t.Errorf("B's SecY events %q: want the suite switch before the first SA", ev)
	}
	if st := b.p.Stats(); st.SuiteSwitches.Load() != 1 || st.SAKRejected.Load() != 0 || st.SAKsReceived.Load() != 1 || st.SecYErrors.Load() != 0 {
		t.Errorf("B: suite switches %d, rejected %d, received %d, secy errors %d; want 1 0 1 0",
			st.SuiteSwitches.Load(), st.SAKRejected.Load(), st.SAKsReceived.Load(), st.SecYErrors.Load())
	}
	if a.p.Stats().SuiteSwitches.Load() != 0 || a.p.State().CipherSuite != macsec.GCMAES128 {
		t.Errorf("A (key server on its own suite) switched: %d", a.p.Stats().SuiteSwitches.Load())
	}
	keysFit(t, b, macsec.GCMAES128)
	// A rekey of the same suite is an ordinary rollover, no switch.
	if err := a.p.Rekey(); err != nil {
		t.Fatal(err)
	}
	l.run(4 * time.Second)
	if k := l.established(); k.KI.KN != 2 || b.p.Stats().SuiteSwitches.Load() != 1 {
		t.Errorf("after a rekey: KN %d, B's switches %d; want KN 2 and still 1 switch", k.KI.KN, b.p.Stats().SuiteSwitches.Load())
	}
}

// TestSuiteSwitchAndBack: two GCM-AES-256 participants keyed on their
// suite switch together to GCM-AES-128 when a key server of that suite
// joins (the old suite's SAs go, the receive SCs come back), and back to
// GCM-AES-256 when it leaves and the first of them is key server again.
func TestSuiteSwitchAndBack(t *testing.T) {
	more := []macsec.CipherSuite{macsec.GCMAES128}
	l := suiteLab(t,
		mka.Config{SCI: sciA, KeyServerPriority: 10, CipherSuite: macsec.GCMAES256, CipherSuites: more},
		mka.Config{SCI: sciB, KeyServerPriority: 20, CipherSuite: macsec.GCMAES256, CipherSuites: more},
		mka.Config{SCI: sciC, KeyServerPriority: 1, CipherSuite: macsec.GCMAES128})
	a, b, c := l.nodes[0], l.nodes[1], l.nodes[2]
	c.port.SetDown(true)
	two := &lab{t: t, clock: l.clock, wire: l.wire, nodes: l.nodes[:2]}
	two.check = two.noGap
	two.run(4 * time.Second)
	first := two.established()
	miA := a.p.State().MI
	keysFit(t, a, macsec.GCMAES256)

	// No noGap while C joins: A and B transmit with their SAK, which C,
	// once it lists them live, never gets.
	c.port.SetDown(false)
	l.run(8 * time.Second)
	k := l.established()
	if k.KI.MI != c.p.State().MI {
		t.Fatalf("latest SAK %v is not C's", k.KI)
	}
	for _, n := range []*node{a, b} {
		s := n.p.State()
		if s.CipherSuite != macsec.GCMAES128 || n.p.Stats().SuiteSwitches.Load() != 1 {
			t.Errorf("%s: suite %v after %d switches, want GCM-AES-128 after 1", n.name, s.CipherSuite, n.p.Stats().SuiteSwitches.Load())
		}
		keysFit(t, n, macsec.GCMAES128)
		ev := strings.Join(n.secy.EventLog(), "; ")
		after := ev[strings.Index(ev, "suite gcm-aes-128"):]
		if !strings.Contains(after, "addrxsc "+l.other2(n, c).sci.String()) {
			t.Errorf("%s: the receive SC of its first peer was not added again after the switch: %s", n.name, after)
		}
		if rx, _, _, _ := n.secy.Snapshot(); rx[l.other2(n, c).sci][first.AN] != nil && rx[l.other2(n, c).sci][first.AN].Config.Key.Len() == 32 {
			t.Errorf("%s still holds the GCM-AES-256 receive SA", n.name)
		}
	}
	if a.p.State().MI != miA {
		t.Error("A's MI changed with the suite")
	}

	// C leaves: A is key server again and goes back to its own suite.
	c.port.SetDown(true)
	l.check = nil
	l.run(mka.LifeTime + time.Second)
	two.run(4 * time.Second)
	k = two.established()
	if k.KI.MI != miA {
		t.Fatalf("latest SAK %v is not A's", k.KI)
	}
	for _, n := range []*node{a, b} {
		if s := n.p.State(); s.CipherSuite != macsec.GCMAES256 || n.p.Stats().SuiteSwitches.Load() != 2 {
			t.Errorf("%s: suite %v after %d switches, want GCM-AES-256 after 2", n.name, s.CipherSuite, n.p.Stats().SuiteSwitches.Load())
		}
		keysFit(t, n, macsec.GCMAES256)
	}
}

// other2 returns the node of a three-node lab that is neither n nor x.
func (l *lab) other2(n, x *node) *node {
	for _, o := range l.nodes {
		if o != n && o != x {
			return o
		}
	}
	return nil
}

// TestSuiteRejected: a SAK of a suite neither configured nor listed is
// rejected and counted, the SecY untouched; a failed switch is a SecY
// error, leaves the SecY as it was and is tried again with the next
// MKPDU.
func TestSuiteRejected(t *testing.T) {
	l := suiteLab(t,
		mka.Config{SCI: sciA, KeyServerPriority: 1},
		mka.Config{SCI: sciB, KeyServerPriority: 2, CipherSuite: macsec.GCMAES256, CipherSuites: []macsec.CipherSuite{macsec.GCMAESXPN128}})
	l.run(4 * time.Second)
	b := l.nodes[1]
	if st := b.p.Stats(); st.SAKRejected.Load() == 0 || st.SuiteSwitches.Load() != 0 || b.p.State().Latest != nil || b.secy.Suite != macsec.GCMAES256 {
		t.Errorf("B took a GCM-AES-128 SAK: rejected %d, switches %d, latest %+v, suite %v",
			st.SAKRejected.Load(), st.SuiteSwitches.Load(), b.p.State().Latest, b.secy.Suite)
	}
	if ev := b.secy.EventLog(); len(ev) != 0 {
		t.Errorf("B's SecY calls %v, want none", ev)
	}

	l = suiteLab(t,
		mka.Config{SCI: sciA, KeyServerPriority: 1},
		mka.Config{SCI: sciB, KeyServerPriority: 2, CipherSuite: macsec.GCMAES256, CipherSuites: []macsec.CipherSuite{macsec.GCMAES128}})
	b = l.nodes[1]
	b.secy.SwitchErr = errors.New("no memory")
	l.run(4 * time.Second)
	if st := b.p.Stats(); st.SecYErrors.Load() < 2 || st.SuiteSwitches.Load() != 0 || b.p.State().Latest != nil || b.secy.Suite != macsec.GCMAES256 {
		t.Errorf("failing switch: secy errors %d, switches %d, latest %+v, suite %v; want >= 2 tries, nothing changed",
			st.SecYErrors.Load(), st.SuiteSwitches.Load(), b.p.State().Latest, b.secy.Suite)
	}
	b.secy.SwitchErr = nil
	l.run(4 * time.Second)
	l.established()
	if b.secy.Suite != macsec.GCMAES128 {
		t.Errorf("after the SecY recovered: suite %v, want GCM-AES-128", b.secy.Suite)
	}
}

// TestNewCipherSuites: further suites must be valid and need a SecY that
// can switch.
func TestNewCipherSuites(t *testing.T) {
	var wire mkatest.Wire
	port := wire.NewPort(nil)
	c := mka.Config{CAK: cak(t, cakHex, cknHex), SCI: sciA, CipherSuites: []macsec.CipherSuite{macsec.GCMAES128}}
	plain := struct{ mka.SecY }{&mkatest.SecY{}} // hides SwitchCipherSuite
	if _, err := mka.New(c, plain, port, nil); err == nil || !strings.Contains(err.Error(), "switch") {
		t.Errorf("New with CipherSuites and a SecY that cannot switch = %v, want an error", err)
	}
	if _, err := mka.New(c, &mkatest.SecY{}, port, nil); err != nil {
		t.Errorf("New with a switching SecY = %v", err)
	}
	c.CipherSuites = []macsec.CipherSuite{7}
	if _, err := mka.New(c, &mkatest.SecY{}, port, nil); err == nil {
		t.Error("New accepted an unknown cipher suite in CipherSuites")
	}
}

// TestMemberRejects: a member that does not desire MACsec, or that is
// capable of integrity only, rejects a SAK that a key server distributes
// although its Basic Parameter Set says so (802.1X 9.6, 9.8.2); here the
// member's MKPDUs are rewritten on the wire so that our own key server
// believes the contrary. The key server desiring nothing distributes
// nothing.
func TestMemberRejects(t *testing.T) {
	ick, err := mka.NewICVKey(cak(t, cakHex, cknHex))
	if err != nil {
		t.Fatal(err)
	}
	// claim rewrites a sent MKPDU in place: MACsec desired, confidentiality capable.
	claim := func(f []byte) {
		var m mka.MKPDU
		if err := mka.Decode(f, &m); err != nil {
			t.Errorf("Decode of a sent MKPDU: %v", err)
			return
		}
		m.Basic.MACsecDesired, m.Basic.Capability = true, mka.CapabilityConfidentiality
		out, err := m.Append(nil, ick)
		if err != nil || len(out) != len(f) {
			t.Errorf("re-encoding: %v (%d octets, was %d)", err, len(out), len(f))
			return
		}
		copy(f, out)
	}
	for _, tt := range []struct {
		name string
		b    mka.Config
	}{
		{"not desired", mka.Config{NotDesired: true}},
		{"integrity only offered offset 0", mka.Config{Capability: mka.CapabilityIntegrity}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.b.SCI, tt.b.KeyServerPriority = sciB, 2
			l := newLab(t, mka.Config{SCI: sciA, KeyServerPriority: 1, Confidentiality: true}, tt.b)
			a, b := l.nodes[0], l.nodes[1]
			b.port.Tap = claim
			l.run(4 * time.Second)
			if a.p.Stats().SAKsGenerated.Load() == 0 {
				t.Fatal("A distributed no SAK; the rewrite did not take")
			}
			if st := b.p.Stats(); st.SAKRejected.Load() == 0 || b.p.State().Latest != nil || len(b.secy.EventLog()) != 0 {
				t.Errorf("B: rejected %d, latest %+v, SecY calls %v; want the SAK rejected and no SA", st.SAKRejected.Load(), b.p.State().Latest, b.secy.EventLog())
			}
			if _, _, _, on := a.secy.Snapshot(); on {
				t.Error("A transmits although B never installed its SAK")
			}
		})
	}
	t.Run("key server not desired", func(t *testing.T) {
		l := newLab(t, mka.Config{SCI: sciA, KeyServerPriority: 1, NotDesired: true}, mka.Config{SCI: sciB, KeyServerPriority: 2})
		l.run(4 * time.Second)
		for _, n := range l.nodes {
			if s := n.p.State(); s.Latest != nil || len(s.Live) != 1 || len(n.secy.EventLog()) != 0 {
				t.Errorf("%s: %+v, SecY calls %v; want a live peer, no SAK, no SA", n.name, s, n.secy.EventLog())
			}
		}
		if !l.nodes[0].p.State().KeyServer || l.nodes[0].p.Stats().SAKsGenerated.Load() != 0 {
			t.Error("A is not the key server or generated a SAK")
		}
	})
}
