package dhcp4server

import (
	"bytes"
	"encoding/binary"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/gvrouter/gvrouter/services/svcconfig"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want []string // the Key of each FieldError, "<Other" after it if set
	}{
		{"valid", func(*Config) {}, nil},
		{"subnet v6", func(c *Config) { c.Subnet = netip.MustParsePrefix("fd00::/64") }, []string{"subnet"}},
		{"server outside subnet", func(c *Config) { c.ServerAddr = ip("10.0.0.1") }, []string{"server_addr"}},
		{"server is network address", func(c *Config) { c.ServerAddr = ip("192.168.1.0") }, []string{"server_addr"}},
		{"range outside subnet", func(c *Config) { c.RangeEnd = ip("192.168.2.10") }, []string{"range"}},
		{"range covers broadcast", func(c *Config) { c.RangeEnd = ip("192.168.1.255") }, []string{"range"}},
		{"range reversed", func(c *Config) { c.RangeStart, c.RangeEnd = c.RangeEnd, c.RangeStart }, []string{"range"}},
		{"range covers server", func(c *Config) { c.RangeStart = ip("192.168.1.1") }, []string{"range"}},
		{"range half missing", func(c *Config) { c.RangeStart = netip.Addr{} }, []string{"range"}},
		{"range missing", func(c *Config) { c.RangeStart, c.RangeEnd = netip.Addr{}, netip.Addr{} }, []string{"range"}},
		{"lease time too short", func(c *Config) { c.LeaseTime = MinLeaseTime - time.Second }, []string{"lease_time"}},
		{"lease time too long", func(c *Config) { c.LeaseTime = MaxLeaseTime + time.Second }, []string{"lease_time"}},
		{"mtu below 576", func(c *Config) { c.MTU = MinMTU - 1 }, []string{"mtu"}},
		{"router v6", func(c *Config) { c.Router = []netip.Addr{ip("fd00::1")} }, []string{"router.0"}},
		{"range covers static", func(c *Config) { c.Static[0].Addr = ip("192.168.1.105") }, []string{"static.0.address"}},
		{"static outside subnet", func(c *Config) { c.Static[0].Addr = ip("10.1.1.1") }, []string{"static.0.address"}},
		{"static is server", func(c *Config) { c.Static[0].Addr = srvAddr }, []string{"static.0.address"}},
		{"static duplicate mac and addr", func(c *Config) {
			c.Static = append(c.Static, StaticLease{MAC: staticMAC, Addr: staticIP})
		}, []string{"static.1.mac<static.0.mac", "static.1.address<static.0.address"}},
		{"static bad mac", func(c *Config) { c.Static[0].MAC = net.HardwareAddr{1, 2, 3} }, []string{"static.0.mac"}},
		{"static bad hostname", func(c *Config) { c.Static[0].Hostname = "no spaces" }, []string{"static.0.hostname"}},
		{"lease time negative", func(c *Config) { c.LeaseTime = -time.Second }, []string{"lease_time"}},
		{"dns v6", func(c *Config) { c.DNS = []netip.Addr{srvAddr, ip("fd00::1")} }, []string{"dns.1"}},
		{"mtu too small", func(c *Config) { c.MTU = 67 }, []string{"mtu"}},
		{"domain bad", func(c *Config) { c.Domain = "a..b" }, []string{"domain"}},
		{"route host bits", func(c *Config) {
			c.Routes = []Route{{To: netip.MustParsePrefix("10.0.0.1/8"), Via: ip("192.168.1.254")}}
		}, []string{"routes.0.to"}},
		{"route via off-subnet", func(c *Config) {
			c.Routes = []Route{{To: netip.MustParsePrefix("10.0.0.0/8"), Via: ip("172.16.0.1")}}
		}, []string{"routes.0.via"}},
		{"negative hold", func(c *Config) { c.OfferHold = -1 }, []string{"offer_hold"}},
		{"negative new-lease burst", func(c *Config) { c.NewLeaseBurst = -1 }, []string{"new_lease_burst"}},
		{"new-lease burst beyond any range", func(c *Config) { c.NewLeaseBurst = MaxNewLeaseBurst + 1 }, []string{"new_lease_burst"}},
		{"negative new-lease rate", func(c *Config) { c.NewLeaseRate = -1 }, []string{"new_lease_rate"}},
		{"new-lease rate too small", func(c *Config) { c.NewLeaseRate = 0.0001 }, []string{"new_lease_rate"}},
		{"new-lease rate NaN", func(c *Config) { c.NewLeaseRate = math.NaN() }, []string{"new_lease_rate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(10)
			tc.mod(&c)
			err := c.Validate()
			var got []string
			for _, e := range svcconfig.Fields(err) {
				k := e.Key
				if e.Other != "" {
					k += "<" + e.Other
				}
				got = append(got, k)
			}
			if n := len(svcconfig.Fields(err)); err != nil && n != len(multi(err)) {
				t.Fatalf("Validate() = %v: %d of %d problems are *svcconfig.FieldError", err, n, len(multi(err)))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Validate() = %v (%v), want fields %v", got, err, tc.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "dhcp4server: ") {
				t.Errorf("Validate() = %q, want the dhcp4server: prefix", err)
			}
		})
	}
	if _, err := New(Config{}, nil); err == nil {
		t.Error("New(Config{}) = nil error, want Validate's")
	}
	c := testConfig(10)
	c.Static = make([]StaticLease, MaxStaticLeases+1)
	if fe := svcconfig.Fields(c.Validate()); len(fe) == 0 || fe[0].Key != "static" {
		t.Errorf("Validate() with %d static leases: first problem %v, want one of key static", len(c.Static), fe)
	}
}

