package config

import (
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gvrouter/gvrouter/mka"
)

// MKA makes a SecY take its keys from MACsec Key Agreement (IEEE
// 802.1X-2020) instead of static tx/rx SAs: both ends share the CAK and
// CKN, elect a key server and it distributes and rolls the SAKs. The
// words are wpa_supplicant's: ckn is mka_ckn, cak_file holds mka_cak,
// priority is mka_priority.
type MKA struct {
	// CKN is the CA key name in hex, 1..32 octets, e.g.
	// "96437a93ccf10d9dfe347846cce52c7d" (mka_ckn).
	CKN string
	// CAKFile holds the CAK in hex, 16 or 32 octets (mka_cak), e.g.
	// "/etc/gvrouter/ms1.cak"; mode 0600 or stricter.
	CAKFile string
	// CAK is the key read from CAKFile, with CKN; it never prints.
	CAK mka.CAK
	// Priority is the key server priority 0..255, e.g. 16 (the default):
	// the lowest value wins, 255 never serves (mka_priority).
	Priority int
	// Rekey makes the key server distribute a new SAK this often, e.g.
	// "1h"; 0 (the default) rekeys only on membership change and before
	// the PN runs out.
	Rekey time.Duration
	Pos   Pos

	src src
}

// DefaultMKAPriority is the key server priority when none is set: the
// middle of the range, so an operator can rank a box above or below it.
const DefaultMKAPriority = 16

// MinMKARekey is the shortest rekey interval: a SAK roll takes one or
// two MKA hello times (2 s each) to finish, so a shorter interval would
// only queue rolls.
const MinMKARekey = 5 * time.Second

var mkaKeys = []string{"ckn", "cak_file", "priority", "rekey"}

// mka decodes a SecY's mka: mapping. The CAK is read here; no message
// ever quotes it.
func (d *decoder) mka(e entry, what string) *MKA {
	k := &MKA{Pos: posOf(e.val), Priority: DefaultMKAPriority}
	what += ": mka"
	if !d.object(e.val, what) {
		return k
	}
	m := d.mapping(e.val, what, mkaKeys, nil)
	if d.strKey(m, "ckn", what, &k.src, &k.CKN) {
		if b, err := hex.DecodeString(k.CKN); err != nil || len(b) < mka.MinCKNLen || len(b) > mka.MaxCKNLen {
			d.errorf(m["ckn"].val, "%s: ckn %q: want %d..%d octets of hex", what, k.CKN, mka.MinCKNLen, mka.MaxCKNLen)
			k.src.markBad("ckn")
		}
		k.CKN = strings.ToLower(k.CKN)
	} else if _, ok := m["ckn"]; !ok {
		d.errorf(e.val, "%s: ckn is required (hex, as wpa_supplicant's mka_ckn)", what)
	}
	if d.strKey(m, "cak_file", what, &k.src, &k.CAKFile) {
		if !k.src.bad["ckn"] && k.CKN != "" {
			cak, err := readCAKFile(k.CAKFile, k.CKN)
			if err != nil {
				d.errorf(m["cak_file"].val, "%s: cak_file: %v", what, err)
			} else {
				k.CAK = cak
			}
		}
	} else if _, ok := m["cak_file"]; !ok {
		d.errorf(e.val, "%s: cak_file is required (a file holding the CAK in hex, mode 0600)", what)
	}
	if d.intKey(m, "priority", what, &k.src, &k.Priority) && (k.Priority < 0 || k.Priority > 255) {
		d.errorf(m["priority"].val, "%s: priority %d out of range: want 0..255 (lowest is key server)", what, k.Priority)
	}
	if re, ok := m["rekey"]; ok {
		k.src.set("rekey", posOf(re.val))
		if v, ok := d.duration(re, what); ok {
			if v < MinMKARekey {
				d.errorf(re.val, "%s: rekey %s is shorter than %s", what, fmtDuration(v), fmtDuration(MinMKARekey))
			}
			k.Rekey = v
		}
	}
	return k
}

// readCAKFile reads a CAK in hex from path, which must be a regular file
// with mode 0600 or stricter, and pairs it with the CKN. Errors never
// quote the file's content.
func readCAKFile(path, ckn string) (mka.CAK, error) {
	st, err := os.Stat(path)
	if err != nil {
		return mka.CAK{}, err
	}
	if !st.Mode().IsRegular() {
		return mka.CAK{}, fmt.Errorf("%s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&^MaxKeyFileMode != 0 {
		return mka.CAK{}, fmt.Errorf("%s has mode %04o; a cak file must be readable by its owner only (chmod 600 %s)", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return mka.CAK{}, err
	}
	defer clear(b)
	cak, err := mka.ParseCAK(strings.TrimSpace(string(b)), ckn)
	if err != nil {
		return mka.CAK{}, fmt.Errorf("%s: %v", path, err)
	}
	return cak, nil
}

// validateMKA checks a SecY's mka: against the rest of the entry.
func (c *Config) validateMKA(l *errorList, ms *MACsec, what string) {
	if ms.MKA == nil {
		return
	}
	if len(ms.TX) > 0 || len(ms.RX) > 0 {
		var static Pos
		if len(ms.TX) > 0 {
			static = ms.TX[0].Pos
		} else {
			static = ms.RX[0].Pos
		}
		l.add(ms.MKA.Pos, "%s: mka and static tx/rx SAs%s cannot be combined: MKA installs the SAs itself; remove tx and rx, or mka", what, atLine(static))
	}
	if _, ok := ms.src.pos["encoding_sa"]; ok {
		l.add(ms.src.at("encoding_sa", ms.Pos), "%s: encoding_sa is chosen by MKA; remove it", what)
	}
}

// Equal reports whether k and o configure the same MKA participant, keys
// included; positions are ignored. Either may be nil. The rekey interval
// is not part of the participant: a reload changes it in place, without
// rebuilding the SecY (and so without a new MI or SAK).
func (k *MKA) Equal(o *MKA) bool {
	if k == nil || o == nil {
		return k == o
	}
	return k.CKN == o.CKN && k.CAKFile == o.CAKFile && k.CAK.Equal(o.CAK) && k.Priority == o.Priority
}
