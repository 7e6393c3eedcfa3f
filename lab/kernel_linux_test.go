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

// ctStatSample is /proc/net/stat/nf_conntrack of a 2-CPU kernel 6.18.
const ctStatSample = `entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart
0000fc00  00000000 00000000 00000000 00000003 00000000 00000000 00000000 00000000 00000000 00000010 0000a000 00000000  00000000 00000000 00000000 00000000
0000fc00  00000000 00000000 00000000 00000001 00000000 00000000 00000000 00000000 00000000 00000002 00000001 00000000  00000000 00000000 00000000 00000000
`

func TestCTStatSum(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stat    string
		col     string
		want    uint64
		wantErr bool
	}{
		{"early_drop", ctStatSample, "early_drop", 0xa001, false},
		{"drop", ctStatSample, "drop", 0x12, false},
		{"invalid", ctStatSample, "invalid", 4, false},
		{"no column", ctStatSample, "clash_resolve", 0, true},
		{"empty", "", "drop", 0, true},
		{"short line", "entries drop\n0001\n", "drop", 0, true},
		{"not hex", "entries drop\n0001 zz\n", "drop", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ctStatSum([]byte(tc.stat), tc.col)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("ctStatSum(%s) = %d, %v; want %d, error %v", tc.col, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func FuzzCTStatSum(f *testing.F) {
	f.Add([]byte(ctStatSample), "drop")
	f.Add([]byte("entries drop\n0001\n"), "drop")
	f.Fuzz(func(t *testing.T, stat []byte, col string) {
		if v, err := ctStatSum(stat, col); err != nil && v != 0 {
			t.Errorf("ctStatSum() = %d, %v; want 0 with an error", v, err)
		}
	})
}
