package hwaddr

import (
	"encoding/json"
	"testing"
)

// TestJSON: a MAC is text in JSON, both ways, and nil is "".
func TestJSON(t *testing.T) {
	for _, tc := range []struct {
		mac  MAC
		want string
	}{
		{MAC{2, 0, 0, 0, 1, 0x0a}, `"02:00:00:00:01:0a"`},
		{nil, `""`},
	} {
		b, err := json.Marshal(tc.mac)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%v) = %s, %v, want %s", []byte(tc.mac), b, err, tc.want)
		}
		var back MAC
		if err := json.Unmarshal(b, &back); err != nil || back.String() != tc.mac.String() {
			t.Errorf("Unmarshal(%s) = %v, %v, want %v", b, back, err, tc.mac)
		}
	}
	var m MAC
	if err := json.Unmarshal([]byte(`"not a mac"`), &m); err == nil {
		t.Errorf(`Unmarshal("not a mac") = nil error, want one`)
	}
}
