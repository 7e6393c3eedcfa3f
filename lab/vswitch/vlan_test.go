package vswitch

import (
	"testing"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/hw/hwtest"
	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// labConfig is the BCM47094 lab switch plus a second WAN-side port, so
// that known unicast and flooding can be told apart in VLAN 2.
var labConfig = Config{Ports: []PortConfig{
	{Name: "lan", PVID: 1},
	{Name: "wan", PVID: 2},
	{Name: "cpu", Tagged: []uint16{1, 2}},
	{Name: "wan2", PVID: 2},
}}

const (
	portLAN = iota
	portWAN
	portCPU
	portWAN2
)

var (
	macLAN   = []byte{0x02, 0, 0, 0, 0, 0x01}
	macWAN   = []byte{0x02, 0, 0, 0, 0, 0x02}
	macCPU   = []byte{0x02, 0, 0, 0, 0, 0x03}
	macWAN2  = []byte{0x02, 0, 0, 0, 0, 0x04}
	macBcast = netnstest.Broadcast
)

func TestClassify(t *testing.T) {
	tb := newTable(&labConfig)
	plain := netnstest.Frame(macBcast, macLAN, "x")
	vlanIndex := func(vid uint16) int { return int(tb.index[vid]) - 1 }
	for _, tt := range []struct {
		name   string
		port   int
		f      hw.Frame
		want   ingress
		reason dropReason
	}{
		{"untagged on access port", portLAN, hwtest.Batch(plain)[0],
			ingress{vid: 1, vlan: vlanIndex(1), restOff: 12}, dropNone},
		{"priority-tagged gets PVID and keeps PCP", portLAN, hwtest.Tagged(plain, 0x8100, 0xa000),
			ingress{vid: 1, vlan: vlanIndex(1), prio: 0xa000, restOff: 12}, dropNone},
		{"tagged with the PVID is a member", portLAN, hwtest.Tagged(plain, 0x8100, 0x2001),
			ingress{vid: 1, vlan: vlanIndex(1), prio: 0x2000, restOff: 12}, dropNone},
		{"DEI kept", portCPU, hwtest.Tagged(plain, 0x8100, 0x1002),
			ingress{vid: 2, vlan: vlanIndex(2), prio: 0x1000, restOff: 12}, dropNone},
		{"tagged member VID on trunk", portCPU, hwtest.Tagged(plain, 0x8100, 0xe002),
			ingress{vid: 2, vlan: vlanIndex(2), prio: 0xe000, restOff: 12}, dropNone},
		{"tagged VID of another port", portLAN, hwtest.Tagged(plain, 0x8100, 2),
			ingress{vid: 2, vlan: vlanIndex(2), restOff: 12}, dropVLANNotMember},
		{"tagged VID nobody has", portCPU, hwtest.Tagged(plain, 0x8100, 99),
			ingress{vid: 99, vlan: -1, restOff: 12}, dropVLANNotMember},
		{"untagged on trunk without PVID", portCPU, hwtest.Batch(plain)[0],
			ingress{vlan: -1, restOff: 12}, dropUntaggedNoPVID},
		{"priority-tagged on trunk without PVID", portCPU, hwtest.Tagged(plain, 0x8100, 0x6000),
			ingress{vlan: -1, prio: 0x6000, restOff: 12}, dropUntaggedNoPVID},
		{"reserved VID 0xFFF", portCPU, hwtest.Tagged(plain, 0x8100, 0xffff),
			ingress{vlan: -1, prio: 0xf000, restOff: 12}, dropTagMalformed},
		{"S-tag is payload to a C-VLAN component", portLAN, hwtest.Tagged(plain, 0x88a8, 100),
			ingress{vid: 1, vlan: vlanIndex(1), restOff: 12, outer: 0x88a80064, hasOuter: true}, dropNone},
		{"S-tag on trunk without PVID", portCPU, hwtest.Tagged(plain, 0x88a8, 100),
			ingress{vlan: -1, restOff: 12, outer: 0x88a80064, hasOuter: true}, dropUntaggedNoPVID},
		{"in-band C-tag", portCPU, hwtest.Batch(netnstest.Tag(plain, 0x8100, 0x4002))[0],
			ingress{vid: 2, vlan: vlanIndex(2), prio: 0x4000, restOff: 16}, dropNone},
		{"in-band C-tag cut short", portCPU, hwtest.Batch(netnstest.Tag(plain, 0x8100, 2)[:17])[0],
			ingress{vlan: -1, restOff: 12}, dropTagMalformed},
		{"runt", portLAN, hwtest.Batch(plain[:13])[0],
			ingress{vlan: -1, restOff: 12}, dropTagMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := tb.classify(tt.port, &tt.f)
			if got != tt.want || reason != tt.reason {
				t.Errorf("classify(%d, %+v) = %+v, %v; want %+v, %v", tt.port, tt.f, got, reason, tt.want, tt.reason)
			}
		})
	}
}

func TestTable(t *testing.T) {
	tb := newTable(&labConfig)
	want := []vlan{
		{vid: 1, members: 1<<portLAN | 1<<portCPU, untagged: 1 << portLAN},
		{vid: 2, members: 1<<portWAN | 1<<portCPU | 1<<portWAN2, untagged: 1<<portWAN | 1<<portWAN2},
	}
	if len(tb.vlans) != len(want) {
		t.Fatalf("newTable().vlans = %+v, want %+v", tb.vlans, want)
	}
	for i := range want {
		if tb.vlans[i] != want[i] {
			t.Errorf("newTable().vlans[%d] = %+v, want %+v", i, tb.vlans[i], want[i])
		}
	}
	if tb.index[1] != 1 || tb.index[2] != 2 || tb.index[3] != 0 {
		t.Errorf("newTable().index[1..3] = %v, want [1 2 0]", tb.index[1:4])
	}
}

func TestIsReservedGroup(t *testing.T) {
	for _, tt := range []struct {
		dst  []byte
		want bool
	}{
		{[]byte{0x01, 0x80, 0xc2, 0, 0, 0x00}, true}, // STP
		{[]byte{0x01, 0x80, 0xc2, 0, 0, 0x03}, true}, // 802.1X, MKA
		{[]byte{0x01, 0x80, 0xc2, 0, 0, 0x0e}, true}, // LLDP
		{[]byte{0x01, 0x80, 0xc2, 0, 0, 0x10}, false},
		{[]byte{0x01, 0x00, 0x5e, 0, 0, 0x01}, false},
		{macBcast, false},
	} {
		if got := isReservedGroup(tt.dst); got != tt.want {
			t.Errorf("isReservedGroup(% x) = %v, want %v", tt.dst, got, tt.want)
		}
	}
}
