package tokenbucket

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestBucket: a burst at once, then the rate; never more than the burst
// after a long quiet; a clock that goes back earns nothing.
func TestBucket(t *testing.T) {
	r := Rate{Burst: 3, PerSecond: 2}
	b := Full(r, t0)
	tests := []struct {
		name  string
		at    time.Duration
		tries int
		want  int
	}{
		{"the burst at once", 0, 10, 3},
		{"half a second earns one", 500 * time.Millisecond, 10, 1},
		{"a quarter second earns half a token: none", 750 * time.Millisecond, 10, 0},
		{"the half carries over", time.Second, 10, 1},
		{"an hour earns no more than the burst", time.Hour, 10, 3},
		{"the clock going back earns nothing", time.Hour - time.Minute, 10, 0},
	}
	for _, tt := range tests {
		got := 0
		for range tt.tries {
			if b.Allow(t0.Add(tt.at), r) {
				got++
			}
		}
		if got != tt.want {
			t.Errorf("%s: Allow passed %d of %d, want %d", tt.name, got, tt.tries, tt.want)
		}
	}
}

// TestTable: keys have their own buckets; the table stays within its
// bound under ever-new keys, refuses a new key while full, and forgets
// idle keys (full again) to make room.
func TestTable(t *testing.T) {
	r := Rate{Burst: 2, PerSecond: 1}
	tb := NewTable[int](r, 4)
	for k := range 4 {
		if b := tb.Get(k, t0); b == nil || !b.Allow(t0, r) {
			t.Fatalf("Get(%d) on a table with room: no token", k)
		}
	}
	if b := tb.Get(9, t0); b != nil {
		t.Errorf("Get(9) on a full table of busy keys = %v, want nil", b)
	}
	if b := tb.Get(9, t0.Add(50*time.Millisecond)); b != nil {
		t.Errorf("Get(9) within pruneEvery and no bucket refilled = %v, want nil", b)
	}
	if n := tb.Len(); n != 4 {
		t.Errorf("Len() = %d, want 4", n)
	}
	// A second later every bucket is full again: idle, forgotten.
	later := t0.Add(time.Second)
	if b := tb.Get(9, later); b == nil || !b.Allow(later, r) {
		t.Fatal("Get(9) after the others went idle: no bucket")
	}
	if n := tb.Len(); n != 1 {
		t.Errorf("Len() after the prune = %d, want 1", n)
	}
	// The key's bucket is its own: spending it does not touch another's.
	b := tb.Get(9, later)
	b.Allow(later, r)
	if b.Allow(later, r) {
		t.Error("key 9 passed beyond its burst")
	}
	if o := tb.Get(1, later); o == nil || !o.Allow(later, r) {
		t.Error("key 1 refused while key 9 is spent")
	}
}