// multi returns the errors joined in err (errors.Join), or err alone.
func multi(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// TestRFC2131_4_3_1_AddressChoice checks the order of §4.3.1: static
// lease, the client's current binding, its expired or released one, the
// requested address if available, a never-used one.
func TestRFC2131_4_3_1_AddressChoice(t *testing.T) {
	s, clk := newTestServer(t, testConfig(5))
	offer := func(hw net.HardwareAddr, mods ...dhcpv4.Modifier) string {
		m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, hw, mods...)))
		if m == nil || m.MessageType() != dhcpv4.MessageTypeOffer {
			return "none"
		}
		return m.YourIPAddr.String()
	}
	if got := offer(staticMAC, withReq("192.168.1.103")); got != staticIP.String() {
		t.Errorf("offer(static MAC asking .103) = %s, want the static %s", got, staticIP)
	}
	if got := offer(mac(1)); got != "192.168.1.100" {
		t.Errorf("offer(new client) = %s, want the first never-used 192.168.1.100", got)
	}
	if got := offer(mac(2), withReq("192.168.1.103")); got != "192.168.1.103" {
		t.Errorf("offer(asking a free .103) = %s, want 192.168.1.103", got)
	}
	if got := offer(mac(3), withReq("192.168.1.103")); got != "192.168.1.101" {
		t.Errorf("offer(asking .103, offered to another) = %s, want the next never-used 192.168.1.101", got)
	}
	if got := offer(mac(4), withReq("192.168.1.10")); got != "192.168.1.102" {
		t.Errorf("offer(asking the static address) = %s, want the next never-used 192.168.1.102", got)
	}
	if got := offer(mac(1), withReq("192.168.1.104")); got != "192.168.1.100" {
		t.Errorf("offer(client with a pending offer asking .104) = %s, want its offer 192.168.1.100", got)
	}
	// A previous (expired) lease beats the requested address.
	a := dora(t, s, mac(5))
	clk.Forward(2 * time.Hour)
	if got := offer(mac(5), withReq("192.168.1.100")); got != a.String() {
		t.Errorf("offer(client whose lease expired) = %s, want its previous %s", got, a)
	}
	// By client identifier, not by MAC, when the client sends one.
	cid := dhcpv4.WithOption(dhcpv4.OptClientIdentifier([]byte{0xff, 1, 2, 3, 4}))
	b := dora(t, s, mac(6), cid)
	if got := offer(mac(7), cid); got != b.String() {
		t.Errorf("offer(same client id, another MAC) = %s, want %s", got, b)
	}
	checkInvariants(t, s)
}

// TestRFC2131_4_3_1_OfferHold checks that an OFFER holds its address for
// OfferHold only: a full range frees up when the offers lapse.
func TestRFC2131_4_3_1_OfferHold(t *testing.T) {
	cfg := testConfig(2)
	cfg.OfferHold = 30 * time.Second
	s, clk := newTestServer(t, cfg)
	for i := range 2 {
		if m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(i)))); m == nil {
			t.Fatalf("DISCOVER %d: no offer", i)
		}
	}
	if m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(9)))); m != nil {
		t.Fatalf("DISCOVER with the range offered out = %v, want no reply", typeOf(m))
	}
	if got := s.Stats().PoolExhausted.Load(); got != 1 {
		t.Errorf("PoolExhausted = %d, want 1", got)
	}
	if st := s.Status(); st.Offered != 2 || st.PoolUsed != 2 {
		t.Errorf("Status() Offered, PoolUsed = %d, %d, want 2, 2", st.Offered, st.PoolUsed)
	}
	clk.Forward(29 * time.Second)
	if m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(9)))); m != nil {
		t.Fatalf("DISCOVER 29 s later = %v, want none: the offers still hold", typeOf(m))
	}
	clk.Forward(2 * time.Second)
	m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(9))))
	if typeOf(m) != "OFFER" {
		t.Fatalf("DISCOVER after the hold = %v, want OFFER", typeOf(m))
	}
	// The lapsed offer of mac(0) cannot be requested any more once taken.
	ack, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeRequest, mac(0), withReq(m.YourIPAddr.String()), withSID(srvAddr))))
	if typeOf(ack) != "NAK" {
		t.Errorf("REQUEST of a lapsed offer now offered to another = %v, want NAK", typeOf(ack))
	}
	s.sweep()
	if st := s.Status(); st.Offered != 1 {
		t.Errorf("Status().Offered after sweep = %d, want 1", st.Offered)
	}
	checkInvariants(t, s)
}

