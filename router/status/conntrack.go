package status

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Conntrack is the connection tracking, NAT and fast-path section of a
// Snapshot: a census of the table, the fast path's hits and hand-backs,
// the engine's drops and the NAT port usage. The table itself is not in
// the Snapshot (it can hold 65,536 flows); a [FlowSource] serves it on
// request, paged.
type Conntrack struct {
	// Max is the table limit, e.g. 65536.
	Max int `json:"max"`
	// Flows is the number of tracked flows.
	Flows int `json:"flows"`
	// RouterFlows is how many of Flows the router itself opened (its DNS
	// forwarder's upstream queries, DHCP); RouterReserve slots of Max are
	// theirs alone, e.g. 4096 (nat.conntrack.router_reserve).
	RouterFlows   int `json:"router_flows"`
	RouterReserve int `json:"router_reserve"`
	// Assured counts flows that saw traffic both ways (not early-droppable).
	Assured int `json:"assured"`
	// Offloaded counts flows with at least one direction on the fast path.
	Offloaded int `json:"offloaded"`
	// States counts flows by protocol and state, e.g. {tcp ESTABLISHED 12},
	// {udp UNREPLIED 3}; sorted by protocol, then state.
	States []FlowCount `json:"states"`
	// FastPathHits counts packets the fast path forwarded.
	FastPathHits uint64 `json:"fastpath_hits"`
	// SlowPath counts packets the fast path handed to the slow path, by
	// reason, e.g. {"miss": 40, "fin_rst": 2}.
	SlowPath map[string]uint64 `json:"slowpath"`
	// Drops counts packets the engine dropped, by reason, e.g.
	// {"unsolicited": 7}.
	Drops map[string]uint64 `json:"drops"`
	// Events counts table events: created, early_dropped, expired,
	// offloaded, icmp_translated, frags_held, mss_clamped, untracked.
	Events map[string]uint64 `json:"events"`
	// NATPorts is the NAT port usage per external address and protocol.
	NATPorts []NATPorts `json:"nat_ports"`
	// Firewall counts the zone firewall's decisions: "rule NAME hits"
	// (and "logged", "limited") per rule, "zone NAME input" (and
	// "forward", "output") per zone policy, "unzoned".
	Firewall map[string]uint64 `json:"firewall,omitempty"`

	// FastPathRatio is FastPathHits over all packets the fast path saw
	// (hits plus hand-backs) since start, 0..1 (set by the Server).
	FastPathRatio float64 `json:"fastpath_ratio"`
	// Rates are the current rates (set by the Server).
	Rates ConntrackRates `json:"rates"`
}

// FlowCount is the number of flows of one protocol in one state.
type FlowCount struct {
	Proto string `json:"proto"` // "tcp", "udp", "icmp", "other"
	State string `json:"state"` // TCP: conntrack -L names (ESTABLISHED ...); UDP: UNREPLIED or REPLIED; else ACTIVE
	Flows int    `json:"flows"`
}

// NATPorts is the NAT port usage of one external address.
type NATPorts struct {
	Proto   string `json:"proto"`   // "tcp", "udp" or "icmp" (query identifiers)
	Address string `json:"address"` // external address, e.g. "203.0.113.2"
	Ports   int    `json:"ports"`   // mappings (external ports) in use
	Flows   int    `json:"flows"`   // flows using them
}

// ConntrackRates are rates over the last sample interval.
type ConntrackRates struct {
	FastPathPacketsPerSecond float64 `json:"fastpath_packets_per_second"`
	SlowPathPacketsPerSecond float64 `json:"slowpath_packets_per_second"`
	NewFlowsPerSecond        float64 `json:"new_flows_per_second"`
}

// SlowTotal returns the sum of SlowPath.
func (c *Conntrack) SlowTotal() uint64 { return sum(c.SlowPath) }

// DropsTotal returns the sum of Drops.
func (c *Conntrack) DropsTotal() uint64 { return sum(c.Drops) }

