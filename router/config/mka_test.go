package config

import (
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/mka"
)

const testCKN = "96437a93ccf10d9dfe347846cce52c7d"

func TestParseMKA(t *testing.T) {
	cak := writeKey(t, testKey128, 0o600)
	cak256 := writeKey(t, testKey256, 0o400)
	for _, tt := range []struct {
		name string
		in   string
		want MKA
	}{
		{"defaults", `macsec:
  - name: ms1
    on: wan
    mka: {ckn: ` + testCKN + `, cak_file: ` + cak + `}
`, MKA{CKN: testCKN, CAKFile: cak, Priority: DefaultMKAPriority}},
		{"all keys, 256-bit cak, mode 0400", `macsec:
  - name: ms1
    on: wan
    mka:
      ckn: "01"
      cak_file: ` + cak256 + `
      priority: 0
      rekey: 10s
`, MKA{CKN: "01", CAKFile: cak256, Priority: 0, Rekey: 10 * time.Second}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("name.yaml", []byte(macsecBase+tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			k := c.MACsec[0].MKA
			if k == nil {
				t.Fatal("Parse: MKA = nil")
			}
			if k.CKN != tt.want.CKN || k.CAKFile != tt.want.CAKFile || k.Priority != tt.want.Priority || k.Rekey != tt.want.Rekey {
				t.Errorf("Parse: MKA = %+v, want %+v", *k, tt.want)
			}
			keyHex := testKey128
			if k.CAKFile == cak256 {
				keyHex = testKey256
			}
			want, err := mka.ParseCAK(keyHex, tt.want.CKN)
			if err != nil {
				t.Fatal(err)
			}
			if !k.CAK.Equal(want) {
				t.Errorf("Parse: CAK is not the file's key")
			}
			if s := c.MACsec[0].MKA.CAK.String(); strings.Contains(s, keyHex) {
				t.Errorf("CAK.String() = %q quotes the key", s)
			}
		})
	}
}

func TestParseMKAErrors(t *testing.T) {
	cak := writeKey(t, testKey128, 0o600)
	open := writeKey(t, testKey128, 0o640)
	short := writeKey(t, "00112233", 0o600)
	notHex := writeKey(t, "zz"+testKey128[2:], 0o600)
	for _, tt := range []struct {
		name string
		in   string
		want []string
	}{
		{"with static tx", `macsec:
  - name: ms1
    on: wan
    mka: {ckn: ` + testCKN + `, cak_file: ` + cak + `}
    tx: [{an: 0, key_id: "01", key: ` + testKey128 + `}]
`, []string{`name.yaml:15:10: macsec "ms1": mka and static tx/rx SAs (line 16) cannot be combined`}},
		{"with static rx", `macsec:
  - name: ms1
    on: wan
    rx: [{sci: 1, sa: [{an: 0, key_id: "01", key: ` + testKey128 + `}]}]
    mka: {ckn: ` + testCKN + `, cak_file: ` + cak + `}
`, []string{`name.yaml:16:10: macsec "ms1": mka and static tx/rx SAs (line 15) cannot be combined`}},
		{"cak file too open", `macsec:
  - {name: ms1, on: wan, mka: {ckn: "01", cak_file: ` + open + `}}
`, []string{"mka: cak_file: " + open + " has mode 0640; a cak file must be readable by its owner only"}},
		{"cak file missing", `macsec:
  - {name: ms1, on: wan, mka: {ckn: "01", cak_file: /nonexistent/cak}}
`, []string{"mka: cak_file: stat /nonexistent/cak"}},
		{"cak length", `macsec:
  - {name: ms1, on: wan, mka: {ckn: "01", cak_file: ` + short + `}}
`, []string{"cak must be 16 or 32 octets, got 4"}},
		{"cak not hex", `macsec:
  - {name: ms1, on: wan, mka: {ckn: "01", cak_file: ` + notHex + `}}
`, []string{"cak is not valid hex"}},
		{"ckn not hex", `macsec:
  - {name: ms1, on: wan, mka: {ckn: xyz, cak_file: ` + cak + `}}
`, []string{`mka: ckn "xyz": want 1..32 octets of hex`}},
		{"ckn too long", `macsec:
  - {name: ms1, on: wan, mka: {ckn: "` + strings.Repeat("ab", 33) + `", cak_file: ` + cak + `}}
`, []string{"want 1..32 octets of hex"}},
		{"required keys", `macsec:
  - {name: ms1, on: wan, mka: {priority: 1}}
`, []string{"mka: ckn is required", "mka: cak_file is required"}},
		{"priority range", `macsec:
  - {name: ms1, on: wan, mka: {ckn: "01", cak_file: ` + cak + `, priority: 256}}
`, []string{"priority 256 out of range: want 0..255"}},
		{"rekey too short", `macsec:
  - {name: ms1, on: wan, mka: {ckn: "01", cak_file: ` + cak + `, rekey: 1s}}
`, []string{"rekey 1s is shorter than 5s"}},
		{"encoding_sa", `macsec:
  - {name: ms1, on: wan, encoding_sa: 1, mka: {ckn: "01", cak_file: ` + cak + `}}
`, []string{"encoding_sa is chosen by MKA"}},
		{"unknown key", `macsec:
  - {name: ms1, on: wan, mka: {ckn: "01", cak_file: ` + cak + `, mka_cak: ` + testKey128 + `}}
`, []string{`unknown key "mka_cak"`}},
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
			for _, k := range []string{testKey128, testKey256, strings.ToUpper(testKey128), testKey128[2:]} {
				if strings.Contains(err.Error(), k) {
					t.Errorf("Parse() error quotes the key: %v", err)
				}
			}
		})
	}
}

func TestMKAEqual(t *testing.T) {
	a := writeKey(t, testKey128, 0o600)
	b := writeKey(t, testKey256, 0o600)
	parse := func(file string, rekey string) *MACsec {
		t.Helper()
		c, err := Parse("name.yaml", []byte(macsecBase+`macsec:
  - {name: ms1, on: wan, mka: {ckn: "01", cak_file: `+file+rekey+`}}
`))
		if err != nil {
			t.Fatal(err)
		}
		return &c.MACsec[0]
	}
	base := parse(a, "")
	if !base.Equal(parse(a, "")) {
		t.Error("Equal(same config) = false, want true")
	}
	if base.SameSecY(parse(b, "")) {
		t.Error("SameSecY(other cak) = true, want false")
	}
	// The rekey interval is changed in place by a reload: same SecY,
	// same participant.
	if other := parse(a, ", rekey: 10s"); !base.SameSecY(other) || !base.Equal(other) || other.MKA.Rekey != 10*time.Second {
		t.Errorf("other rekey: SameSecY %v, Equal %v, rekey %v; want true, true, 10s", base.SameSecY(other), base.Equal(other), other.MKA.Rekey)
	}
}
