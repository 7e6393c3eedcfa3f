package config

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gvrouter/gvrouter/macsec"
)

// MACsec is a SecY on an interface (`ip link add link ON NAME type
// macsec ...` plus `ip macsec add NAME tx|rx ...`). It is a netstack NIC
// of its own, named Name; frames without a SecTAG still reach the
// interface below it. Keys are macsec.Key values, which never print.
type MACsec struct {
	Name string // NIC name, e.g. "ms1"; unique among interfaces and SecYs
	On   string // the interface below, e.g. "eth0.2"
	// SCI is the SecY's SCI, e.g. 0x0200000000020001; 0 = the lower
	// port's MAC || port 1, like Linux ("sci: 1234" in YAML is hex, as
	// iproute2 reads it).
	SCI uint64
	// Cipher is "gcm-aes-128" (the default when ""), "gcm-aes-256",
	// "gcm-aes-xpn-128" or "gcm-aes-xpn-256".
	Cipher     string
	Encrypt    bool   // encrypt on|off; default off (integrity only), as Linux
	Protect    bool   // protect on|off (protectFrames); default on
	SendSCI    bool   // send_sci on|off; default on
	EndStation bool   // end_station on|off; default off
	SCB        bool   // scb on|off; default off
	Replay     bool   // replay on|off (replayProtect); default off
	Window     uint32 // replay window, e.g. 0 (PNs strictly increasing)
	Validate   string // "strict" (the default when ""), "check" or "disabled"
	EncodingSA int    // encoding_sa 0..3: the transmit SA in use
	TX         []MACsecSA
	RX         []MACsecRXSC
	// MKA, when set, keys the SecY by MACsec Key Agreement instead of TX
	// and RX (mka.go); nil for static SAs.
	MKA *MKA
	// Addresses are the SecY interface's addresses, e.g. [10.9.0.1/30].
	Addresses []netip.Prefix
	// MTU is the L3 MTU, e.g. 1468; 0 = the lower interface's minus 32,
	// like Linux.
	MTU int
	// PNStore is the directory where transmit PN high-water marks are
	// kept, e.g. "/var/lib/gvrouter/macsec"; "" = <state_dir>/macsec.
	PNStore string
	// Parallel is "auto" (the default when ""), "always" or "off":
	// whether a Protect or Verify call shares its crypto with helper
	// goroutines only when that outweighs waking them (auto), for every
	// batch worth splitting (always; see macsec.Config.AlwaysParallel),
	// or never (off: all crypto on the calling goroutine, for machines
	// where handing a frame to another core costs more than its crypto).
	Parallel string
	Pos      Pos // where the SecY is defined

	src src
}

// MACsecSA is a transmit or receive SA.
type MACsecSA struct {
	AN int // association number 0..3
	// PN is the first PN to send (transmit) or the lowest PN accepted
	// (receive), e.g. 1; 0 = 1.
	PN    uint64
	KeyID string     // key id, hex, e.g. "01"; names the SA's PN state
	Key   macsec.Key // the SAK, from key_file or key; never printed
	// KeyFile is where Key came from, e.g. "/etc/gvrouter/ms1-tx0.key";
	// "" for an inline key.
	KeyFile string
	SSCI    uint32   // short SCI, XPN suites only, e.g. 1
	Salt    [12]byte // 96-bit salt, XPN suites only (hex in YAML)
	Pos     Pos

	src src
}

// MACsecRXSC is a receive SC with its SAs.
type MACsecRXSC struct {
	SCI uint64 // the peer's SCI, e.g. 0x0200000000010001 (hex in YAML)
	SA  []MACsecSA
	Pos Pos

	src src
}

// macsecOverhead is what a SecY adds to a frame: SecTAG with SCI (16
// octets) and ICV (16), as Linux subtracts from a macsec device's MTU.
const macsecOverhead = 32

// DefaultPNStore is where PN high-water marks go when neither pn_store
// nor state_dir is set: <DefaultStateDir>/macsec.
const DefaultPNStore = DefaultStateDir + "/macsec"

// MaxKeyFileMode is the loosest mode a key file may have: readable and
// writable by its owner only (the same rule ssh applies to private keys).
const MaxKeyFileMode = 0o600