// Flow is one tracked flow, like a line of conntrack -L.
type Flow struct {
	Proto string `json:"proto"` // "tcp", "udp", "icmp", "icmpv6" or a number
	// State is the TCP state (ESTABLISHED ...), else UNREPLIED or REPLIED.
	State string `json:"state"`
	// Src and Dst are the original direction as it arrived, e.g.
	// 192.168.1.10:40000 → 198.51.100.7:443 (ICMP: the query identifier as port).
	Src netip.AddrPort `json:"src"`
	Dst netip.AddrPort `json:"dst"`
	// ReplySrc and ReplyDst are the expected reply after NAT, e.g.
	// 198.51.100.7:443 → 203.0.113.2:40000; zero (JSON "") until the
	// flow is confirmed.
	ReplySrc netip.AddrPort `json:"reply_src"`
	ReplyDst netip.AddrPort `json:"reply_dst"`
	// Assured is conntrack's [ASSURED]; Offloaded its [OFFLOAD].
	Assured   bool `json:"assured"`
	Offloaded bool `json:"offloaded"`
	// Packets and bytes in the original and reply direction.
	PacketsOrig  uint64 `json:"packets_orig"`
	PacketsReply uint64 `json:"packets_reply"`
	BytesOrig    uint64 `json:"bytes_orig"`
	BytesReply   uint64 `json:"bytes_reply"`
	// ExpiresSeconds is the idle time left, e.g. 7439.5.
	ExpiresSeconds float64 `json:"expires_seconds"`
}

// FlowSource is implemented by a Source that tracks connections. The
// Server serves /api/conntrack and the page's table only for such a
// Source. Flows returns every flow; the Server filters, sorts and pages
// them, and never keeps or modifies the slice.
type FlowSource interface {
	Flows() []Flow
}

// FlowsPerPage is the conntrack table's page size.
const FlowsPerPage = 100

// ConntrackPage is one page of the conntrack table.
type ConntrackPage struct {
	// Addr is the filter as given, e.g. "192.168.1.10" or "192.168.1.0/24";
	// "" shows every flow.
	Addr string `json:"addr"`
	// Page is the page shown, from 1; Pages the number of pages (at least 1).
	Page  int `json:"page"`
	Pages int `json:"pages"`
	// PerPage is FlowsPerPage.
	PerPage int `json:"per_page"`
	// Total is the number of flows that match Addr.
	Total int `json:"total"`
	// Flows are this page's flows, sorted by protocol, source, destination.
	Flows []Flow `json:"flows"`
}

// TableQuery is a parsed ?addr=&page= query.
type TableQuery struct {
	Addr   string
	prefix netip.Prefix // zero: no filter
	Page   int          // from 1
}

// ParseTableQuery parses the addr (an address or a prefix) and page (from
// 1) query values; empty values mean no filter and page 1.
func ParseTableQuery(addr, page string) (TableQuery, error) {
	q := TableQuery{Addr: strings.TrimSpace(addr), Page: 1}
	if q.Addr != "" {
		if p, err := netip.ParsePrefix(q.Addr); err == nil {
			q.prefix = p.Masked()
		} else if a, err := netip.ParseAddr(q.Addr); err == nil {
			a = a.WithZone("").Unmap()
			q.prefix = netip.PrefixFrom(a, a.BitLen())
		} else {
			return TableQuery{}, fmt.Errorf("bad addr %q: want an address like 192.168.1.10 or a prefix like 192.168.1.0/24", addr)
		}
	}
	if page != "" {
		n, err := strconv.Atoi(page)
		if err != nil || n < 1 {
			return TableQuery{}, fmt.Errorf("bad page %q: want 1 or more", page)
		}
		q.Page = n
	}
	return q, nil
}

// matches reports whether any address of f is in the query's prefix.
func (q *TableQuery) matches(f *Flow) bool {
	if !q.prefix.IsValid() {
		return true
	}
	for _, ap := range [...]netip.AddrPort{f.Src, f.Dst, f.ReplySrc, f.ReplyDst} {
		if ap.IsValid() && q.prefix.Contains(ap.Addr().Unmap()) {
			return true
		}
	}
	return false
}