// TestRFC2131_4_3_2_Selecting checks REQUEST in SELECTING: our server
// identifier gets an ACK with the offered address; another's releases the
// offer.
func TestRFC2131_4_3_2_Selecting(t *testing.T) {
	s, _ := newTestServer(t, testConfig(2))
	off, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(1))))
	other := ip("192.168.1.2")
	if m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeRequest, mac(1), withReq(off.YourIPAddr.String()), withSID(other)))); m != nil {
		t.Errorf("REQUEST for another server = %v, want no reply", typeOf(m))
	}
	if got := s.Stats().OtherServer.Load(); got != 1 {
		t.Errorf("OtherServer = %d, want 1", got)
	}
	if st := s.Status(); st.Offered != 0 {
		t.Errorf("Status().Offered after the client chose another server = %d, want 0", st.Offered)
	}
	for _, tc := range []struct {
		name string
		hw   net.HardwareAddr
		mods []dhcpv4.Modifier
		want string
		yi   string
	}{
		{"free address", mac(2), []dhcpv4.Modifier{withReq("192.168.1.101"), withSID(srvAddr)}, "ACK", "192.168.1.101"},
		{"taken address", mac(3), []dhcpv4.Modifier{withReq("192.168.1.101"), withSID(srvAddr)}, "NAK", "0.0.0.0"},
		{"outside the range", mac(3), []dhcpv4.Modifier{withReq("192.168.1.50"), withSID(srvAddr)}, "NAK", "0.0.0.0"},
		{"static address", mac(3), []dhcpv4.Modifier{withReq(staticIP.String()), withSID(srvAddr)}, "NAK", "0.0.0.0"},
		{"static client asks another", staticMAC, []dhcpv4.Modifier{withReq("192.168.1.100"), withSID(srvAddr)}, "NAK", "0.0.0.0"},
		{"static client", staticMAC, []dhcpv4.Modifier{withReq(staticIP.String()), withSID(srvAddr)}, "ACK", staticIP.String()},
		{"no requested address", mac(3), []dhcpv4.Modifier{withSID(srvAddr)}, "none", ""},
		{"ciaddr set", mac(3), []dhcpv4.Modifier{withReq("192.168.1.100"), withSID(srvAddr), withCI("192.168.1.100")}, "none", ""},
	} {
		m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeRequest, tc.hw, tc.mods...)))
		if typeOf(m) != tc.want || m != nil && m.YourIPAddr.String() != tc.yi {
			t.Errorf("%s: REQUEST = %s, want %s %s", tc.name, typeOf(m), tc.want, tc.yi)
		} else if m != nil {
			if sid := m.ServerIdentifier(); !sid.Equal(net.IP(srvAddr.AsSlice())) {
				t.Errorf("%s: server identifier = %v, want %v", tc.name, sid, srvAddr)
			}
		}
	}
	if got := s.Stats().Drops[DropBadRequest].Load(); got != 2 {
		t.Errorf("Drops[bad_request] = %d, want 2", got)
	}
	checkInvariants(t, s)
}

// TestRFC2131_4_3_2_InitReboot checks INIT-REBOOT: NAK for a foreign
// network, an address in use or one not the client's; silence without a
// record; ACK for the client's own address.
func TestRFC2131_4_3_2_InitReboot(t *testing.T) {
	s, clk := newTestServer(t, testConfig(5))
	a := dora(t, s, mac(1))
	b := dora(t, s, mac(2))
	clk.Forward(2 * time.Hour) // both expired: records remain
	for _, tc := range []struct {
		name string
		hw   net.HardwareAddr
		req  string
		want string
	}{
		{"foreign network", mac(1), "10.0.0.5", "NAK"},
		{"foreign network, no record", mac(9), "10.0.0.5", "NAK"},
		{"static address of another", mac(9), staticIP.String(), "NAK"},
		{"no record", mac(9), "192.168.1.104", "none"},
		{"not the client's address", mac(1), "192.168.1.104", "NAK"},
		{"own expired lease", mac(1), a.String(), "ACK"},
		{"bound to another", mac(9), a.String(), "NAK"},
		{"static client", staticMAC, staticIP.String(), "ACK"},
		{"static client, dynamic address", staticMAC, "192.168.1.104", "NAK"},
		{"own lease again", mac(2), b.String(), "ACK"},
	} {
		m, p := exchange(t, s, bcast(msg(dhcpv4.MessageTypeRequest, tc.hw, withReq(tc.req))))
		if typeOf(m) != tc.want {
			t.Errorf("%s: INIT-REBOOT REQUEST %s = %s, want %s", tc.name, tc.req, typeOf(m), tc.want)
			continue
		}
		if tc.want == "NAK" && (p.Dst.Addr() != broadcast4 || p.DstMAC != nil) {
			t.Errorf("%s: NAK to %v %v, want broadcast (RFC 2131 §4.1)", tc.name, p.Dst, p.DstMAC)
		}
		if tc.want == "ACK" && m.YourIPAddr.String() != tc.req {
			t.Errorf("%s: ACK yiaddr %v, want %s", tc.name, m.YourIPAddr, tc.req)
		}
	}
	if got := s.Stats().NoRecord.Load(); got != 1 {
		t.Errorf("NoRecord = %d, want 1", got)
	}
}

