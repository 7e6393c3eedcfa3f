package dhcpopts

import (
	"errors"
	"testing"
)

// msg builds a message with the cookie at 236 and opts after it; sname
// and file hold what is given.
func msg(opts, sname, file []byte) []byte {
	b := make([]byte, optionsAt, optionsAt+len(opts))
	copy(b[snameAt:fileAt], sname)
	copy(b[fileAt:optionsAt-4], file)
	copy(b[236:], []byte{99, 130, 83, 99})
	return append(b, opts...)
}

func TestWellFormed(t *testing.T) {
	for _, tc := range []struct {
		name              string
		opts, sname, file []byte
		want              error
	}{
		{"discover", []byte{53, 1, 1, 255}, nil, nil, nil},
		{"padding then end", []byte{53, 1, 1, 0, 0, 255, 9, 9}, nil, nil, nil},
		{"no end", []byte{53, 1, 1, 12, 3, 'a', 'b', 'c'}, nil, nil, ErrNoEnd},
		{"empty options", nil, nil, nil, ErrNoEnd},
		{"length past the end", []byte{53, 1, 1, 61, 200, 1, 2, 3}, nil, nil, ErrOverrun},
		{"code without length", []byte{53, 1, 1, 12}, nil, nil, ErrOverrun},
		{"overload file ok", []byte{53, 1, 1, 52, 1, 1, 255}, nil, []byte{12, 1, 'a', 255}, nil},
		{"overload both ok", []byte{53, 1, 1, 52, 1, 3, 255}, []byte{15, 1, 'x', 255}, []byte{12, 1, 'a', 255}, nil},
		{"overload sname overruns", []byte{53, 1, 1, 52, 1, 2, 255}, append([]byte{12, 127}, make([]byte, 62)...), nil, ErrOverrun},
		{"overload file without end", []byte{53, 1, 1, 52, 1, 1, 255}, nil, []byte{12, 1, 'a'}, ErrNoEnd},
		{"overload value 4", []byte{53, 1, 1, 52, 1, 4, 255}, nil, nil, ErrOverload},
		{"overload length 2", []byte{53, 1, 1, 52, 2, 1, 1, 255}, nil, nil, ErrOverload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := WellFormed(msg(tc.opts, tc.sname, tc.file)); !errors.Is(err, tc.want) {
				t.Errorf("WellFormed = %v, want %v", err, tc.want)
			}
		})
	}
	if err := WellFormed(make([]byte, 239)); !errors.Is(err, ErrShort) {
		t.Errorf("WellFormed(239 bytes) = %v, want ErrShort", err)
	}
}

func FuzzWellFormed(f *testing.F) {
	f.Add(msg([]byte{53, 1, 1, 255}, nil, nil))
	f.Add(msg([]byte{53, 1, 1, 52, 1, 3, 255}, []byte{15, 1, 'x', 255}, []byte{12, 1, 'a', 255}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = WellFormed(b) // must not panic on any input
	})
}
