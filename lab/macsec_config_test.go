package lab

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gvrouter/gvrouter/router/config"
)

// TestMACsecRouterConfig checks that both routers' configs of the MACsec
// lab parse for every cipher, with and without a rekey, and without
// MACsec, and that each router receives with the key the other sends.
func TestMACsecRouterConfig(t *testing.T) {
	dir := t.TempDir()
	key := func(name, hex string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(hex+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k128 := "00112233445566778899aabbccddeeff"
	k256 := k128 + k128
	for _, tt := range []macsecOptions{
		{cipher: "gcm-aes-128", encrypt: true},
		{cipher: "gcm-aes-256"},
		{cipher: "gcm-aes-xpn-128", encrypt: true},
		{cipher: "gcm-aes-xpn-256", encrypt: true},
		{off: true},
	} {
		k := k128
		if tt.cipher == "gcm-aes-256" || tt.cipher == "gcm-aes-xpn-256" {
			k = k256
		}
		o := tt
		o.keyFile1, o.keyFile2 = key("k1", k), key("k2", k)
		o.pnStore1, o.pnStore2 = filepath.Join(dir, "pn1"), filepath.Join(dir, "pn2")
		for _, rekey := range []bool{false, true} {
			if rekey {
				o.rekeyFile = key("k3", k)
			}
			var cfgs [2]*config.Config
			for n := 1; n <= 2; n++ {
				b, err := macsecRouterConfig("gvl42", n, 8080, o)
				if err != nil {
					t.Fatal(err)
				}
				c, err := config.Parse("lab.yaml", b)
				if err != nil {
					t.Fatalf("%+v router %d: Parse: %v\n%s", tt, n, err, b)
				}
				cfgs[n-1] = c
			}
			if o.off {
				if len(cfgs[0].MACsec)+len(cfgs[1].MACsec) != 0 {
					t.Errorf("off: configs have SecYs")
				}
				// The plain link stands in for the SecY, which is never a
				// WAN: as a WAN, router 2 would drop router 1's new flows.
				for n, c := range cfgs {
					for _, ifc := range c.Interfaces {
						if ifc.Name == msLower && ifc.Role == config.RoleWAN {
							t.Errorf("off: router %d's link interface %s has the WAN role", n+1, ifc.Name)
						}
					}
				}
				continue
			}
			r1, r2 := cfgs[0].MACsec[0], cfgs[1].MACsec[0]
			if r1.RX[0].SCI != r2.SCI || r2.RX[0].SCI != r1.SCI || r1.Encrypt != o.encrypt {
				t.Errorf("%+v: SCIs %x/%x, rx %x/%x, encrypt %v", tt, r1.SCI, r2.SCI, r1.RX[0].SCI, r2.RX[0].SCI, r1.Encrypt)
			}
			for i, tx := range r1.TX {
				rx := r2.RX[0].SA[i]
				if tx.AN != rx.AN || tx.KeyFile != rx.KeyFile || tx.SSCI != rx.SSCI || tx.Salt != rx.Salt {
					t.Errorf("%+v: router 1 tx sa %+v does not match router 2 rx sa %+v", tt, tx, rx)
				}
			}
			if rekey && (len(r1.TX) != 2 || r1.EncodingSA != 1 || len(r2.RX[0].SA) != 2) {
				t.Errorf("%+v rekey: router 1 tx %d SAs, encoding_sa %d; router 2 rx %d SAs", tt, len(r1.TX), r1.EncodingSA, len(r2.RX[0].SA))
			}
		}
	}
}

// TestMACsecRouterConfigMKA checks that the MKA variant of the lab's
// configs parses: both SecYs on one CAK and CKN, no static SA, router 1
// the key server (lower priority) and the only one rolling the SAK.
func TestMACsecRouterConfigMKA(t *testing.T) {
	dir := t.TempDir()
	cak := filepath.Join(dir, "cak")
	if err := os.WriteFile(cak, []byte("00112233445566778899aabbccddeeff\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := macsecOptions{cipher: "gcm-aes-128", encrypt: true, mka: true, cakFile: cak, mkaRekey: "10s",
		pnStore1: filepath.Join(dir, "pn1"), pnStore2: filepath.Join(dir, "pn2")}
	var ms [2]config.MACsec
	for n := 1; n <= 2; n++ {
		b, err := macsecRouterConfig("gvl42", n, 8080, o)
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Parse("lab.yaml", b)
		if err != nil {
			t.Fatalf("router %d: Parse: %v\n%s", n, err, b)
		}
		ms[n-1] = c.MACsec[0]
	}
	r1, r2 := ms[0], ms[1]
	if r1.MKA == nil || r2.MKA == nil || len(r1.TX)+len(r1.RX)+len(r2.TX)+len(r2.RX) != 0 {
		t.Fatalf("mka %v/%v, static SAs %d/%d/%d/%d, want mka and none", r1.MKA, r2.MKA, len(r1.TX), len(r1.RX), len(r2.TX), len(r2.RX))
	}
	if !r1.MKA.CAK.Equal(r2.MKA.CAK) || r1.MKA.CKN != msCKN {
		t.Errorf("the routers' CAKs differ or CKN %q != %q", r1.MKA.CKN, msCKN)
	}
	if r1.MKA.Priority >= r2.MKA.Priority || r1.MKA.Rekey.String() != "10s" || r2.MKA.Rekey != 0 {
		t.Errorf("priorities %d/%d, rekey %v/%v: want router 1 key server rolling every 10s", r1.MKA.Priority, r2.MKA.Priority, r1.MKA.Rekey, r2.MKA.Rekey)
	}
}
