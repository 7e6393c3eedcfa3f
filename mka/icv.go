package mka

import "crypto/subtle"

// ICVKey computes and checks MKPDU ICVs with the ICK derived from a CAK
// (802.1X 9.4.1: AES-CMAC over DA, SA, EtherType and the EAPOL packet up to
// the ICV). It holds its own scratch space, so it is not safe for
// concurrent use; it never prints the ICK.
type ICVKey struct {
	c   *cmac
	out [ICVLen]byte // scratch: a local array would escape through cipher.Block
}

// NewICVKey derives the ICK from cak.
func NewICVKey(cak CAK) (*ICVKey, error) {
	ick, err := cak.deriveICK()
	if err != nil {
		return nil, err
	}
	defer clear(ick)
	c, err := newCMAC(ick)
	if err != nil {
		return nil, err
	}
	return &ICVKey{c: c}, nil
}

// String implements fmt.Stringer without revealing the key.
func (k *ICVKey) String() string { return "ICVKey(redacted)" }

// Verify reports whether the ICV of frame, decoded into m by Decode, is
// right. It does not allocate.
func (k *ICVKey) Verify(frame []byte, m *MKPDU) bool {
	if m.icvAt < ethHeaderLen+eapolHeaderLen || m.icvAt > len(frame) {
		return false
	}
	k.c.sum(&k.out, frame[:m.icvAt])
	return subtle.ConstantTimeCompare(k.out[:], m.ICV[:]) == 1
}
