package hwtest

import (
	"bytes"
	"testing"
)

func TestWriter(t *testing.T) {
	w := &Writer{Limit: 2}
	a, b, c := []byte{1}, []byte{2}, []byte{3}
	if n, err := w.WriteFrames([][]byte{a, b, c}); n != 2 || err != nil {
		t.Fatalf("WriteFrames() = %d, %v; want 2, nil", n, err)
	}
	a[0] = 9 // the writer kept a copy
	got := w.Frames()
	if len(got) != 2 || !bytes.Equal(got[0], []byte{1}) || !bytes.Equal(got[1], b) {
		t.Errorf("Frames() = %v, want [[1] [2]]", got)
	}
	if got := w.Frames(); len(got) != 0 {
		t.Errorf("second Frames() = %v, want none", got)
	}
}

func TestBatch(t *testing.T) {
	fs := Batch([]byte{1, 2}, []byte{3})
	if len(fs) != 2 || fs[0].WireLen != 2 || fs[1].WireLen != 1 {
		t.Errorf("Batch() = %+v", fs)
	}
	if f := Tagged([]byte{1}, 0x8100, 5); !f.VLANValid || f.VLANTCI != 5 || f.VLANTPID != 0x8100 {
		t.Errorf("Tagged() = %+v", f)
	}
}