// TestRFC2131_4_3_2_Renewing checks RENEWING (unicast, ciaddr set): the
// lease is extended and the ACK goes to ciaddr.
func TestRFC2131_4_3_2_Renewing(t *testing.T) {
	s, clk := newTestServer(t, testConfig(5))
	a := dora(t, s, mac(1))
	clk.Forward(30 * time.Minute) // T1
	m, p := exchange(t, s, unicast(msg(dhcpv4.MessageTypeRequest, mac(1), withCI(a.String()))))
	if typeOf(m) != "ACK" || ip4(m.YourIPAddr) != a || ip4(m.ClientIPAddr) != a {
		t.Fatalf("RENEWING REQUEST = %s yiaddr %v ciaddr %v, want ACK %v %v", typeOf(m), m.YourIPAddr, m.ClientIPAddr, a, a)
	}
	if p.Dst != netip.AddrPortFrom(a, 68) || !bytes.Equal(p.DstMAC, mac(1)) {
		t.Errorf("renew ACK to %v %v, want %v:68 %v", p.Dst, p.DstMAC, a, mac(1))
	}
	if got, want := leaseOf(t, s, a).Expiry, clk.Now().Add(time.Hour); !got.Equal(want) {
		t.Errorf("expiry after renew = %v, want %v", got, want)
	}
	// Another client's address: NAK. An address outside the subnet: NAK.
	if m, _ := exchange(t, s, unicast(msg(dhcpv4.MessageTypeRequest, mac(2), withCI(a.String())))); typeOf(m) != "NAK" {
		t.Errorf("RENEWING another's address = %s, want NAK", typeOf(m))
	}
	if m, _ := exchange(t, s, unicast(msg(dhcpv4.MessageTypeRequest, mac(2), withCI("10.9.9.9")))); typeOf(m) != "NAK" {
		t.Errorf("RENEWING a foreign address = %s, want NAK", typeOf(m))
	}
	// A lease the server lost (no record) and still free: taken back.
	if m, _ := exchange(t, s, unicast(msg(dhcpv4.MessageTypeRequest, mac(3), withCI("192.168.1.104")))); typeOf(m) != "ACK" {
		t.Errorf("RENEWING a free address the server has no record of = %s, want ACK", typeOf(m))
	}
	// A static client renewing a dynamic address: NAK, so it rebinds to
	// its static one.
	if m, _ := exchange(t, s, unicast(msg(dhcpv4.MessageTypeRequest, staticMAC, withCI("192.168.1.103")))); typeOf(m) != "NAK" {
		t.Errorf("static client RENEWING a dynamic address = %s, want NAK", typeOf(m))
	}
	checkInvariants(t, s)
}

// TestRFC2131_4_3_2_Rebinding checks REBINDING (broadcast, ciaddr set),
// after T2 and after expiry.
func TestRFC2131_4_3_2_Rebinding(t *testing.T) {
	s, clk := newTestServer(t, testConfig(5))
	a := dora(t, s, mac(1))
	clk.Forward(time.Hour * 7 / 8) // T2
	m, p := exchange(t, s, bcast(msg(dhcpv4.MessageTypeRequest, mac(1), withCI(a.String()))))
	if typeOf(m) != "ACK" || ip4(m.YourIPAddr) != a {
		t.Fatalf("REBINDING REQUEST = %s %v, want ACK %v", typeOf(m), m.YourIPAddr, a)
	}
	if p.Dst != netip.AddrPortFrom(a, 68) {
		t.Errorf("rebind ACK to %v, want ciaddr %v:68 (RFC 2131 §4.1)", p.Dst, a)
	}
	clk.Forward(2 * time.Hour)
	if m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeRequest, mac(1), withCI(a.String())))); typeOf(m) != "ACK" {
		t.Errorf("REBINDING an expired lease still recorded = %s, want ACK", typeOf(m))
	}
	if m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeRequest, mac(2), withCI("172.16.1.1")))); typeOf(m) != "NAK" {
		t.Errorf("REBINDING from a foreign network = %s, want NAK", typeOf(m))
	}
}

// TestRFC2131_4_4_5_LeaseExpiry checks the lease times sent (T1 = 1/2,
// T2 = 7/8, §4.4.5) and that an expired lease leaves Hosts, stays the
// client's previous address, and is reused for others only when the
// range has nothing else.
func TestRFC2131_4_4_5_LeaseExpiry(t *testing.T) {
	changes := 0
	cfg := testConfig(2)
	cfg.OnChange = func() { changes++ }
	s, clk := newTestServer(t, cfg)
	m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(1))))
	for _, o := range []struct {
		code uint8
		want uint32
	}{{51, 3600}, {58, 1800}, {59, 3150}} {
		if v := m.Options[o.code]; len(v) != 4 || binary.BigEndian.Uint32(v) != o.want {
			t.Errorf("OFFER option %d = %x, want %d s", o.code, v, o.want)
		}
	}
	a := dora(t, s, mac(1), dhcpv4.WithOption(dhcpv4.OptHostName("Laptop")))
	if h := s.Hosts(); h["laptop"] != a || h["nas"] != staticIP {
		t.Errorf("Hosts() = %v, want laptop → %v and nas → %v", h, a, staticIP)
	}
	if changes != 0 {
		t.Errorf("OnChange called %d times by handle alone, want 0 (serve calls it)", changes)
	}
	clk.Forward(time.Hour)
	if _, ok := s.Hosts()["laptop"]; ok {
		t.Errorf("Hosts() has laptop after its lease expired")
	}
	s.sweep()
	if got := s.Stats().Expired.Load(); got != 1 || changes != 1 {
		t.Errorf("after sweep: Expired = %d, OnChange calls = %d, want 1, 1", got, changes)
	}
	s.sweep()
	if changes != 1 {
		t.Errorf("second sweep called OnChange again")
	}
	if l := leaseOf(t, s, a); l.State != LeaseExpired || l.Hostname != "laptop" {
		t.Errorf("expired lease = %+v, want state expired, hostname kept", l)
	}
	// The never-used address goes first, then the expired one.
	b := dora(t, s, mac(2))
	if b == a {
		t.Fatalf("second client got the expired lease's %v while a never-used address was free", a)
	}
	c := dora(t, s, mac(3))
	if c != a {
		t.Errorf("third client = %v, want the expired %v once nothing else is free", c, a)
	}
	if m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeRequest, mac(1), withReq(a.String())))); typeOf(m) != "NAK" {
		t.Errorf("INIT-REBOOT of the address reused by another = %s, want NAK", typeOf(m))
	}
	checkInvariants(t, s)
}