var (
	macsecKeys = []string{"name", "on", "sci", "cipher", "encrypt", "protect", "send_sci", "end_station", "scb",
		"replay", "window", "validate", "encoding_sa", "tx", "rx", "addresses", "mtu", "pn_store", "parallel", "mka"}
	macsecSAKeys   = []string{"an", "pn", "key_id", "key_file", "key", "ssci", "salt"}
	macsecRXSCKeys = []string{"sci", "sa"}
	cipherNames    = []string{"gcm-aes-128", "gcm-aes-256", "gcm-aes-xpn-128", "gcm-aes-xpn-256"}
	validateNames  = []string{"strict", "check", "disabled"}
	parallelNames  = []string{"auto", "always", "off"}
)

// MACsecByName returns the SecY named name, or nil.
func (c *Config) MACsecByName(name string) *MACsec {
	for i := range c.MACsec {
		if c.MACsec[i].Name == name {
			return &c.MACsec[i]
		}
	}
	return nil
}

// CarriesMACsec reports whether interface name is the lower interface
// of a SecY (a macsec: entry's on:).
func (c *Config) CarriesMACsec(name string) bool { return c.macsecOn(name) != nil }

// macsecOn returns the SecY on interface name, or nil.
func (c *Config) macsecOn(name string) *MACsec {
	for i := range c.MACsec {
		if c.MACsec[i].On == name {
			return &c.MACsec[i]
		}
	}
	return nil
}

func macsecWhat(name string) string {
	if name == "" {
		return "macsec"
	}
	return fmt.Sprintf("macsec %q", name)
}

// macsecList decodes the top-level macsec list.
func (d *decoder) macsecList(c *Config, e entry) {
	items, _ := d.list(e, "config")
	for _, it := range items {
		if d.object(it, "macsec") {
			c.MACsec = append(c.MACsec, d.macsec(it))
		}
	}
}

func (d *decoder) macsec(n *yaml.Node) MACsec {
	ms := MACsec{Pos: posOf(n), Protect: true, SendSCI: true}
	m := d.mapping(n, macsecWhat(peekName(n)), macsecKeys, nil)
	d.strKey(m, "name", "macsec", &ms.src, &ms.Name)
	what := macsecWhat(ms.Name)
	d.strKey(m, "on", what, &ms.src, &ms.On)
	if e, ok := m["sci"]; ok {
		ms.SCI, _ = d.hexU64(e, what, &ms.src)
	}
	d.strKey(m, "cipher", what, &ms.src, &ms.Cipher)
	d.onOff(m, "encrypt", what, &ms.src, &ms.Encrypt)
	d.onOff(m, "protect", what, &ms.src, &ms.Protect)
	d.onOff(m, "send_sci", what, &ms.src, &ms.SendSCI)
	d.onOff(m, "end_station", what, &ms.src, &ms.EndStation)
	d.onOff(m, "scb", what, &ms.src, &ms.SCB)
	d.onOff(m, "replay", what, &ms.src, &ms.Replay)
	var w int
	if d.intKey(m, "window", what, &ms.src, &w) {
		if w < 0 {
			d.errorf(m["window"].val, "%s: window %d out of range: want 0..%d", what, w, uint32(1<<31-1))
		} else {
			ms.Window = uint32(w)
		}
	}
	d.strKey(m, "validate", what, &ms.src, &ms.Validate)
	d.intKey(m, "encoding_sa", what, &ms.src, &ms.EncodingSA)
	d.intKey(m, "mtu", what, &ms.src, &ms.MTU)
	d.strKey(m, "pn_store", what, &ms.src, &ms.PNStore)
	d.strKey(m, "parallel", what, &ms.src, &ms.Parallel)
	if e, ok := m["addresses"]; ok {
		items, _ := d.list(e, what)
		for _, it := range items {
			if it.Kind != yaml.ScalarNode || isNull(it) {
				d.errorf(it, "%s: addresses: want an address like 10.9.0.1/30, got %s", what, kindName(it))
				continue
			}
			p, err := parseAddress(it.Value)
			if err != nil {
				d.errorf(it, "%s: addresses: %v", what, err)
				continue
			}
			if err := checkAddress(p); err != nil {
				d.errorf(it, "%s: addresses: %v", what, err)
				continue
			}
			ms.src.set("addresses."+strconv.Itoa(len(ms.Addresses)), posOf(it))
			ms.Addresses = append(ms.Addresses, p)
		}
	}
	if e, ok := m["mka"]; ok {
		ms.MKA = d.mka(e, what)
	}
	if e, ok := m["tx"]; ok {
		items, _ := d.list(e, what)
		for _, it := range items {
			if d.object(it, what+": tx") {
				ms.TX = append(ms.TX, d.macsecSA(it, what+": tx sa"))
			}
		}
	}
	if e, ok := m["rx"]; ok {
		items, _ := d.list(e, what)
		for _, it := range items {
			if !d.object(it, what+": rx") {
				continue
			}
			sc := MACsecRXSC{Pos: posOf(it)}
			rm := d.mapping(it, what+": rx", macsecRXSCKeys, nil)
			scWhat := what + ": rx"
			if e, ok := rm["sci"]; ok {
				sc.SCI, _ = d.hexU64(e, scWhat, &sc.src)
				scWhat = fmt.Sprintf("%s: rx sci %016x", what, sc.SCI)
			} else {
				d.errorf(it, "%s: rx: sci is required", what)
			}
			if e, ok := rm["sa"]; ok {
				sas, _ := d.list(e, scWhat)
				for _, s := range sas {
					if d.object(s, scWhat+": sa") {
						sc.SA = append(sc.SA, d.macsecSA(s, scWhat+" sa"))
					}
				}
			}
			ms.RX = append(ms.RX, sc)
		}
	}
	return ms
}

