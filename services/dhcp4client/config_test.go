package dhcp4client

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/services/svcconfig"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // the Key of each FieldError
	}{
		{"zero", Config{}, nil},
		{"router's settings", Config{ClientID: append([]byte{1}, clientMAC...), Hostname: "gvrouter", Release: true}, nil},
		{"client id 1 byte", Config{ClientID: []byte{1}}, []string{"client_id"}},
		{"client id at its bound", Config{ClientID: make([]byte, MaxClientID)}, nil},
		{"client id too long", Config{ClientID: make([]byte, MaxClientID+1)}, []string{"client_id"}},
		{"hostname with dots", Config{Hostname: "gv-router.home.arpa"}, nil},
		{"hostname underscore", Config{Hostname: "gv_router"}, []string{"hostname"}},
		{"hostname leading hyphen", Config{Hostname: "-gv"}, []string{"hostname"}},
		{"hostname empty label", Config{Hostname: "a..b"}, []string{"hostname"}},
		{"hostname label of 64", Config{Hostname: strings.Repeat("a", 64)}, []string{"hostname"}},
		{"hostname of 256", Config{Hostname: strings.Repeat("a.", 128)}, []string{"hostname"}},
		{"negatives", Config{MinMTU: -1, DeclineWait: -time.Second, RebootTimeout: -1},
			[]string{"min_mtu", "decline_wait", "reboot_timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			var got []string
			for _, e := range svcconfig.Fields(err) {
				got = append(got, e.Key)
			}
			if !slices.Equal(got, tc.want) || len(svcconfig.Others(err)) > 0 {
				t.Errorf("Validate() = %v (%v), want keys %v", got, err, tc.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "dhcp4client: ") {
				t.Errorf("Validate() = %q, want the dhcp4client: prefix", err)
			}
		})
	}
}
