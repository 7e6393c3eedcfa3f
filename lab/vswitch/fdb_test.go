package vswitch

import (
	"testing"
	"time"
)

func TestFDB(t *testing.T) {
	const aging = int64(300 * time.Second)
	var now int64 = 1000
	f := newFDB(aging, 3)
	lookup := func(vid uint16, mac []byte, wantPort int, wantOK bool) {
		t.Helper()
		if p, ok := f.lookup(vid, mac, now); p != wantPort || ok != wantOK {
			t.Errorf("lookup(%d, % x) at %v = %d, %v; want %d, %v", vid, mac, time.Duration(now), p, ok, wantPort, wantOK)
		}
	}
	lookup(1, macLAN, 0, false)
	if !f.learn(1, macLAN, 3, now) {
		t.Fatal("learn() = false on an empty table")
	}
	lookup(1, macLAN, 3, true)
	lookup(2, macLAN, 0, false) // independent VLAN learning

	// Seen again after 200 s: the entry lives 300 s from then.
	now += int64(200 * time.Second)
	f.learn(1, macLAN, 3, now)
	now += aging
	lookup(1, macLAN, 3, true)
	now++
	lookup(1, macLAN, 0, false) // aged

	// A station moves.
	f.learn(1, macLAN, 0, now)
	lookup(1, macLAN, 0, true)
	f.learn(1, macLAN, 2, now)
	lookup(1, macLAN, 2, true)

	// Full: room is made only from aged entries.
	f.learn(1, macWAN, 1, now)
	f.learn(2, macWAN, 1, now)
	if f.learn(1, macCPU, 1, now) {
		t.Error("learn() on a full table of live entries = true, want false")
	}
	lookup(1, macCPU, 0, false)
	now += aging + 1
	if !f.learn(1, macCPU, 1, now) {
		t.Error("learn() on a full table of aged entries = false, want true")
	}
	if n := f.len(); n != 1 {
		t.Errorf("len() after learning into an aged table = %d, want 1", n)
	}
	lookup(1, macCPU, 1, true)
	lookup(1, macWAN, 0, false)

	f.learn(2, macWAN2, 2, now)
	f.flush(1)
	lookup(1, macCPU, 0, false)
	lookup(2, macWAN2, 2, true)

	now += aging + 1
	f.expire(now)
	if n := f.len(); n != 0 {
		t.Errorf("len() after expire = %d, want 0", n)
	}
}

func TestFDBKey(t *testing.T) {
	if k := fdbKey(0xabc, []byte{1, 2, 3, 4, 5, 6}); k != 0x0abc_0102_0304_0506 {
		t.Errorf("fdbKey(0xabc, 01:02:03:04:05:06) = %#x, want 0xabc010203040506", k)
	}
}

func TestFDBLearnAllocs(t *testing.T) {
	f := newFDB(int64(AgingTime), FDBSize)
	var now int64
	if a := testing.AllocsPerRun(1000, func() {
		now += int64(time.Second) // rewrite the entry each time
		f.learn(1, macLAN, 1, now)
		f.lookup(1, macLAN, now)
	}); a != 0 {
		t.Errorf("learn+lookup allocs = %v, want 0", a)
	}
}