// macsecSA decodes one SA. Key material is read here (a key file must be
// mode 0600 or stricter); no message ever quotes it.
func (d *decoder) macsecSA(n *yaml.Node, what string) MACsecSA {
	sa := MACsecSA{Pos: posOf(n)}
	m := d.mapping(n, what, macsecSAKeys, nil)
	if d.intKey(m, "an", what, &sa.src, &sa.AN) {
		what = fmt.Sprintf("%s %d", what, sa.AN)
	} else if _, ok := m["an"]; !ok {
		d.errorf(n, "%s: an is required (0..3)", what)
	}
	if e, ok := m["pn"]; ok {
		v, err := strconv.ParseUint(e.val.Value, 0, 64)
		if e.val.Kind != yaml.ScalarNode || err != nil {
			d.errorf(e.val, "%s: pn: want a number 1..2^64-1, got %s", what, kindName(e.val))
		} else {
			sa.PN = v
		}
	}
	if e, ok := m["key_id"]; ok {
		if s, ok := d.str(e, what); ok {
			if _, err := hex.DecodeString(s); err != nil || s == "" || len(s) > 32 {
				d.errorf(e.val, "%s: key_id %q: want 1..16 octets of hex, e.g. \"01\"", what, s)
			} else {
				sa.KeyID = strings.ToLower(s)
			}
		}
	}
	ke, hasKey := m["key"]
	fe, hasFile := m["key_file"]
	switch {
	case hasKey && hasFile:
		d.errorf(ke.key, "%s: set key_file or key, not both", what)
	case !hasKey && !hasFile:
		d.errorf(n, "%s: key_file (or an inline key) is required", what)
	case hasKey:
		if ke.val.Kind != yaml.ScalarNode || isNull(ke.val) {
			d.errorf(ke.val, "%s: key: want the key in hex", what)
			break
		}
		k, err := macsec.ParseKey(strings.TrimSpace(ke.val.Value))
		if err != nil {
			d.errorf(ke.val, "%s: key: %v", what, err)
			break
		}
		sa.Key = k
	default:
		if s, ok := d.str(fe, what); ok {
			sa.KeyFile = s
			k, err := readKeyFile(s)
			if err != nil {
				d.errorf(fe.val, "%s: key_file: %v", what, err)
			} else {
				sa.Key = k
			}
		}
	}
	if e, ok := m["ssci"]; ok {
		v, err := strconv.ParseUint(e.val.Value, 0, 32)
		if e.val.Kind != yaml.ScalarNode || err != nil {
			d.errorf(e.val, "%s: ssci: want a 32-bit number", what)
		} else {
			sa.SSCI = uint32(v)
		}
	}
	if e, ok := m["salt"]; ok {
		b, err := hex.DecodeString(strings.TrimPrefix(e.val.Value, "0x"))
		if e.val.Kind != yaml.ScalarNode || err != nil || len(b) != 12 {
			d.errorf(e.val, "%s: salt: want 96 bits (24 hex digits)", what)
		} else {
			copy(sa.Salt[:], b)
		}
	}
	return sa
}

