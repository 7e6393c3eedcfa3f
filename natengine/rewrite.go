package natengine

import "encoding/binary"

// rewrite changes the source (doSrc) and/or destination (doDst) address and
// port of the packet b described by p to those of to, patching the IPv4
// header checksum and the L4 checksum incrementally (RFC 1624). b may be a
// truncated packet embedded in an ICMP error: checksum fields beyond its end
// are skipped. For ICMP queries the identifier is the port.
func rewrite(b []byte, p *Parsed, to *Tuple, doSrc, doDst bool) {
	al := addrLen(p.V6)
	var ad, pd delta // address (pseudo-header) and port changes
	if doSrc {
		o := p.srcOff()
		ad = deltaBytes(ad, b[o:o+al], to.Src[:al])
		copy(b[o:o+al], to.Src[:al])
	}
	if doDst {
		o := p.dstOff()
		ad = deltaBytes(ad, b[o:o+al], to.Dst[:al])
		copy(b[o:o+al], to.Dst[:al])
	}
	if !p.V6 {
		put16(b[ipv4ChecksumAt:], applyDelta(be16(b[ipv4ChecksumAt:]), ad))
	}
	if p.Kind == KindFragment {
		return
	}
	l4 := b[p.L4Off:]
	switch p.Kind {
	case KindTCP, KindUDP:
		if doSrc && len(l4) >= 2 {
			pd = deltaWord(pd, be16(l4), to.SrcPort)
			put16(l4, to.SrcPort)
		}
		if doDst && len(l4) >= 4 {
			pd = deltaWord(pd, be16(l4[2:]), to.DstPort)
			put16(l4[2:], to.DstPort)
		}
		d := delta(SumCombine(uint16(ad), uint16(pd)))
		if p.Kind == KindTCP {
			if len(l4) >= tcpChecksumAt+2 {
				put16(l4[tcpChecksumAt:], applyDelta(be16(l4[tcpChecksumAt:]), d))
			}
		} else if len(l4) >= udpChecksumAt+2 {
			setUDPChecksum(l4, p.V6, d)
		}
	case KindICMPQuery:
		if len(l4) < 6 {
			return
		}
		id := to.SrcPort
		if !doSrc {
			id = to.DstPort
		}
		if doSrc || doDst {
			pd = deltaWord(pd, be16(l4[4:]), id)
			put16(l4[4:], id)
		}
		d := pd
		if p.V6 {
			d = delta(SumCombine(uint16(ad), uint16(pd))) // ICMPv6 covers the pseudo-header
		}
		put16(l4[icmpChecksumAt:], applyDelta(be16(l4[icmpChecksumAt:]), d))
	}
}

// setUDPChecksum applies d to the UDP header l4's checksum. An IPv4 checksum
// of 0 means "none" and stays 0; a computed 0 is sent as 0xFFFF (RFC 768).
func setUDPChecksum(l4 []byte, v6 bool, d delta) {
	c := be16(l4[udpChecksumAt:])
	if c == 0 && !v6 {
		return
	}
	c = applyDelta(c, d)
	if c == 0 {
		c = 0xffff
	}
	put16(l4[udpChecksumAt:], c)
}

// clampMSS lowers the MSS option of the TCP SYN in b to max, patching the
// checksum. It reports whether it changed the packet.
func clampMSS(b []byte, p *Parsed, max int) bool {
	if p.Kind != KindTCP || p.TCPFlags&tcpSYN == 0 || max <= 0 {
		return false
	}
	return ClampMSS(b[p.L4Off:], max)
}

// ClampMSS lowers the MSS option (RFC 9293 3.2) of the TCP segment tcp
// to max if it is larger, patching the checksum incrementally, and
// reports whether it did. It only reads the options the data offset
// covers and within tcp; the caller checks that tcp is a SYN. A PPPoE
// interface calls it on the SYNs it receives (stack/pppoe.go).
func ClampMSS(tcp []byte, max int) bool {
	if len(tcp) < 20 || max <= 0 {
		return false
	}
	l4 := tcp
	doff := int(l4[12]>>4) * 4
	if doff > len(l4) || doff < 20 {
		return false
	}
	opts := l4[20:doff]
	for i := 0; i < len(opts); {
		switch opts[i] {
		case 0: // end of options
			return false
		case 1: // no-op
			i++
			continue
		}
		if i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts) {
			return false
		}
		if opts[i] == 2 && opts[i+1] == 4 { // MSS (RFC 9293 3.2)
			old := be16(opts[i+2:])
			if int(old) <= max {
				return false
			}
			// The option may sit at an odd offset; update the checksum
			// over the aligned words it touches.
			// An odd offset touches two words; o+2 < doff then, because
			// doff is a multiple of 4.
			o := 20 + i + 2
			start, n := o, 2
			if o&1 == 1 {
				start, n = o-1, 4
			}
			var before [4]byte
			copy(before[:n], l4[start:start+n])
			put16(l4[o:], uint16(max))
			c := UpdateChecksum(be16(l4[tcpChecksumAt:]), before[:n], l4[start:start+n])
			put16(l4[tcpChecksumAt:], c)
			return true
		}
		i += int(opts[i+1])
	}
	return false
}

func be16(b []byte) uint16     { return binary.BigEndian.Uint16(b) }
func put16(b []byte, v uint16) { binary.BigEndian.PutUint16(b, v) }
