package hw

import (
	"bytes"
	"testing"
)

// v2Slot builds a TPACKET_V2 slot of size bytes holding data at mac.
func v2Slot(size, mac int, data []byte, wireLen uint32, status uint32, tci uint16) []byte {
	s := make([]byte, size)
	le.PutUint32(s[shStatus:], tpStatusUser|status)
	le.PutUint32(s[shLen:], wireLen)
	le.PutUint32(s[shSnaplen:], uint32(len(data)))
	le.PutUint16(s[shMac:], uint16(mac))
	le.PutUint16(s[shVLANTCI:], tci)
	copy(s[mac:], data)
	return s
}

func TestParseSlot(t *testing.T) {
	eth := bytes.Repeat([]byte{0xab}, 60)
	const maxLen = 1522
	tests := []struct {
		name     string
		slot     []byte
		vnet     bool
		wantData []byte
		wantTCI  uint16
		wantDrop dropReason
	}{
		{"frame", v2Slot(2048, 66, eth, 60, tpStatusCsumValid, 0), false, eth, 0, -1},
		{"vlan", v2Slot(2048, 66, eth, 60, tpStatusVLANValid, 7), false, eth, 7, -1},
		{"truncated", v2Slot(2048, 66, eth, 61, 0, 0), false, nil, 0, dropTruncated},
		{"oversize", v2Slot(4096, 66, bytes.Repeat([]byte{1}, 1600), 1600, 0, 0), false, nil, 0, dropOversize},
		{"mac inside the header", v2Slot(2048, 20, eth, 60, 0, 0), false, nil, 0, dropMalformed},
		{"data past the slot", v2Slot(100, 66, eth[:30], 60, 0, 0)[:90], false, nil, 0, dropMalformed},
		{"runt", v2Slot(2048, 66, eth[:10], 10, 0, 0), false, nil, 0, dropMalformed},
		{"short slot", make([]byte, 8), false, nil, 0, dropMalformed},
		// With vnet the header's 10 bytes sit before mac: all zero is
		// a plain frame.
		{"vnet", v2Slot(2048, 76, eth, 60, 0, 0), true, eth, 0, -1},
		{"vnet mac too low", v2Slot(2048, 34, eth, 60, 0, 0), true, nil, 0, dropMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var drops dropCounts
			got := parseSlot(tt.slot, make([]Frame, 0, 1), maxLen, tt.vnet, &drops)
			if tt.wantDrop >= 0 {
				want := dropCounts{}
				want[tt.wantDrop] = 1
				if len(got) != 0 || drops != want {
					t.Fatalf("parseSlot() = %d frames, drops %v; want none, %v", len(got), drops, want)
				}
				return
			}
			if len(got) != 1 || drops != (dropCounts{}) {
				t.Fatalf("parseSlot() = %d frames, drops %v; want 1, none", len(got), drops)
			}
			if !bytes.Equal(got[0].Data, tt.wantData) || got[0].VLANTCI != tt.wantTCI {
				t.Errorf("frame = %x tci %d; want %x tci %d", got[0].Data, got[0].VLANTCI, tt.wantData, tt.wantTCI)
			}
		})
	}
	// A full frames slice: counted, never grown.
	var drops dropCounts
	frames := make([]Frame, 1, 1)
	if got := parseSlot(v2Slot(2048, 66, eth, 60, 0, 0), frames, maxLen, false, &drops); len(got) != 1 || drops[dropMalformed] != 1 {
		t.Errorf("parseSlot() on a full slice = %d frames, drops %v", len(got), drops)
	}
}

func TestParseSlotAllocs(t *testing.T) {
	s := v2Slot(2048, 66, bytes.Repeat([]byte{1}, 1514), 1514, 0, 0)
	frames := make([]Frame, 0, 1)
	var drops dropCounts
	if n := testing.AllocsPerRun(1000, func() { frames = parseSlot(s, frames[:0], 1522, false, &drops) }); n != 0 {
		t.Errorf("parseSlot allocs = %v, want 0", n)
	}
}
