package netnstest

import (
	"bytes"
	"testing"
)

func TestFrameAndTag(t *testing.T) {
	src := []byte{0x02, 0, 0, 0, 0, 0x01}
	f := Frame(Broadcast, src, "marker")
	want := append(append(append(bytes.Clone(Broadcast), src...), 0x88, 0xb5), "marker"...)
	want = append(want, make([]byte, 60-len(want))...)
	if !bytes.Equal(f, want) {
		t.Fatalf("Frame() = % x, want % x", f, want)
	}
	long := Frame(src, src, string(make([]byte, 100)))
	if len(long) != 114 {
		t.Errorf("Frame() with 100 bytes of payload is %d bytes, want 114", len(long))
	}
	orig := bytes.Clone(f)
	tagged := Tag(f, 0x8100, 0x600a)
	wantTagged := append(append(bytes.Clone(f[:12]), 0x81, 0x00, 0x60, 0x0a), f[12:]...)
	if !bytes.Equal(tagged, wantTagged) || !bytes.Equal(f, orig) {
		t.Errorf("Tag() = % x (input now % x), want % x and the input untouched", tagged, f, wantTagged)
	}
}
