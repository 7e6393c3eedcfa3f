package lab

import "testing"

const snmpSample = `Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 2 64 1200 0 3 417 0 0 780 790 0 0 0 0 0 0 0 0 0 1207
Icmp: InMsgs InErrors InCsumErrors
Icmp: 5 0 0
`

const snmp6Sample = `Ip6InReceives                   	12
Ip6OutForwDatagrams             	7
Ip6InDelivers                   	5
`

func TestSNMPValue(t *testing.T) {
	for _, tc := range []struct {
		section, name string
		want          uint64
		wantErr       bool
	}{
		{"Ip", "ForwDatagrams", 417, false},
		{"Ip", "Forwarding", 2, false},
		{"Ip", "OutTransmits", 1207, false},
		{"Icmp", "InMsgs", 5, false},
		{"Ip", "NoSuchCounter", 0, true},
		{"Tcp", "ActiveOpens", 0, true},
	} {
		got, err := snmpValue([]byte(snmpSample), tc.section, tc.name)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("snmpValue(%s, %s) = %d, %v; want %d, error %v", tc.section, tc.name, got, err, tc.want, tc.wantErr)
		}
	}
	if got, err := snmp6Value([]byte(snmp6Sample), "Ip6OutForwDatagrams"); got != 7 || err != nil {
		t.Errorf("snmp6Value(Ip6OutForwDatagrams) = %d, %v; want 7", got, err)
	}
	if _, err := snmp6Value([]byte(snmp6Sample), "Ip6Nope"); err == nil {
		t.Errorf("snmp6Value(Ip6Nope) = nil error, want error")
	}
}

func TestKernelSilent(t *testing.T) {
	quiet := kernelState{ForwDatagrams: 5, Forw6Datagrams: 2, IPForward: "0", IP6Forward: "0"}
	for _, tc := range []struct {
		name    string
		after   kernelState
		wantErr bool
	}{
		{"unchanged", quiet, false},
		{"ipv4 forwarded", kernelState{ForwDatagrams: 6, Forw6Datagrams: 2, IPForward: "0", IP6Forward: "0"}, true},
		{"ipv6 forwarded", kernelState{ForwDatagrams: 5, Forw6Datagrams: 3, IPForward: "0", IP6Forward: "0"}, true},
		{"ip_forward on", kernelState{ForwDatagrams: 5, Forw6Datagrams: 2, IPForward: "1", IP6Forward: "0"}, true},
		{"ipv6 forwarding on", kernelState{ForwDatagrams: 5, Forw6Datagrams: 2, IPForward: "0", IP6Forward: "1"}, true},
	} {
		if err := kernelSilent(quiet, tc.after); (err != nil) != tc.wantErr {
			t.Errorf("%s: kernelSilent() = %v, want error %v", tc.name, err, tc.wantErr)
		}
	}
}
