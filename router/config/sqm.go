package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gvrouter/gvrouter/qdisc"
)

// SQM is a wan interface's sqm: mapping: shaping with FQ-CoDel and per-host
// fairness (package qdisc), e.g.
//
//	sqm: {upload: 20mbit, download: 100mbit, overhead: 44, diffserv: besteffort, ecn: on}
//
// Upload is shaped on the way out of the wan interface, download on the way
// to the LAN (as cake's ingress mode: packets CoDel drops count as received).
type SQM struct {
	// Upload is the rate in bit/s towards the ISP, e.g. 20_000_000
	// ("20mbit"); 0 = not shaped (upload: not written).
	Upload uint64
	// Download is the rate in bit/s from the ISP, e.g. 100_000_000
	// ("100mbit"); 0 = not shaped (download: not written).
	Download uint64
	// Overhead is the per-packet link-layer overhead in bytes counted from
	// the IP header, -64..256, e.g. 44 (qdisc.ShaperConfig lists the
	// values of Ethernet, PPPoE, VDSL2 PTM and DOCSIS); 0 = none.
	Overhead int
	// Diffserv is "besteffort" (one tin, the default: ISPs' DSCP marks on
	// download are often arbitrary) or "diffserv3" (bulk, best effort,
	// voice tins, as cake's diffserv3).
	Diffserv string
	// ECN marks ECN-capable packets instead of dropping them (ecn: on|off;
	// default on).
	ECN bool
	Pos Pos // where sqm: is written

	src src
}

// SQM diffserv modes accepted in "sqm: diffserv:".
const (
	SQMBesteffort = "besteffort"
	SQMDiffserv3  = "diffserv3"
)

// MaxSQMRate is the largest rate sqm: takes, 100 Gbit/s: far above what a
// software shaper reaches, low enough that the shaper's arithmetic cannot
// overflow.
const MaxSQMRate = 100_000_000_000

var (
	sqmKeys      = []string{"upload", "download", "overhead", "diffserv", "ecn"}
	sqmDiffservs = []string{SQMBesteffort, SQMDiffserv3}
	rateUnits    = []string{"bit", "kbit", "mbit", "gbit"}
)

// DiffservMode returns the qdisc mode of s.Diffserv.
func (s *SQM) DiffservMode() qdisc.Diffserv {
	if s.Diffserv == SQMDiffserv3 {
		return qdisc.Diffserv3
	}
	return qdisc.Besteffort
}

// equal reports whether s and t configure the same shaping; positions
// are ignored.
func (s *SQM) equal(t *SQM) bool {
	if s == nil || t == nil {
		return s == t
	}
	return s.Upload == t.Upload && s.Download == t.Download && s.Overhead == t.Overhead &&
		s.Diffserv == t.Diffserv && s.ECN == t.ECN
}

// sqm decodes an interface's sqm: mapping; the role is checked by validateSQM.
func (d *decoder) sqm(ifc *Interface, e entry, what string) {
	what += ": sqm"
	ifc.src.set("sqm", posOf(e.key))
	s := &SQM{Pos: posOf(e.key), Diffserv: SQMBesteffort, ECN: true}
	s.src.set("", posOf(e.key))
	ifc.SQM = s
	if isNull(e.val) {
		return // validateSQM asks for the rates
	}
	if !d.object(e.val, what) {
		s.src.markBad("")
		return
	}
	m := d.mapping(e.val, what, sqmKeys, nil)
	rate := func(key string, dst *uint64) {
		e, ok := m[key]
		if !ok {
			return
		}
		s.src.set(key, posOf(e.val))
		v, err := parseRate(e.val)
		if err != nil {
			d.errorf(e.val, "%s: %s: %v", what, key, err)
			s.src.markBad(key)
			return
		}
		*dst = v
	}
	rate("upload", &s.Upload)
	rate("download", &s.Download)
	d.intKey(m, "overhead", what, &s.src, &s.Overhead)
	d.strKey(m, "diffserv", what, &s.src, &s.Diffserv)
	if e, ok := m["ecn"]; ok {
		s.src.set("ecn", posOf(e.val))
		if w, ok := d.onOffWord(e, what); ok {
			s.ECN = w == "on"
		} else {
			s.src.markBad("ecn")
		}
	}
}