// BuildPage filters, sorts and pages flows; it does not modify flows. A
// page past the end is empty (Page keeps the value asked for, so a client
// sees where it is). The order is by protocol, source, destination: a
// flow's original tuple is unique, so the order is total.
func BuildPage(flows []Flow, q TableQuery) ConntrackPage {
	// Sort pointers, not the 150-byte flows: a full table is 65,536.
	match := make([]*Flow, 0, len(flows))
	for i := range flows {
		if q.matches(&flows[i]) {
			match = append(match, &flows[i])
		}
	}
	slices.SortFunc(match, func(a, b *Flow) int {
		if c := strings.Compare(a.Proto, b.Proto); c != 0 {
			return c
		}
		if c := a.Src.Compare(b.Src); c != 0 {
			return c
		}
		return a.Dst.Compare(b.Dst)
	})
	p := ConntrackPage{Addr: q.Addr, Page: max(q.Page, 1), PerPage: FlowsPerPage, Total: len(match), Flows: []Flow{}}
	p.Pages = max(1, (len(match)+FlowsPerPage-1)/FlowsPerPage)
	if lo := (p.Page - 1) * FlowsPerPage; lo < len(match) {
		for _, f := range match[lo:min(lo+FlowsPerPage, len(match))] {
			p.Flows = append(p.Flows, *f)
		}
	}
	return p
}

// errNoConntrack is returned when the Source tracks no connections.
var errNoConntrack = errors.New("this router tracks no connections")

// table returns the page q asks for from the Server's FlowSource.
func (s *Server) table(q TableQuery) (*ConntrackPage, error) {
	fs, ok := s.src.(FlowSource)
	if !ok {
		return nil, errNoConntrack
	}
	p := BuildPage(fs.Flows(), q)
	return &p, nil
}

// normalizeConntrack makes a sampled Conntrack safe to keep and encode:
// its own slices and maps, never nil, so JSON has [] and {} not null.
func normalizeConntrack(c *Conntrack) *Conntrack {
	if c == nil {
		return nil
	}
	n := *c
	n.States = append(make([]FlowCount, 0, len(c.States)), c.States...)
	slices.SortFunc(n.States, func(a, b FlowCount) int {
		return cmp.Or(strings.Compare(a.Proto, b.Proto), strings.Compare(a.State, b.State))
	})
	n.NATPorts = append(make([]NATPorts, 0, len(c.NATPorts)), c.NATPorts...)
	slices.SortFunc(n.NATPorts, func(a, b NATPorts) int {
		return cmp.Or(strings.Compare(a.Address, b.Address), strings.Compare(a.Proto, b.Proto))
	})
	for _, m := range []*map[string]uint64{&n.SlowPath, &n.Drops, &n.Events} {
		if *m == nil {
			*m = map[string]uint64{}
		} else {
			*m = maps.Clone(*m)
		}
	}
	n.FastPathRatio = 0
	if seen := n.FastPathHits + n.SlowTotal(); seen > 0 {
		n.FastPathRatio = float64(n.FastPathHits) / float64(seen)
	}
	n.Rates = ConntrackRates{}
	return &n
}

// fillConntrackRates sets cur.Rates from prev, taken dt earlier.
func fillConntrackRates(prev, cur *Conntrack, dt time.Duration) {
	if prev == nil || cur == nil || dt <= 0 {
		return
	}
	sec := dt.Seconds()
	cur.Rates = ConntrackRates{
		FastPathPacketsPerSecond: float64(delta(prev.FastPathHits, cur.FastPathHits)) / sec,
		SlowPathPacketsPerSecond: float64(delta(prev.SlowTotal(), cur.SlowTotal())) / sec,
		NewFlowsPerSecond:        float64(delta(prev.Events["created"], cur.Events["created"])) / sec,
	}
}
