package hw

import (
	"runtime"
	"strings"
	"testing"
)

func TestLookupProfile(t *testing.T) {
	tests := []struct {
		name       string
		wantName   string
		wantQueues int
		wantErr    string
	}{
		{"", "generic", 1, ""},
		{"generic", "generic", 1, ""},
		{"bcm47094", "bcm47094", 1, ""},
		{"ixgbe", "ixgbe", runtime.NumCPU(), ""},
		{"e1000", "", 0, `unknown hardware profile "e1000" (want one of bcm47094, generic, ixgbe)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := LookupProfile(tt.name)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LookupProfile(%q) = %v, want error %q", tt.name, err, tt.wantErr)
				}
				return
			}
			if err != nil || p.Name != tt.wantName || p.DefaultQueues != tt.wantQueues || p.Doc == "" {
				t.Errorf("LookupProfile(%q) = %+v, %v; want %s with %d queues and a Doc", tt.name, p, err, tt.wantName, tt.wantQueues)
			}
		})
	}
	for name, want := range map[string]bool{"generic": true, "bcm47094": false, "ixgbe": false} {
		// Superframes come from the devices of the generic profile.
		if p, _ := LookupProfile(name); p.VnetHdr != want {
			t.Errorf("%s VnetHdr = %v, want %v", name, p.VnetHdr, want)
		}
	}
	for _, name := range []string{"generic", "bcm47094", "ixgbe"} {
		// Profile.DefaultTx says why (docs/performance.md, the TX ring
		// rows): superframes go whole only with sendmmsg.
		if p, _ := LookupProfile(name); p.DefaultTx != TxSendmmsg {
			t.Errorf("%s DefaultTx = %q, want %q", name, p.DefaultTx, TxSendmmsg)
		}
	}
	if p, _ := LookupProfile("bcm47094"); p.RxCsumOffload {
		t.Error("bcm47094 RxCsumOffload = true, want false (bgmac has none)")
	}
}