// TestRFC2131_4_3_3_DeclineQuarantine checks that a declined address is
// given to nobody for DeclineQuarantine, and the decliner gets another.
func TestRFC2131_4_3_3_DeclineQuarantine(t *testing.T) {
	cfg := testConfig(2)
	cfg.DeclineQuarantine = 10 * time.Minute
	s, clk := newTestServer(t, cfg)
	a := dora(t, s, mac(1))
	if m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDecline, mac(2), withReq(a.String()), withSID(srvAddr)))); m != nil {
		t.Fatalf("DECLINE replied %s", typeOf(m))
	}
	if got := s.Stats().Drops[DropNotOurs].Load(); got != 1 {
		t.Errorf("DECLINE of another client's address: Drops[not_ours] = %d, want 1", got)
	}
	exchange(t, s, bcast(msg(dhcpv4.MessageTypeDecline, mac(1), withReq(a.String()), withSID(srvAddr))))
	if st := s.Status(); st.Declined != 1 || st.PoolUsed != 1 {
		t.Errorf("Status() Declined, PoolUsed = %d, %d, want 1, 1", st.Declined, st.PoolUsed)
	}
	b := dora(t, s, mac(1))
	if b == a {
		t.Fatalf("decliner got its declined %v again", a)
	}
	if m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(3), withReq(a.String())))); m != nil {
		t.Errorf("DISCOVER during the quarantine = %s %v, want none (range full)", typeOf(m), m.YourIPAddr)
	}
	clk.Forward(10*time.Minute + time.Second)
	if m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(3)))); typeOf(m) != "OFFER" || ip4(m.YourIPAddr) != a {
		t.Errorf("DISCOVER after the quarantine = %s %v, want OFFER %v", typeOf(m), m, a)
	}
	// A static client's decline cannot take its address away.
	exchange(t, s, bcast(msg(dhcpv4.MessageTypeDecline, staticMAC, withReq(staticIP.String()), withSID(srvAddr))))
	if m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, staticMAC))); ip4(m.YourIPAddr) != staticIP {
		t.Errorf("static client after DECLINE offered %v, want %v", m.YourIPAddr, staticIP)
	}
	if got := s.Stats().Decline.Load(); got != 3 {
		t.Errorf("Decline = %d, want 3", got)
	}
	checkInvariants(t, s)
}

// TestRFC2131_4_3_4_Release checks that a released address is free but
// remembered: the client gets it back, others once the range is full.
func TestRFC2131_4_3_4_Release(t *testing.T) {
	s, _ := newTestServer(t, testConfig(2))
	a := dora(t, s, mac(1), dhcpv4.WithOption(dhcpv4.OptHostName("pc")))
	if m, _ := exchange(t, s, unicast(msg(dhcpv4.MessageTypeRelease, mac(2), withCI(a.String()), withSID(srvAddr)))); m != nil {
		t.Fatalf("RELEASE replied")
	}
	if l := leaseOf(t, s, a); l.State != LeaseBound {
		t.Errorf("another client's RELEASE changed the lease to %s", l.State)
	}
	exchange(t, s, unicast(msg(dhcpv4.MessageTypeRelease, mac(1), withCI(a.String()), withSID(srvAddr))))
	if l := leaseOf(t, s, a); l.State != LeaseReleased {
		t.Errorf("lease after RELEASE = %s, want released", l.State)
	}
	if st := s.Status(); st.PoolUsed != 0 {
		t.Errorf("PoolUsed after RELEASE = %d, want 0", st.PoolUsed)
	}
	if _, ok := s.Hosts()["pc"]; ok {
		t.Errorf("Hosts() keeps a released lease's name")
	}
	if b := dora(t, s, mac(1)); b != a {
		t.Errorf("client after its RELEASE got %v, want its previous %v", b, a)
	}
	exchange(t, s, unicast(msg(dhcpv4.MessageTypeRelease, mac(1), withCI(a.String()))))
	dora(t, s, mac(2))
	if c := dora(t, s, mac(3)); c != a {
		t.Errorf("third client with the range otherwise full got %v, want the released %v", c, a)
	}
	checkInvariants(t, s)
}