// parseRate reads a rate with its unit as tc(8) writes it, in bit/s:
// "20mbit", "1.5gbit", "500kbit", "64000bit". tc's "mbps" means megabytes,
// so it is refused with the bit equivalent rather than guessed.
func parseRate(n *yaml.Node) (uint64, error) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		return 0, fmt.Errorf("want a rate like 20mbit, got %s", kindName(n))
	}
	v := strings.ToLower(strings.TrimSpace(n.Value))
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		return 0, fmt.Errorf("unit missing in %s: write %smbit (units: %s)", echo(n.Value), echo(v), strings.Join(rateUnits, ", "))
	}
	num, unit := v[:i], strings.TrimSpace(v[i:])
	if num == "" {
		return 0, fmt.Errorf("want a rate like 20mbit, got %s", echo(n.Value))
	}
	x, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("bad number in %s", echo(n.Value))
	}
	var mult float64
	switch unit {
	case "bit":
		mult = 1
	case "kbit":
		mult = 1e3
	case "mbit":
		mult = 1e6
	case "gbit":
		mult = 1e9
	case "kbps", "mbps", "gbps", "bps":
		return 0, fmt.Errorf("unit %q means bytes per second in tc; write bits, e.g. %s%sit", unit, strconv.FormatFloat(x*8, 'g', -1, 64), strings.TrimSuffix(unit, "ps"))
	default:
		return 0, fmt.Errorf("unknown unit %s in %s%s", quote(unit), echo(n.Value), hint(unit, rateUnits))
	}
	r := math.Round(x * mult)
	switch {
	case r == 0:
		return 0, fmt.Errorf("rate 0: write a rate above 0, or leave the key out to not shape this direction")
	case r < 8000 || r > MaxSQMRate:
		return 0, fmt.Errorf("rate %s out of range 8kbit..100gbit", echo(n.Value))
	}
	return uint64(r), nil
}

// validateSQM checks the sqm: mappings.
func (c *Config) validateSQM(l *errorList) {
	for i := range c.Interfaces {
		ifc := &c.Interfaces[i]
		s := ifc.SQM
		if s == nil {
			continue
		}
		what := interfaceWhat(ifc.Name) + ": sqm"
		if notYetRunning["sqm"] {
			l.add(s.Pos, "%s: shaping is %s yet", what, errNotSupportedSuffix)
		}
		if ifc.Role != RoleWAN && ifc.Role != "" {
			l.add(s.Pos, "%s: sqm is for wan interfaces (this one is %s): it shapes the uplink both ways", what, quote(ifc.Role))
		}
		if s.src.bad[""] {
			continue
		}
		if s.Upload == 0 && s.Download == 0 && !s.src.bad["upload"] && !s.src.bad["download"] {
			l.add(s.Pos, "%s: give upload, download or both (e.g. {upload: 20mbit, download: 100mbit})", what)
		}
		if !s.src.bad["overhead"] && (s.Overhead < qdisc.MinOverhead || s.Overhead > qdisc.MaxOverhead) {
			l.add(s.src.at("overhead", s.Pos), "%s: overhead %d out of range %d..%d (bytes per packet, e.g. 44)", what, s.Overhead, qdisc.MinOverhead, qdisc.MaxOverhead)
		}
		if !s.src.bad["diffserv"] && !contains(sqmDiffservs, s.Diffserv) {
			l.add(s.src.at("diffserv", s.Pos), "%s: unknown diffserv %s%s", what, quote(s.Diffserv), hint(s.Diffserv, sqmDiffservs))
		}
	}
}
