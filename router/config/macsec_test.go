package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/macsec"
)

const (
	testKey128 = "00112233445566778899aabbccddeeff"
	testKey256 = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
)

// macsecBase is minimal plus a WAN interface for a SecY to sit on.
const macsecBase = minimal + `  - name: wan
    port: eth0
    vlan: 2
    role: wan
`

func writeKey(t *testing.T, hexKey string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "k.key")
	if err := os.WriteFile(p, []byte(hexKey+"\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseMACsec(t *testing.T) {
	kf := writeKey(t, testKey128, 0o600)
	in := macsecBase + `macsec:
  - name: ms1
    on: wan
    sci: 1234
    encrypt: on
    replay: on
    window: 0
    validate: check
    encoding_sa: 1
    tx:
      - {an: 1, pn: 1234, key_id: "01", key_file: ` + kf + `}
    rx:
      - sci: 0x020000000002abcd
        sa: [{an: 0, key_id: "02", key: ` + testKey128 + `}]
    addresses: [10.9.0.1/30]
routes:
  - {to: 10.2.0.0/16, via: 10.9.0.2}
  - {to: 10.3.0.0/16, dev: ms1}
`
	c, err := Parse("name.yaml", []byte(in))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(c.MACsec) != 1 {
		t.Fatalf("MACsec = %d SecYs, want 1", len(c.MACsec))
	}
	ms := c.MACsec[0]
	want := macsec.NewKey([]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff})
	switch {
	case ms.Name != "ms1" || ms.On != "wan" || ms.SCI != 0x1234:
		t.Errorf("name/on/sci = %q %q %#x", ms.Name, ms.On, ms.SCI)
	case !ms.Encrypt || !ms.Protect || !ms.SendSCI || !ms.Replay || ms.Window != 0:
		t.Errorf("flags = %+v", ms)
	case ms.ValidateFrames() != macsec.ValidateCheck || ms.CipherSuite() != macsec.GCMAES128 || ms.EncodingSA != 1:
		t.Errorf("validate/cipher/encoding_sa = %v %v %d", ms.ValidateFrames(), ms.CipherSuite(), ms.EncodingSA)
	case len(ms.TX) != 1 || ms.TX[0].AN != 1 || ms.TX[0].PN != 1234 || ms.TX[0].KeyID != "01" || !ms.TX[0].Key.Equal(want) || ms.TX[0].KeyFile != kf:
		t.Errorf("tx = %+v", ms.TX)
	case len(ms.RX) != 1 || ms.RX[0].SCI != 0x020000000002abcd || len(ms.RX[0].SA) != 1 || !ms.RX[0].SA[0].Key.Equal(want):
		t.Errorf("rx = %+v", ms.RX)
	case len(ms.Addresses) != 1 || ms.Addresses[0] != pfx("10.9.0.1/30"):
		t.Errorf("addresses = %v", ms.Addresses)
	}
	if !ms.Equal(&c.MACsec[0]) {
		t.Errorf("Equal(self) = false")
	}
}

func TestParseMACsecErrors(t *testing.T) {
	open := writeKey(t, testKey128, 0o644)
	short := writeKey(t, testKey128, 0o600)
	for _, tt := range []struct {
		name string
		in   string
		want []string
	}{
		{"key file too open", `macsec:
  - name: ms1
    on: wan
    tx: [{an: 0, key_id: "01", key_file: ` + open + `}]
`, []string{"name.yaml:15:42: macsec \"ms1\": tx sa 0: key_file: " + open + " has mode 0644"}},
		{"missing key file", `macsec:
  - {name: ms1, on: wan, tx: [{an: 0, key_id: "01", key_file: /nonexistent/k}]}
`, []string{"name.yaml:13:63: macsec \"ms1\": tx sa 0: key_file: stat /nonexistent/k"}},
		{"key length", `macsec:
  - {name: ms1, on: wan, cipher: gcm-aes-256, tx: [{an: 0, key_id: "01", key_file: ` + short + `}]}
`, []string{"gcm-aes-256 needs a 32-octet key, the key has 16 octets"}},
		{"bad inline key", `macsec:
  - {name: ms1, on: wan, tx: [{an: 0, key_id: "01", key: zz` + testKey128 + `}]}
`, []string{"key is not valid hex"}},
		{"unknown interface", `macsec:
  - {name: ms1, on: wan2}
`, []string{`on: unknown interface "wan2"; did you mean "wan"?`}},
		{"name clash", `macsec:
  - {name: wan, on: wan}
`, []string{`macsec "wan": name is already an interface's`}},
		{"an range and twice", `macsec:
  - {name: ms1, on: wan, tx: [{an: 4, key_id: "01", key: ` + testKey128 + `}, {an: 1, key_id: "02", key: ` + testKey128 + `}, {an: 1, key_id: "03", key: ` + testKey128 + `}]}
`, []string{"tx sa 4: an out of range", "tx sa 1: listed twice"}},
		{"xpn without salt", `macsec:
  - {name: ms1, on: wan, cipher: gcm-aes-xpn-128, tx: [{an: 0, key_id: "01", key: ` + testKey128 + `}]}
`, []string{"gcm-aes-xpn-128 needs ssci and salt"}},
		{"send_sci with end_station", `macsec:
  - {name: ms1, on: wan, end_station: on}
`, []string{"send_sci on cannot be combined with end_station"}},
		{"unknown cipher", `macsec:
  - {name: ms1, on: wan, cipher: gcm-aes-129}
`, []string{`unknown cipher "gcm-aes-129"`}},
		{"unknown parallel", `macsec:
  - {name: ms1, on: wan, parallel: allways}
`, []string{`unknown parallel "allways"`, `did you mean "always"`}},
		{"on/off", `macsec:
  - {name: ms1, on: wan, encrypt: maybe}
`, []string{`encrypt: want on or off, got "maybe"`}},
		{"unknown key", `macsec:
  - {name: ms1, on: wan, icvlen: 16}
`, []string{`unknown key "icvlen"`}},
		{"key_id required", `macsec:
  - {name: ms1, on: wan, rx: [{sci: 1, sa: [{an: 0, key: ` + testKey128 + `}]}]}
`, []string{"rx sci 0000000000000001 sa 0: key_id is required"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("name.yaml", []byte(macsecBase+tt.in))
			if err == nil {
				t.Fatalf("Parse() = nil error, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse() error =\n%v\nwant it to contain\n%s", err, w)
				}
			}
			for _, k := range []string{testKey128, testKey256, strings.ToUpper(testKey128)} {
				if strings.Contains(err.Error(), k) {
					t.Errorf("Parse() error quotes the key: %v", err)
				}
			}
		})
	}
}

