package linuxpeer_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/mka"
)

// TestWPASupplicantMKPDUs checks package mka's decoder and ICV against
// MKPDUs captured from wpa_supplicant 2.10 in the guest, an implementation
// written apart from ours: each decodes, its ICV verifies with the CAK it
// was made with, and no longer does once one octet of the body or of the
// ICV is changed.
func TestWPASupplicantMKPDUs(t *testing.T) {
	f, err := os.Open("testdata/wpa_supplicant_mkpdus.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cakHex string
	var key *mka.ICVKey
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<16)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "cak "):
			cakHex = strings.TrimPrefix(line, "cak ")
			continue
		case strings.HasPrefix(line, "ckn "):
			cak, err := mka.ParseCAK(cakHex, strings.TrimPrefix(line, "ckn "))
			if err != nil {
				t.Fatal(err)
			}
			if key, err = mka.NewICVKey(cak); err != nil {
				t.Fatal(err)
			}
			continue
		}
		frame, err := hex.DecodeString(line)
		if err != nil || key == nil {
			t.Fatalf("line %q: %v (or no cak/ckn before it)", line, err)
		}
		n++
		var m mka.MKPDU
		if err := mka.Decode(frame, &m); err != nil {
			t.Errorf("Decode(frame %d) = %v, want nil", n, err)
			continue
		}
		if !key.Verify(frame, &m) {
			t.Errorf("frame %d: ICV does not verify", n)
		}
		for _, i := range []int{20, len(frame) - 1} { // a body octet, the ICV's last
			bad := bytes.Clone(frame)
			bad[i] ^= 0x01
			var mb mka.MKPDU
			if err := mka.Decode(bad, &mb); err == nil && key.Verify(bad, &mb) {
				t.Errorf("frame %d with octet %d changed: ICV still verifies", n, i)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 6 {
		t.Errorf("%d frames in testdata, want >= 6", n)
	}
}
