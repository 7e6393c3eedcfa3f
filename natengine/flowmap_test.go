package natengine

import (
	"math/rand/v2"
	"testing"
)

// randTuple returns a random tuple as the engine builds them: an IPv4
// tuple's addresses are zero past their first 4 bytes. Small ranges make
// equal tuples common.
func randTuple(r *rand.Rand) Tuple {
	t := Tuple{SrcPort: uint16(r.IntN(3)), DstPort: uint16(r.IntN(3)), Proto: uint8(r.IntN(2)) * ProtoTCP, V6: r.IntN(2) == 0}
	n := 4
	if t.V6 {
		n = 16
	}
	for i := 0; i < n; i++ {
		t.Src[i] = byte(r.IntN(2))
		t.Dst[i] = byte(r.IntN(2)) << (i % 8)
	}
	return t
}

// TestTupleEqualKey checks Tuple.equal against the compiler's == and that
// equal tuples have equal keys (the flow table's hash), over random pairs.
func TestTupleEqualKey(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	same := 0
	for i := 0; i < 200000; i++ {
		a, b := randTuple(r), randTuple(r)
		if r.IntN(4) == 0 {
			b = a
		}
		if got, want := a.equal(&b), a == b; got != want {
			t.Fatalf("%v equal %v = %v, want %v", a, b, got, want)
		}
		if a == b {
			same++
			if a.key(7) != b.key(7) {
				t.Fatalf("equal tuples %v with keys %#x, %#x", a, a.key(7), b.key(7))
			}
		} else if a.key(7) == a.key(8) {
			t.Fatalf("%v: the key ignores the seed", a)
		}
	}
	if same < 10000 {
		t.Fatalf("only %d equal pairs: the test does not cover equality", same)
	}
}

// TestFlowMapCollisions stores keys that share one hash (as two tuples
// whose 64-bit keys collide would): every key must be found, replaced and
// removed as in a map keyed by the whole tuple, which the test keeps as the
// model.
func TestFlowMapCollisions(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m := newFlowMap(0)
	model := map[Tuple]ref{}
	var conns []*conn
	for i := 0; i < 50000; i++ {
		k := randTuple(r)
		// A key's hash is a function of the key, but for IPv4 one of only
		// three values: collisions everywhere. IPv6 keys keep their own.
		h := k.key(1)
		if !k.V6 {
			h %= 3
		}
		switch op := r.IntN(3); {
		case op == 0 || len(conns) == 0: // insert under a new flow, in one of its three roles
			c := &conn{}
			dir := uint8(r.IntN(3))
			switch dir {
			case dirOrig:
				c.orig = k
			case dirMid:
				c.mid = k
			default:
				c.reply = k
			}
			conns = append(conns, c)
			m.put(h, &k, ref{c, dir})
			model[k] = ref{c, dir}
		case op == 1: // remove it if it is this flow's: its own or another
			c := conns[r.IntN(len(conns))]
			if cur, ok := model[k]; ok && r.IntN(2) == 0 {
				c = cur.c
			}
			m.remove(h, &k, c)
			if model[k].c == c {
				delete(model, k)
			}
		}
		got, ok := m.get(h, &k)
		want, wok := model[k]
		if ok != wok || got != want {
			t.Fatalf("op %d: get(%v) = %v %v, want %v %v", i, k, got, ok, want, wok)
		}
	}
	n := 0
	m.each(func(r ref) {
		n++
		if model[*r.tuple()] != r {
			t.Fatalf("each: %v not in the model", r)
		}
	})
	if n != len(model) || len(m.spill) == 0 {
		t.Fatalf("each saw %d entries, the model has %d; spill %d", n, len(model), len(m.spill))
	}
}
