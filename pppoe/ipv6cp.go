package pppoe

// IPv6CP option types (RFC 5072 §4).
const ipv6cpOptInterfaceID = 1

// ipv6cp is the IPv6CP option logic: each side's 64-bit interface
// identifier, non-zero and different from the other's (RFC 5072 §4.1).
type ipv6cp struct {
	rand    func() uint64
	iid     [8]byte
	wantIID bool
	peer    [8]byte
}

func (p *ipv6cp) newIID(not [8]byte) [8]byte {
	for {
		v := p.rand()
		var id [8]byte
		for i := range id {
			id[i] = byte(v >> (56 - 8*i))
		}
		if id != [8]byte{} && id != not && id != p.iid {
			return id
		}
	}
}

func (p *ipv6cp) reset() {
	p.peer = [8]byte{}
	p.iid = p.newIID([8]byte{})
	p.wantIID = true
}

func (p *ipv6cp) request(b []byte) []byte {
	if p.wantIID {
		b = AppendOption(b, ipv6cpOptInterfaceID, p.iid[:])
	}
	return b
}

// check Acks a non-zero identifier different from ours; a zero or equal
// one is Nak'd with a fresh suggestion (RFC 5072 §4.1); other options
// (compression) are rejected.
func (p *ipv6cp) check(opts []Option, out []byte, failures int) (verdict, []byte) {
	rej := out
	for _, o := range opts {
		if o.Type != ipv6cpOptInterfaceID || len(o.Data) != 8 {
			rej = AppendOption(rej, o.Type, o.Data)
		}
	}
	if len(rej) > len(out) {
		return verdictRej, rej
	}
	var naked uint32
	nak := out
	for i, o := range opts {
		if id := [8]byte(o.Data); id == [8]byte{} || id == p.iid {
			if id == p.iid {
				p.iid = p.newIID(id) // both sides pick anew on a clash
			}
			s := p.newIID(id)
			nak = AppendOption(nak, o.Type, s[:])
			naked |= 1 << i
		}
	}
	if naked != 0 {
		return nakOrReject(opts, naked, nak, out, failures)
	}
	p.peer = [8]byte{}
	for _, o := range opts {
		p.peer = [8]byte(o.Data)
	}
	return verdictAck, out
}

func (p *ipv6cp) acked(opts []Option) {}

func (p *ipv6cp) naked(opts []Option) {
	for _, o := range opts {
		if o.Type == ipv6cpOptInterfaceID && len(o.Data) == 8 {
			if id := [8]byte(o.Data); id != [8]byte{} && id != p.peer {
				p.iid, p.wantIID = id, true
			}
		}
	}
}

func (p *ipv6cp) rejected(opts []Option) {
	for _, o := range opts {
		if o.Type == ipv6cpOptInterfaceID {
			p.wantIID = false
		}
	}
}