func TestParseMACsecMTU(t *testing.T) {
	in := `ports: [{name: eth0, mtu: 1500}]
interfaces:
  - {name: wan, port: eth0, role: wan}
macsec:
  - {name: ms1, on: wan, mtu: 1469}
  - {name: ms2, on: wan, mtu: 1468}
`
	_, err := Parse("name.yaml", []byte(in))
	want := `name.yaml:5:31: macsec "ms1": mtu 1469 does not fit on "wan": its mtu 1500 leaves 1468 after the SecTAG and ICV`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Parse() error = %v, want %q", err, want)
	}
	if strings.Contains(err.Error(), `"ms2": mtu`) {
		t.Errorf("Parse() rejects mtu 1468 on a 1500 link: %v", err)
	}
}

// TestParseMACsecParallel checks the three parallel settings and that
// changing one makes a reload rebuild the SecY (SameSecY false).
func TestParseMACsecParallel(t *testing.T) {
	parse := func(p string) MACsec {
		t.Helper()
		in := macsecBase + "macsec:\n  - {name: ms1, on: wan"
		if p != "" {
			in += ", parallel: " + p
		}
		c, err := Parse("name.yaml", []byte(in+"}\n"))
		if err != nil {
			t.Fatalf("parallel %q: %v", p, err)
		}
		return c.MACsec[0]
	}
	def, auto, always, off := parse(""), parse("auto"), parse("always"), parse("off")
	for _, tt := range []struct {
		name    string
		ms      MACsec
		always  bool
		workers int
	}{{"default", def, false, 0}, {"auto", auto, false, 0}, {"always", always, true, 0}, {"off", off, false, 1}} {
		if tt.ms.AlwaysParallel() != tt.always || tt.ms.Workers() != tt.workers {
			t.Errorf("%s: AlwaysParallel %v Workers %d, want %v %d", tt.name, tt.ms.AlwaysParallel(), tt.ms.Workers(), tt.always, tt.workers)
		}
	}
	if !def.SameSecY(&auto) || def.SameSecY(&off) || auto.SameSecY(&always) || off.SameSecY(&always) {
		t.Errorf("SameSecY: default~auto %v, default~off %v, auto~always %v, off~always %v; want true false false false",
			def.SameSecY(&auto), def.SameSecY(&off), auto.SameSecY(&always), off.SameSecY(&always))
	}
}

// TestMACsecLowerIPv6: a SecY's lower interface runs no IPv6 service
// (its frames would cross the link in clear), by default silently and,
// when its ipv6: mapping turns one on, with an error naming the line.
func TestMACsecLowerIPv6(t *testing.T) {
	allServices(t)
	const ms = "macsec:\n  - {name: ms1, on: wan, tx: [{an: 0, key_id: \"01\", key: " + testKey128 + "}]}\n"
	c, err := Parse("name.yaml", []byte(macsecBase+ms))
	if err != nil {
		t.Fatal(err)
	}
	if !c.CarriesMACsec("wan") || c.CarriesMACsec("lan") {
		t.Errorf("CarriesMACsec(wan, lan) = %v, %v, want true, false", c.CarriesMACsec("wan"), c.CarriesMACsec("lan"))
	}
	if v := c.IPv6Settings(c.Interface("wan")); v.AcceptRA || v.PD != 0 || v.RA || v.DHCPv6 {
		t.Errorf("IPv6Settings(wan under ms1) = %+v, want all off", v)
	}
	if v := c.IPv6Settings(c.Interface("lan")); !v.RA {
		t.Errorf("IPv6Settings(lan) = %+v, want the lan default (ra on)", v)
	}
	for _, tt := range []struct{ block, want string }{
		{"    ipv6: {ra: on}\n", `name.yaml:12:5: interface "wan": ipv6: interface "wan" carries macsec "ms1", so its IPv6 would cross the link in clear`},
		{"    ipv6: {pd: 56}\n", `carries macsec "ms1"`},
	} {
		if _, err := Parse("name.yaml", []byte(macsecBase+tt.block+ms)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(lower with %q) = %v, want an error containing %q", tt.block, err, tt.want)
		}
	}
	if _, err := Parse("name.yaml", []byte(macsecBase+"    ipv6: {ra: off}\n"+ms)); err != nil {
		t.Errorf("Parse(lower with ipv6: {ra: off}) = %v, want accepted", err)
	}
}
