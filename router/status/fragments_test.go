package status_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/status/statustest"
)

// TestFragmentsExported: the fragment guard's state is in /api/status and
// /metrics, and its refusals are interface drops like any other.
func TestFragmentsExported(t *testing.T) {
	snap := statustest.Example(started)
	snap.Fragments = &status.Fragments{Tracked: 3, Evicted: 7}
	snap.Interfaces[0].Drops = map[string]uint64{"tcp_offset_8": 2}
	s, _, _ := newServer(t, snap)

	var got status.Snapshot
	if err := json.Unmarshal([]byte(body(t, get(t, s.Handler(), "GET", "/api/status"))), &got); err != nil {
		t.Fatal(err)
	}
	if got.Fragments == nil || *got.Fragments != *snap.Fragments {
		t.Errorf("/api/status fragments = %+v, want %+v", got.Fragments, snap.Fragments)
	}

	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body(t, get(t, s.Handler(), "GET", "/metrics"))))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"gvrouter_fragment_datagrams_tracked": 3, "gvrouter_fragment_evictions_total": 7} {
		if v, ok := value(fams, name, map[string]string{}); !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	if v, ok := value(fams, "gvrouter_interface_drops_total", map[string]string{"interface": snap.Interfaces[0].Name, "reason": "tcp_offset_8"}); !ok || v != 2 {
		t.Errorf(`gvrouter_interface_drops_total{reason="tcp_offset_8"} = %v (present %v), want 2`, v, ok)
	}
}

func TestFragmentsOnPage(t *testing.T) {
	snap := statustest.Example(started)
	snap.Fragments = &status.Fragments{Tracked: 3, Evicted: 7}
	s, _, _ := newServer(t, snap)
	page := body(t, get(t, s.Handler(), "GET", "/"))
	if !strings.Contains(page, "fragment guard: 3 datagrams tracked, 7 evicted early") {
		t.Errorf("status page does not show the fragment guard:\n%s", page)
	}
}