// TestRFC2131_4_3_5_Inform checks that an INFORM gets the options, no
// address and no lease time, unicast to ciaddr.
func TestRFC2131_4_3_5_Inform(t *testing.T) {
	cfg := testConfig(5)
	cfg.Domain = "lan"
	s, _ := newTestServer(t, cfg)
	m, p := exchange(t, s, unicast(msg(dhcpv4.MessageTypeInform, mac(1), withCI("192.168.1.50"))))
	if typeOf(m) != "ACK" {
		t.Fatalf("INFORM = %s, want ACK", typeOf(m))
	}
	if !m.YourIPAddr.Equal(net.IPv4zero) || m.Options.Has(dhcpv4.OptionIPAddressLeaseTime) {
		t.Errorf("INFORM ACK yiaddr %v, lease time %v: want 0.0.0.0 and none", m.YourIPAddr, m.Options.Has(dhcpv4.OptionIPAddressLeaseTime))
	}
	if m.DomainName() != "lan" || len(m.Router()) != 1 {
		t.Errorf("INFORM ACK options %v, want domain and router", m.Options)
	}
	if p.Dst != netip.MustParseAddrPort("192.168.1.50:68") || !bytes.Equal(p.DstMAC, mac(1)) {
		t.Errorf("INFORM ACK to %v %v, want 192.168.1.50:68 %v", p.Dst, p.DstMAC, mac(1))
	}
	if st := s.Status(); len(st.Leases) != 1 {
		t.Errorf("INFORM created a lease: %+v", st.Leases)
	}
	if m, _ := exchange(t, s, unicast(msg(dhcpv4.MessageTypeInform, mac(1), withCI("10.0.0.50")))); m != nil {
		t.Errorf("INFORM from a foreign network answered")
	}
}

// TestRFC2131_4_1_ReplyAddressing checks where each reply goes, as §4.1
// says: giaddr, else ciaddr, else the broadcast bit, else yiaddr at
// chaddr; a NAK is broadcast unless relayed.
func TestRFC2131_4_1_ReplyAddressing(t *testing.T) {
	relayMAC := net.HardwareAddr{0x02, 0xee, 0, 0, 0, 1}
	for _, tc := range []struct {
		name    string
		typ     dhcpv4.MessageType
		mods    []dhcpv4.Modifier
		dst     string
		dstMAC  net.HardwareAddr
		wantTyp string
		bflag   bool
	}{
		{"giaddr", dhcpv4.MessageTypeDiscover, []dhcpv4.Modifier{dhcpv4.WithGatewayIP(net.ParseIP("192.168.1.2")), dhcpv4.WithBroadcast(true)}, "192.168.1.2:67", relayMAC, "OFFER", true},
		{"giaddr nak", dhcpv4.MessageTypeRequest, []dhcpv4.Modifier{dhcpv4.WithGatewayIP(net.ParseIP("192.168.1.2")), withReq("10.1.1.1")}, "192.168.1.2:67", relayMAC, "NAK", true},
		{"nak", dhcpv4.MessageTypeRequest, []dhcpv4.Modifier{withReq("10.1.1.1")}, "255.255.255.255:68", nil, "NAK", false},
		{"ciaddr", dhcpv4.MessageTypeRequest, []dhcpv4.Modifier{withCI("192.168.1.100"), dhcpv4.WithBroadcast(true)}, "192.168.1.100:68", mac(1), "ACK", true},
		{"broadcast bit", dhcpv4.MessageTypeDiscover, []dhcpv4.Modifier{dhcpv4.WithBroadcast(true)}, "255.255.255.255:68", nil, "OFFER", true},
		{"unicast to yiaddr", dhcpv4.MessageTypeDiscover, nil, "192.168.1.100:68", mac(1), "OFFER", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestServer(t, testConfig(5))
			p := bcast(msg(tc.typ, mac(1), tc.mods...))
			if gi := ip4(msg(tc.typ, mac(1), tc.mods...).GatewayIPAddr); !gi.IsUnspecified() {
				p.SrcMAC = relayMAC
				p.Src = netip.AddrPortFrom(gi, 67)
				p.Dst = netip.AddrPortFrom(srvAddr, 67)
			}
			m, out := exchange(t, s, p)
			if typeOf(m) != tc.wantTyp {
				t.Fatalf("reply = %s, want %s", typeOf(m), tc.wantTyp)
			}
			if out.Dst.String() != tc.dst || !bytes.Equal(out.DstMAC, tc.dstMAC) {
				t.Errorf("reply to %v %v, want %s %v", out.Dst, out.DstMAC, tc.dst, tc.dstMAC)
			}
			if out.Src != netip.AddrPortFrom(srvAddr, 67) {
				t.Errorf("reply from %v, want %v:67", out.Src, srvAddr)
			}
			if m.IsBroadcast() != tc.bflag {
				t.Errorf("reply broadcast flag = %v, want %v", m.IsBroadcast(), tc.bflag)
			}
			if !bytes.Equal(m.ClientHWAddr, mac(1)) || m.OpCode != dhcpv4.OpcodeBootReply {
				t.Errorf("reply chaddr %v op %v, want %v BootReply", m.ClientHWAddr, m.OpCode, mac(1))
			}
		})
	}
}

