// Package svcstats lists a service's counters by the names the status
// page and the metrics show, from the service's own Stats struct: each
// counter is an atomic.Uint64 field tagged `counter:"GROUP/NAME"`, e.g.
//
//	Discover atomic.Uint64 `counter:"events/discover"`
//
// so that a new counter is one tagged field in the service's package; the
// router's status glue copies Counters(stats, "events") as it is and the
// metrics iterate it (router/status). Names are metric label values:
// lower case, digits and underscores.
package svcstats

import (
	"reflect"
	"strings"
	"sync/atomic"
)

var atomicUint64 = reflect.TypeFor[atomic.Uint64]()

// Counters returns the counters of group in stats, a pointer to a
// struct, by name, e.g. Counters(&s, "drops") = {"malformed": 2}. Fields
// of nested structs count too. A group without counters gives an empty
// map, never nil. Each counter is read with Load; the map is not one
// atomic snapshot.
func Counters(stats any, group string) map[string]uint64 {
	out := map[string]uint64{}
	v := reflect.ValueOf(stats)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return out
	}
	walk(v.Elem(), group, out)
	return out
}

// Names returns the counter names of group in the struct type of stats,
// in field order.
func Names(stats any, group string) []string {
	var names []string
	t := reflect.TypeOf(stats)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	var walkType func(reflect.Type)
	walkType = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			switch {
			case !f.IsExported():
			case f.Type == atomicUint64:
				if g, name, ok := strings.Cut(f.Tag.Get("counter"), "/"); ok && g == group {
					names = append(names, name)
				}
			case f.Type.Kind() == reflect.Struct:
				walkType(f.Type)
			}
		}
	}
	walkType(t.Elem())
	return names
}

func walk(v reflect.Value, group string, out map[string]uint64) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case !f.IsExported():
		case f.Type == atomicUint64:
			if g, name, ok := strings.Cut(f.Tag.Get("counter"), "/"); ok && g == group {
				out[name] = v.Field(i).Addr().Interface().(*atomic.Uint64).Load()
			}
		case f.Type.Kind() == reflect.Struct:
			walk(v.Field(i), group, out)
		}
	}
}

// ByName returns an array of counters indexed by reason (a service's
// Drops) by the reasons' names, e.g. ByName(s.Drops[:],
// func(i int) string { return DropReason(i).String() }).
func ByName(counts []atomic.Uint64, name func(i int) string) map[string]uint64 {
	m := make(map[string]uint64, len(counts))
	for i := range counts {
		m[name(i)] = counts[i].Load()
	}
	return m
}
