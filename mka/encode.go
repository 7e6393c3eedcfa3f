package mka

import (
	"errors"
	"fmt"

	"github.com/gvrouter/gvrouter/macsec"
)

// Append encodes m as an Ethernet frame (DA, SA, EtherType 0x888E, EAPOL
// header, parameter sets, ICV computed with k), appends it to b and
// returns the result. It reports an error for field values the wire format
// cannot carry. m.ICV and m.EAPOLVersion 0 are ignored (EAPOLVersion is
// then 3).
func (m *MKPDU) Append(b []byte, k *ICVKey) ([]byte, error) {
	if err := m.check(); err != nil {
		return b, err
	}
	start := len(b)
	b = append(b, m.DA[:]...)
	b = append(b, m.SA[:]...)
	v := m.EAPOLVersion
	if v == 0 {
		v = EAPOLVersion
	}
	b = append(b, EtherType>>8, EtherType&0xff, v, EAPOLTypeMKA, 0, 0)

	bp := &m.Basic
	flags := b2u(bp.KeyServer)<<7 | b2u(bp.MACsecDesired)<<6 | byte(bp.Capability)<<4
	b = appendParamHeader(b, bp.Version, bp.KeyServerPriority, flags, basicFixedLen+len(bp.CKN))
	b = put64(b, uint64(bp.SCI))
	b = append(b, bp.MI[:]...)
	b = put32(b, bp.MN)
	b = put32(b, bp.AlgorithmAgility)
	b = append(b, bp.CKN...)
	b = pad(b, len(bp.CKN))

	if m.Live != nil {
		b = appendParamHeader(b, paramLivePeerList, 0, 0, len(m.Live))
		b = append(b, m.Live...)
	}
	if m.Potential != nil {
		b = appendParamHeader(b, paramPotentialPeerList, 0, 0, len(m.Potential))
		b = append(b, m.Potential...)
	}
	if m.HasSAKUse {
		u := &m.SAKUse
		o1 := u.LatestAN<<6 | b2u(u.LatestTX)<<5 | b2u(u.LatestRX)<<4 | u.OldAN<<2 | b2u(u.OldTX)<<1 | b2u(u.OldRX)
		o2 := b2u(u.PlainTX)<<7 | b2u(u.PlainRX)<<6 | b2u(u.DelayProtect)<<4
		if u.Empty {
			b = appendParamHeader(b, paramSAKUse, o1, o2, 0)
		} else {
			b = appendParamHeader(b, paramSAKUse, o1, o2, sakUseBodyLen)
			b = append(b, u.Latest.MI[:]...)
			b = put32(b, u.Latest.KN)
			b = put32(b, u.LatestLowestPN)
			b = append(b, u.Old.MI[:]...)
			b = put32(b, u.Old.KN)
			b = put32(b, u.OldLowestPN)
		}
	}
	if m.HasDistSAK {
		d := &m.DistSAK
		o1 := d.AN<<6 | byte(d.Offset)<<4
		switch {
		case d.Empty:
			b = appendParamHeader(b, paramDistributedSAK, o1, 0, 0)
		case d.CipherSuite == macsec.GCMAES128:
			b = appendParamHeader(b, paramDistributedSAK, o1, 0, distSAKDefaultLen)
			b = put32(b, d.KN)
			b = append(b, d.WrappedKey...)
		default:
			b = appendParamHeader(b, paramDistributedSAK, o1, 0, 4+8+len(d.WrappedKey))
			b = put32(b, d.KN)
			b = put64(b, uint64(d.CipherSuite))
			b = append(b, d.WrappedKey...)
		}
	}
	if m.HasXPN {
		b = appendParamHeader(b, paramXPN, m.XPN.SuspensionTime, 0, xpnBodyLen)
		b = put32(b, m.XPN.LatestLowestPNHigh)
		b = put32(b, m.XPN.OldLowestPNHigh)
	}
	if m.Announcement != nil {
		b = appendParamHeader(b, paramAnnouncement, 0, 0, len(m.Announcement))
		b = append(b, m.Announcement...)
		b = pad(b, len(m.Announcement))
	}
	if m.ICVIndicator {
		b = appendParamHeader(b, paramICVIndicator, 0, 0, ICVLen)
	}
	bodyLen := len(b) - start - ethHeaderLen - eapolHeaderLen + ICVLen
	if bodyLen > 0xffff {
		return b[:start], errors.New("mka: mkpdu too long")
	}
	b[start+16], b[start+17] = byte(bodyLen>>8), byte(bodyLen)
	k.c.sum(&k.out, b[start:])
	return append(b, k.out[:]...), nil
}

func appendParamHeader(b []byte, o0, o1, flags byte, n int) []byte {
	return append(b, o0, o1, flags&0xf0|byte(n>>8)&0x0f, byte(n))
}

func pad(b []byte, n int) []byte {
	for ; n%4 != 0; n++ {
		b = append(b, 0)
	}
	return b
}

// check reports field values the wire format cannot carry.
func (m *MKPDU) check() error {
	bp := &m.Basic
	switch {
	case bp.Version == 0:
		return errors.New("mka: mka version 0")
	case len(bp.CKN) < MinCKNLen || len(bp.CKN) > MaxCKNLen:
		return fmt.Errorf("mka: ckn of %d octets", len(bp.CKN))
	case bp.Capability > CapabilityConfidentialityOffsets:
		return fmt.Errorf("mka: macsec capability %d", bp.Capability)
	case len(m.Live)%peerEntryLen != 0 || len(m.Potential)%peerEntryLen != 0 ||
		len(m.Live) > maxBodyLen || len(m.Potential) > maxBodyLen:
		return errors.New("mka: peer list length")
	case len(m.Announcement) > maxBodyLen:
		return errors.New("mka: announcement too long")
	}
	u := &m.SAKUse
	if m.HasSAKUse && (u.LatestAN > 3 || u.OldAN > 3) {
		return errors.New("mka: sak use an out of range")
	}
	d := &m.DistSAK
	if m.HasDistSAK {
		if d.AN > 3 || d.Offset > Offset50 {
			return errors.New("mka: distributed sak an or offset out of range")
		}
		if !d.Empty {
			n := len(d.WrappedKey)
			k := d.CipherSuite.KeyLen()
			if (k != 0 && n != k+8) || (k == 0 && n != 24 && n != 40) || (d.CipherSuite == macsec.GCMAES128 && n != 24) {
				return fmt.Errorf("mka: wrapped key of %d octets for %v", len(d.WrappedKey), d.CipherSuite)
			}
		}
	}
	return nil
}