// TestOptions checks the configured options and their defaults, option
// 121's default route (RFC 3442), the client identifier echo (RFC 6842)
// and the shrinking to the client's maximum message size.
func TestOptions(t *testing.T) {
	cfg := testConfig(5)
	cfg.Domain = "home.arpa"
	cfg.MTU = 1400
	cfg.NTP = []netip.Addr{ip("192.168.1.5")}
	cfg.Routes = []Route{{To: netip.MustParsePrefix("10.0.0.0/8"), Via: ip("192.168.1.254")}}
	s, _ := newTestServer(t, cfg)
	cid := []byte{1, 2, 0x10, 0, 0, 0, 1}
	m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(1), dhcpv4.WithOption(dhcpv4.OptClientIdentifier(cid)))))
	if got := m.Router(); len(got) != 1 || !got[0].Equal(net.IP(srvAddr.AsSlice())) {
		t.Errorf("router = %v, want the server %v", got, srvAddr)
	}
	if got := m.DNS(); len(got) != 1 || !got[0].Equal(net.IP(srvAddr.AsSlice())) {
		t.Errorf("DNS = %v, want the server %v", got, srvAddr)
	}
	if got := m.SubnetMask().String(); got != "ffffff00" {
		t.Errorf("subnet mask = %s, want ffffff00", got)
	}
	if m.DomainName() != "home.arpa" || binary.BigEndian.Uint16(m.Options[26]) != 1400 || len(m.NTPServers()) != 1 {
		t.Errorf("domain %q mtu %x ntp %v", m.DomainName(), m.Options[26], m.NTPServers())
	}
	rs := m.ClasslessStaticRoute()
	if len(rs) != 2 || rs[0].String() != "route to 10.0.0.0/8 via 192.168.1.254" || rs[1].String() != "route to 0.0.0.0/0 via 192.168.1.1" {
		t.Errorf("option 121 = %v, want 10.0.0.0/8 and the default route", rs)
	}
	if got := m.Options[61]; !bytes.Equal(got, cid) {
		t.Errorf("client identifier echoed = %x, want %x (RFC 6842)", got, cid)
	}
	if got := m.Options[28]; !bytes.Equal(got, []byte{192, 168, 1, 255}) {
		t.Errorf("broadcast address = %v", got)
	}

	// 60 routes do not fit 576 bytes: only the requested options stay.
	for i := range 60 {
		cfg.Routes = append(cfg.Routes, Route{To: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 24), Via: ip("192.168.1.254")})
	}
	cfg.Routes = cfg.Routes[1:]
	s, _ = newTestServer(t, cfg)
	req := dhcpv4.WithRequestedOptions(dhcpv4.OptionRouter, dhcpv4.OptionDomainNameServer)
	m, p := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(1), req)))
	if len(p.Payload)+28 > 576 || m.Options.Has(dhcpv4.OptionClasslessStaticRoute) || !m.Options.Has(dhcpv4.OptionRouter) || !m.Options.Has(dhcpv4.OptionIPAddressLeaseTime) {
		t.Errorf("oversized reply: %d bytes, options %v; want ≤ 576 with 121 left out", len(p.Payload)+28, m.Options)
	}
	big := dhcpv4.WithOption(dhcpv4.OptMaxMessageSize(1500))
	m, _ = exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(1), req, big)))
	if len(m.ClasslessStaticRoute()) != 61 {
		t.Errorf("with max message size 1500: %d routes, want 61", len(m.ClasslessStaticRoute()))
	}
}

