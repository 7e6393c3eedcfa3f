package svcstats

import (
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type inner struct {
	Bad atomic.Uint64 `counter:"drops/bad"`
}

type stats struct {
	Sent     atomic.Uint64 `counter:"events/sent"`
	Received atomic.Uint64 `counter:"events/received"`
	Untagged atomic.Uint64
	Other    atomic.Uint64 `counter:"no group"`
	hidden   atomic.Uint64 `counter:"events/hidden"`
	Drops    inner
	Array    [2]atomic.Uint64
}

func TestCounters(t *testing.T) {
	var s stats
	s.Sent.Add(3)
	s.Received.Add(5)
	s.Untagged.Add(7)
	s.Other.Add(9)
	s.hidden.Add(11)
	s.Drops.Bad.Add(2)
	for _, tc := range []struct {
		group string
		want  map[string]uint64
		names []string
	}{
		{"events", map[string]uint64{"sent": 3, "received": 5}, []string{"sent", "received"}},
		{"drops", map[string]uint64{"bad": 2}, []string{"bad"}},
		{"none", map[string]uint64{}, nil},
	} {
		if diff := cmp.Diff(tc.want, Counters(&s, tc.group)); diff != "" {
			t.Errorf("Counters(%q) (-want +got):\n%s", tc.group, diff)
		}
		if diff := cmp.Diff(tc.names, Names(&s, tc.group)); diff != "" {
			t.Errorf("Names(%q) (-want +got):\n%s", tc.group, diff)
		}
	}
	for _, v := range []any{nil, s.Sent.Load(), (*stats)(nil)} {
		if got := Counters(v, "events"); got == nil || len(got) != 0 {
			t.Errorf("Counters(%T) = %v, want an empty map", v, got)
		}
	}
}