// readKeyFile reads a key in hex from path, which must be a regular file
// with mode 0600 or stricter. Errors never quote the file's content.
func readKeyFile(path string) (macsec.Key, error) {
	st, err := os.Stat(path)
	if err != nil {
		return macsec.Key{}, err
	}
	if !st.Mode().IsRegular() {
		return macsec.Key{}, fmt.Errorf("%s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&^MaxKeyFileMode != 0 {
		return macsec.Key{}, fmt.Errorf("%s has mode %04o; a key file must be readable by its owner only (chmod 600 %s)", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return macsec.Key{}, err
	}
	defer clear(b)
	k, err := macsec.ParseKey(strings.TrimSpace(string(b)))
	if err != nil {
		return macsec.Key{}, fmt.Errorf("%s: %v", path, err)
	}
	return k, nil
}

// hexU64 decodes a scalar as hexadecimal ("1234" and "0x1234" are both
// 0x1234), as iproute2 reads an SCI.
func (d *decoder) hexU64(e entry, what string, s *src) (uint64, bool) {
	s.set(e.key.Value, posOf(e.val))
	if e.val.Kind != yaml.ScalarNode || isNull(e.val) {
		d.errorf(e.val, "%s: %s: want a hex number like 0x1234, got %s", what, e.key.Value, kindName(e.val))
		s.markBad(e.key.Value)
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(e.val.Value), "0x"), 16, 64)
	if err != nil {
		d.errorf(e.val, "%s: %s: %q is not a 64-bit hex number", what, e.key.Value, e.val.Value)
		s.markBad(e.key.Value)
		return 0, false
	}
	return v, true
}

// onOff decodes "on"/"off" (as `ip macsec` writes them) or a YAML bool.
func (d *decoder) onOff(m map[string]entry, key, what string, s *src, dst *bool) {
	e, ok := m[key]
	if !ok {
		return
	}
	s.set(key, posOf(e.val))
	switch strings.ToLower(e.val.Value) {
	case "on", "true", "yes":
		if e.val.Kind == yaml.ScalarNode {
			*dst = true
			return
		}
	case "off", "false", "no":
		if e.val.Kind == yaml.ScalarNode {
			*dst = false
			return
		}
	}
	d.errorf(e.val, "%s: %s: want on or off, got %s", what, key, kindName(e.val))
	s.markBad(key)
}

// CipherSuite returns the SecY's cipher suite.
func (ms *MACsec) CipherSuite() macsec.CipherSuite {
	name := ms.Cipher
	if name == "" {
		name = "gcm-aes-128"
	}
	cs, _ := macsec.ParseCipherSuite(name)
	return cs
}

// ValidateFrames returns the SecY's validateFrames.
func (ms *MACsec) ValidateFrames() macsec.ValidateFrames {
	if ms.Validate == "" {
		return macsec.ValidateStrict
	}
	v, _ := macsec.ParseValidateFrames(ms.Validate)
	return v
}

// validateMACsec checks every SecY: names, the interface below, the
// cipher and its key lengths, ANs, modes.
func (c *Config) validateMACsec(l *errorList) {
	seen := map[string]*MACsec{}
	onIf := map[string]*MACsec{}
	for i := range c.MACsec {
		ms := &c.MACsec[i]
		what := macsecWhat(ms.Name)
		if !ms.src.bad["name"] {
			switch err := checkName(ms.Name); {
			case ms.Name == "":
				l.add(ms.Pos, "macsec: name is required")
			case err != nil:
				l.add(ms.src.at("name", ms.Pos), "macsec: %v", err)
			case c.Interface(ms.Name) != nil:
				l.add(ms.src.at("name", ms.Pos), "%s: name is already an interface's%s", what, atLine(c.Interface(ms.Name).Pos))
			case seen[ms.Name] != nil:
				l.add(ms.src.at("name", ms.Pos), "%s is defined twice%s", what, firstAt(seen[ms.Name].Pos))
			default:
				seen[ms.Name] = ms
			}
		}
		if !ms.src.bad["on"] {
			switch {
			case ms.On == "":
				l.add(ms.Pos, "%s: on is required (the interface below the SecY)", what)
			case c.Interface(ms.On) == nil:
				l.add(ms.src.at("on", ms.Pos), "%s: on: unknown interface %q%s", what, ms.On, hint(ms.On, c.interfaceNames()))
			case onIf[ms.On] != nil:
				l.add(ms.src.at("on", ms.Pos), "%s: interface %q already carries macsec %q", what, ms.On, onIf[ms.On].Name)
			default:
				onIf[ms.On] = ms
			}
		}
		cs := ms.CipherSuite()
		if ms.Cipher != "" && !ms.src.bad["cipher"] && !contains(cipherNames, ms.Cipher) {
			l.add(ms.src.at("cipher", ms.Pos), "%s: unknown cipher %q%s", what, ms.Cipher, hint(ms.Cipher, cipherNames))
			cs = 0
		}
		if ms.Validate != "" && !ms.src.bad["validate"] && !contains(validateNames, ms.Validate) {
			l.add(ms.src.at("validate", ms.Pos), "%s: unknown validate %q%s", what, ms.Validate, hint(ms.Validate, validateNames))
		}
		if ms.Parallel != "" && !ms.src.bad["parallel"] && !contains(parallelNames, ms.Parallel) {
			l.add(ms.src.at("parallel", ms.Pos), "%s: unknown parallel %q%s", what, ms.Parallel, hint(ms.Parallel, parallelNames))
		}
		if ms.SendSCI && (ms.EndStation || ms.SCB) && !ms.src.bad["send_sci"] {
			l.add(ms.src.at("send_sci", ms.Pos), "%s: send_sci on cannot be combined with end_station or scb; set send_sci: off", what)
		}
		if ms.EncodingSA < 0 || ms.EncodingSA > 3 {
			l.add(ms.src.at("encoding_sa", ms.Pos), "%s: encoding_sa %d out of range: want 0..3", what, ms.EncodingSA)
		}
		if ms.MTU != 0 && (ms.MTU < MinMTU || ms.MTU > MaxMTU) {
			l.add(ms.src.at("mtu", ms.Pos), "%s: mtu %d out of range: want %d..%d, or 0 for the lower interface's minus 32", what, ms.MTU, MinMTU, MaxMTU)
		}
		if lower := c.Interface(ms.On); lower != nil && ms.MTU > 0 {
			lowerMTU := lower.MTU
			if p := c.Port(lower.Port); lowerMTU == 0 && p != nil {
				lowerMTU = p.MTU
			}
			if lowerMTU >= MinMTU && ms.MTU > lowerMTU-macsecOverhead {
				l.add(ms.src.at("mtu", ms.Pos), "%s: mtu %d does not fit on %q: its mtu %d leaves %d after the SecTAG and ICV (32 octets)", what, ms.MTU, ms.On, lowerMTU, lowerMTU-macsecOverhead)
			}
		}
		if cs.XPN() && ms.Window > 1<<30 {
			l.add(ms.src.at("window", ms.Pos), "%s: window %d above 2^30 with an XPN cipher", what, ms.Window)
		}
		c.validateMKA(l, ms, what)
		ans := map[int]bool{}
		for j := range ms.TX {
			c.validateSA(l, &ms.TX[j], cs, what+": tx sa", ans)
		}
		scis := map[uint64]bool{}
		for j := range ms.RX {
			sc := &ms.RX[j]
			scWhat := fmt.Sprintf("%s: rx sci %016x", what, sc.SCI)
			if scis[sc.SCI] {
				l.add(sc.Pos, "%s: listed twice", scWhat)
			}
			scis[sc.SCI] = true
			rxANs := map[int]bool{}
			for k := range sc.SA {
				c.validateSA(l, &sc.SA[k], cs, scWhat+" sa", rxANs)
			}
		}
		for j, a := range ms.Addresses {
			at := ms.src.at(fmt.Sprintf("addresses.%d", j), ms.Pos)
			for _, ifc := range c.Interfaces {
				if slices.ContainsFunc(ifc.Addresses, a.Overlaps) {
					l.add(at, "%s: address %s overlaps interface %q's addresses%s", what, a, ifc.Name, atLine(ifc.Pos))
				}
			}
		}
	}
}

// validateSA checks one SA against the cipher suite cs (0 if unknown).
func (c *Config) validateSA(l *errorList, sa *MACsecSA, cs macsec.CipherSuite, what string, ans map[int]bool) {
	what = fmt.Sprintf("%s %d", what, sa.AN)
	if sa.AN < 0 || sa.AN > 3 {
		l.add(sa.src.at("an", sa.Pos), "%s: an out of range: want 0..3", what)
	} else if ans[sa.AN] {
		l.add(sa.src.at("an", sa.Pos), "%s: listed twice", what)
	}
	ans[sa.AN] = true
	if sa.KeyID == "" {
		l.add(sa.Pos, "%s: key_id is required (hex, e.g. \"01\"); it names the SA's PN state", what)
	}
	if cs != 0 && sa.Key.Len() != 0 && sa.Key.Len() != cs.KeyLen() {
		l.add(sa.Pos, "%s: %v needs a %d-octet key, the key has %d octets", what, cs, cs.KeyLen(), sa.Key.Len())
	}
	if cs != 0 && cs.XPN() && (sa.SSCI == 0 || sa.Salt == [12]byte{}) {
		l.add(sa.Pos, "%s: %v needs ssci and salt", what, cs)
	}
	if cs != 0 && !cs.XPN() && sa.PN > 1<<32-1 {
		l.add(sa.Pos, "%s: pn %d above 2^32-1 without an XPN cipher", what, sa.PN)
	}
}

// Equal reports whether m and n configure the same SecY, keys included;
// positions are ignored.
func (m *MACsec) Equal(n *MACsec) bool {
	return m.SameSecY(n) && slices.EqualFunc(m.TX, n.TX, MACsecSA.Equal) &&
		slices.EqualFunc(m.RX, n.RX, func(a, b MACsecRXSC) bool {
			return a.SCI == b.SCI && slices.EqualFunc(a.SA, b.SA, MACsecSA.Equal)
		}) && m.EncodingSA == n.EncodingSA
}

// SameSecY reports whether m and n configure the same SecY apart from
// its SAs and encoding SA, which a running SecY can change in place. A
// change of mka rebuilds the SecY with a fresh participant.
func (m *MACsec) SameSecY(n *MACsec) bool {
	return m.Name == n.Name && m.On == n.On && m.SCI == n.SCI && m.CipherSuite() == n.CipherSuite() &&
		m.Encrypt == n.Encrypt && m.Protect == n.Protect && m.SendSCI == n.SendSCI &&
		m.EndStation == n.EndStation && m.SCB == n.SCB && m.Replay == n.Replay && m.Window == n.Window &&
		m.ValidateFrames() == n.ValidateFrames() && slices.Equal(m.Addresses, n.Addresses) && m.MTU == n.MTU &&
		m.PNStore == n.PNStore && m.AlwaysParallel() == n.AlwaysParallel() && m.Workers() == n.Workers() && m.MKA.Equal(n.MKA)
}

// AlwaysParallel reports whether parallel is "always".
func (m *MACsec) AlwaysParallel() bool { return m.Parallel == "always" }

// Workers is macsec.Config.Workers for the parallel setting: 1 for
// "off" (the caller alone), else 0 (one per core).
func (m *MACsec) Workers() int {
	if m.Parallel == "off" {
		return 1
	}
	return 0
}

// Equal reports whether a and b are the same SA with the same key.
func (a MACsecSA) Equal(b MACsecSA) bool {
	return a.AN == b.AN && a.PN == b.PN && a.KeyID == b.KeyID && a.Key.Equal(b.Key) &&
		a.SSCI == b.SSCI && a.Salt == b.Salt
}