// TestDrops checks that bad input is dropped and counted by reason.
func TestDrops(t *testing.T) {
	good := bcast(msg(dhcpv4.MessageTypeDiscover, mac(1)))
	edit := func(f func(b []byte) []byte) rawudp.Packet {
		p := good
		p.Payload = f(bytes.Clone(good.Payload))
		return p
	}
	noType := msg(dhcpv4.MessageTypeDiscover, mac(1))
	noType.Options.Del(dhcpv4.OptionDHCPMessageType)
	for _, tc := range []struct {
		name string
		p    rawudp.Packet
		want DropReason
	}{
		{"empty", edit(func([]byte) []byte { return nil }), DropMalformed},
		{"truncated header", edit(func(b []byte) []byte { return b[:200] }), DropMalformed},
		{"magic cookie", edit(func(b []byte) []byte { b[236] = 1; return b }), DropWrongMagicCookie},
		{"op reply", edit(func(b []byte) []byte { b[0] = 2; return b }), DropWrongOp},
		{"htype", edit(func(b []byte) []byte { b[1] = 6; return b }), DropBadHardware},
		{"hlen", edit(func(b []byte) []byte { b[2] = 16; return b }), DropBadHardware},
		{"multicast chaddr", edit(func(b []byte) []byte { b[28] = 1; return b }), DropBadHardware},
		{"zero chaddr", edit(func(b []byte) []byte { copy(b[28:34], make([]byte, 6)); return b }), DropBadHardware},
		{"option overflow", edit(func(b []byte) []byte { return append(b[:240], 53, 1, 1, 12, 200, 'x') }), DropMalformed},
		{"no end option", edit(func(b []byte) []byte { return append(b[:240], 53, 1, 1) }), DropMalformed},
		{"option overload, sname overruns", edit(func(b []byte) []byte {
			b[44], b[45] = 12, 127 // a host name longer than sname's 64 bytes
			return append(b[:240], 53, 1, 1, 52, 1, 2, 255)
		}), DropMalformed},
		{"option overload, file without end", edit(func(b []byte) []byte {
			for i := 108; i < 236; i++ {
				b[i] = 'A' // option 65, length 65, ... to the field's end
			}
			return append(b[:240], 53, 1, 1, 52, 1, 1, 255)
		}), DropMalformed},
		{"option overload value 7", edit(func(b []byte) []byte { return append(b[:240], 53, 1, 1, 52, 1, 7, 255) }), DropMalformed},
		{"no message type", bcast(noType), DropMalformed},
		{"giant client id", bcast(msg(dhcpv4.MessageTypeDiscover, mac(1), dhcpv4.WithOption(dhcpv4.OptClientIdentifier(make([]byte, 600))))), DropBadClientID},
		{"short client id", bcast(msg(dhcpv4.MessageTypeDiscover, mac(1), dhcpv4.WithOption(dhcpv4.OptClientIdentifier([]byte{1})))), DropBadClientID},
		{"offer", bcast(msg(dhcpv4.MessageTypeOffer, mac(1))), DropWrongType},
		{"unicast to another host", func() rawudp.Packet { p := good; p.Dst = netip.MustParseAddrPort("192.168.1.7:67"); return p }(), DropNotOurs},
		{"relay from a foreign net", bcast(msg(dhcpv4.MessageTypeDiscover, mac(1), dhcpv4.WithGatewayIP(net.ParseIP("10.0.0.1")))), DropNotOurs},
		{"request without fields", bcast(msg(dhcpv4.MessageTypeRequest, mac(1))), DropBadRequest},
		{"release without ciaddr", bcast(msg(dhcpv4.MessageTypeRelease, mac(1))), DropBadRequest},
		{"release of nothing", unicast(msg(dhcpv4.MessageTypeRelease, mac(1), withCI("192.168.1.100"))), DropNotOurs},
		{"decline without server id", bcast(msg(dhcpv4.MessageTypeDecline, mac(1), withReq("192.168.1.100"))), DropBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestServer(t, testConfig(5))
			if m, _ := exchange(t, s, tc.p); m != nil {
				t.Errorf("reply %s, want none", typeOf(m))
			}
			for r := range NumDropReasons {
				want := uint64(0)
				if r == tc.want {
					want = 1
				}
				if got := s.Stats().Drops[r].Load(); got != want {
					t.Errorf("Drops[%s] = %d, want %d", r, got, want)
				}
			}
			if s.Stats().Received.Load() != 1 {
				t.Errorf("Received = %d, want 1", s.Stats().Received.Load())
			}
		})
	}
	if DropWrongMagicCookie.String() != "wrong_magic_cookie" || NumDropReasons.String() != "unknown" {
		t.Errorf("DropReason.String() names: %s %s", DropWrongMagicCookie, NumDropReasons)
	}
}

// TestStatusAndHosts checks the snapshot's rows and the host names.
func TestStatusAndHosts(t *testing.T) {
	s, clk := newTestServer(t, testConfig(5))
	a := dora(t, s, mac(1), dhcpv4.WithOption(dhcpv4.OptHostName("desk.example")))
	b := dora(t, s, mac(2), dhcpv4.WithOption(dhcpv4.OptHostName("bad name")))
	exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(3))))
	st := s.Status()
	if st.PoolSize != 5 || st.PoolUsed != 3 || st.Offered != 1 {
		t.Errorf("PoolSize, PoolUsed, Offered = %d, %d, %d, want 5, 3, 1", st.PoolSize, st.PoolUsed, st.Offered)
	}
	want := []Lease{
		{MAC: MAC(staticMAC), Addr: staticIP, Hostname: "nas", Static: true, State: LeaseUnused},
		{MAC: MAC(mac(1)), Addr: a, Hostname: "desk", Expiry: clk.Now().Add(time.Hour), State: LeaseBound},
		{MAC: MAC(mac(2)), Addr: b, Expiry: clk.Now().Add(time.Hour), State: LeaseBound},
	}
	if len(st.Leases) != len(want) {
		t.Fatalf("Status().Leases = %+v, want %+v", st.Leases, want)
	}
	for i, l := range st.Leases {
		w := want[i]
		if l.Addr != w.Addr || !bytes.Equal(l.MAC, w.MAC) || l.Hostname != w.Hostname || !l.Expiry.Equal(w.Expiry) || l.Static != w.Static || l.State != w.State {
			t.Errorf("Leases[%d] = %+v, want %+v", i, l, w)
		}
	}
	if h := s.Hosts(); len(h) != 2 || h["desk"] != a || h["nas"] != staticIP {
		t.Errorf("Hosts() = %v, want desk and nas", h)
	}
}

func leaseOf(t testing.TB, s *Server, a netip.Addr) Lease {
	t.Helper()
	for _, l := range s.Status().Leases {
		if l.Addr == a {
			return l
		}
	}
	t.Fatalf("no lease for %v in %+v", a, s.Status().Leases)
	return Lease{}
}
