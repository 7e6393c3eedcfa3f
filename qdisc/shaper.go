package qdisc

import (
	"errors"
	"fmt"
)

// Framing is the link-layer framing of ShaperConfig.Framing.
type Framing uint8

const (
	// FramingNone means the wire carries len+Overhead bytes.
	FramingNone Framing = iota
	// FramingATM is ADSL's AAL5 (ITU-T I.363.5), which puts the frame in
	// 48-byte cell payloads, each sent as a 53-byte cell:
	// bytes = ceil(n/48)*53.
	FramingATM
	// FramingPTM is the 64/65-octet encapsulation of VDSL2's PTM mode
	// (IEEE 802.3 clause 61, ITU-T G.993.2): bytes = ceil(n*65/64).
	FramingPTM
)

// Overhead bounds (cake's overhead range).
const (
	MinOverhead = -64
	MaxOverhead = 256
	// maxLag is the most a backlogged shaper may fall behind its clock and
	// catch up in a burst, so a caller that polls late (a timer that fired
	// late, a full TX ring) keeps the average rate without a line-rate
	// burst longer than 1 ms.
	maxLag = 1_000_000 // ns
)

// ShaperConfig configures a Shaper. Overhead counts from the start of the IP
// header, as tc-cake(8) does, so its keyword values apply unchanged:
//
//	ethernet (plain Ethernet, fibre): overhead 38, MPU 84 (preamble 8 + header 14 + FCS 4 + gap 12)
//	docsis (cable): overhead 18, MPU 64 (header 14 + FCS 4; the DOCSIS MAC header is not counted, like cake's docsis keyword)
//	PPPoE: add 8 (PPPoE 6 + PPP 2, RFC 2516) to the framing below it
//	pppoe-ptm (VDSL2 PPPoE): overhead 30 with FramingPTM
//	bridged-ptm (VDSL2 IPoE): overhead 22 with FramingPTM
//	pppoe-vcmux (ADSL): overhead 32 with FramingATM; pppoe-llcsnap: 40 with FramingATM
//	VLAN tag on the access link: add 4 each
//
// The example overhead 44 is a conservative catch-all (VDSL2 PPPoE
// with a VLAN and margin).
type ShaperConfig struct {
	// Rate is the link rate in bit/s, e.g. 20_000_000.
	Rate uint64
	// Overhead is added to each packet's IP length, e.g. 44; -64..256.
	Overhead int
	// MPU is the minimum wire size of a packet in bytes after overhead, e.g. 84 (0: none).
	MPU int
	// Framing is FramingNone, FramingATM (ADSL) or FramingPTM (VDSL2).
	Framing Framing
	// Ingress charges packets CoDel dropped as if they were sent: on the
	// download side they already crossed the bottleneck (cake's ingress
	// keyword), so the shaper leaves their share of the link unused and
	// senders see the drops sooner. Overlimit drops (a full pool) are not
	// charged: they absorb arrivals above the rate, which charging would
	// turn into a shaper that sends nothing. Charged drops count their IP
	// length plus Overhead, without MPU or framing.
	Ingress bool
}

// Validate reports every configuration problem at once.
func (c *ShaperConfig) Validate() error {
	var errs []error
	if c.Rate == 0 {
		errs = append(errs, errors.New("qdisc: shaper rate 0"))
	}
	if c.Overhead < MinOverhead || c.Overhead > MaxOverhead {
		errs = append(errs, fmt.Errorf("qdisc: overhead %d out of range %d..%d", c.Overhead, MinOverhead, MaxOverhead))
	}
	if c.MPU < 0 || c.MPU > 1500 {
		errs = append(errs, fmt.Errorf("qdisc: mpu %d out of range 0..1500", c.MPU))
	}
	if c.Framing > FramingPTM {
		errs = append(errs, fmt.Errorf("qdisc: unknown framing %d", c.Framing))
	}
	return errors.Join(errs...)
}

// WireBytes returns the bytes a packet of ipLen IP bytes occupies on the link.
func (c *ShaperConfig) WireBytes(ipLen int) int {
	n := ipLen + c.Overhead
	if n < c.MPU {
		n = c.MPU
	}
	if n < 1 {
		n = 1
	}
	switch c.Framing {
	case FramingATM:
		n = (n + 47) / 48 * 53
	case FramingPTM:
		n = (n*65 + 63) / 64
	}
	return n
}

// Shaper paces an FQCoDel's output to a byte rate with a virtual clock, as
// cake's deficit-mode shaper does: each packet moves the time the next may
// leave by wire bytes * 8 / rate, so there is no token-bucket burst.
//
// A Shaper is owned by the goroutine that owns its FQCoDel; it is not safe for
// concurrent use.
type Shaper struct {
	cfg ShaperConfig
	q   *FQCoDel
	// next is when the next packet may leave (monotonic ns).
	next int64
	// rem carries the sub-nanosecond remainder of the cost division so the
	// average rate is exact: units of 1/Rate ns.
	rem uint64
	// idle: the queue ran empty, so the clock restarts at the next arrival.
	idle bool
}

// Idle is the next value of Dequeue when nothing is queued.
const Idle = int64(-1)

// NewShaper returns a shaper that paces q.
func NewShaper(cfg ShaperConfig, q *FQCoDel) (*Shaper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Shaper{cfg: cfg, q: q, idle: true}, nil
}

// charge moves the clock by the cost of n wire bytes.
func (s *Shaper) charge(n int) {
	bits := uint64(n)*8*1_000_000_000 + s.rem
	s.next += int64(bits / s.cfg.Rate)
	s.rem = bits % s.cfg.Rate
}

// Dequeue fills out with the frames that may leave at now and returns how
// many and when the next may go (monotonic ns), or Idle when nothing is
// queued. The frames point into the FQCoDel's pool and stay valid until its
// next Enqueue or Dequeue call. Call again at next (or on Enqueue when Idle).
func (s *Shaper) Dequeue(now int64, out [][]byte) (n int, next int64) {
	q := s.q
	q.reclaim()
	if s.idle || s.next < now-maxLag {
		s.next = max(s.next, now-maxLag)
		if s.idle {
			s.next = max(s.next, now)
		}
	}
	for n < len(out) && s.next <= now {
		if s.cfg.Ingress && q.dropPkts != 0 {
			// Dropped packets used the link before they reached us.
			s.charge(int(q.dropBytes) + int(q.dropPkts)*s.cfg.Overhead)
			q.dropBytes, q.dropPkts = 0, 0
			if s.next > now {
				break
			}
		}
		slot := q.dequeueOne(now)
		if slot == none {
			break
		}
		q.lent = append(q.lent, slot)
		out[n] = q.frame(slot)
		n++
		s.charge(s.cfg.WireBytes(q.ipLen(slot)))
	}
	if !s.cfg.Ingress {
		q.dropBytes, q.dropPkts = 0, 0
	}
	q.publish()
	s.idle = q.Backlog() == 0
	if s.idle {
		return n, Idle
	}
	return n, s.next
}
