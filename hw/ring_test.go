package hw

import (
	"bytes"
	"encoding/binary"
	"testing"
	"unsafe"
)

// testFrame describes one frame of a synthetic ring block.
type testFrame struct {
	data    []byte
	wireLen uint32 // 0 = len(data)
	status  uint32
	tci     uint16
	tpid    uint16
	// vnet, if set, is the virtio-net header written before tp_mac.
	vnet []byte
	// Overrides for malformed blocks; 0 = computed.
	mac     uint16
	snaplen uint32
	next    uint32
}

// buildBlock lays frames out as the kernel does (tpacket_rcv): headers at
// 16-byte aligned offsets, data after a 2-byte-aligned tp_mac.
func buildBlock(size int, frames []testFrame) []byte {
	b := make([]byte, size)
	off := blockDescLen
	le.PutUint32(b[0:], 3)                           // version
	le.PutUint32(b[bdBlockStatus:], tpStatusUser)    // block_status
	le.PutUint32(b[bdNumPkts:], uint32(len(frames))) // num_pkts
	le.PutUint32(b[bdOffsetToFirstPkt:], uint32(off))
	for i, f := range frames {
		if off+frameHdrLen > size {
			break
		}
		// Like the kernel with PACKET_RESERVE ringReserve and a 14-byte
		// MAC header: TPACKET_ALIGN(68 + 16) + ringReserve - 14.
		mac := uint16(96 + ringReserve - EthernetHeaderLen)
		if f.mac != 0 {
			mac = f.mac
		}
		snap := uint32(len(f.data))
		if f.snaplen != 0 {
			snap = f.snaplen
		}
		wire := f.wireLen
		if wire == 0 {
			wire = uint32(len(f.data))
		}
		next := (uint32(mac) + uint32(len(f.data)) + 15) &^ 15
		if f.next != 0 {
			next = f.next
		}
		if i == len(frames)-1 {
			next = 0
		}
		h := b[off:]
		le.PutUint32(h[fhNextOffset:], next)
		le.PutUint32(h[fhSnaplen:], snap)
		le.PutUint32(h[fhLen:], wire)
		le.PutUint32(h[fhStatus:], tpStatusUser|f.status)
		le.PutUint16(h[fhMac:], mac)
		le.PutUint32(h[fhVLANTCI:], uint32(f.tci))
		le.PutUint16(h[fhVLANTPID:], f.tpid)
		if off+int(mac) < len(b) {
			copy(b[off+int(mac):], f.data)
		}
		if f.vnet != nil && int(mac) >= VnetHdrLen {
			copy(b[off+int(mac)-VnetHdrLen:], f.vnet)
		}
		step := uint64(next)
		if i == len(frames)-1 {
			step = uint64(mac) + uint64(len(f.data))
		}
		off = int(min(uint64(off)+step, uint64(size)))
	}
	le.PutUint32(b[bdBlkLen:], uint32(off))
	return b
}

func ethFrame(n int, fill byte) []byte {
	f := make([]byte, n)
	for i := range f {
		f[i] = fill
	}
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	return f
}

func TestParseBlock(t *testing.T) {
	const maxLen = 1500 + MaxL2Overhead
	full := ethFrame(1514, 0xaa)
	small := ethFrame(60, 0xbb)
	tests := []struct {
		name      string
		block     []byte
		wantData  [][]byte
		wantDrops dropCounts
		check     func(t *testing.T, f []Frame)
	}{
		{
			name:     "two frames",
			block:    buildBlock(8192, []testFrame{{data: full}, {data: small}}),
			wantData: [][]byte{full, small},
		},
		{
			name:     "vlan and checksum status",
			block:    buildBlock(4096, []testFrame{{data: small, status: tpStatusVLANValid | tpStatusVLANTPIDValid | tpStatusCsumValid, tci: 0x2064, tpid: 0x88a8}, {data: small, status: tpStatusVLANValid | tpStatusCsumNotReady, tci: 10}}),
			wantData: [][]byte{small, small},
			check: func(t *testing.T, f []Frame) {
				if !f[0].VLANValid || f[0].VLANTCI != 0x2064 || f[0].VLANTPID != 0x88a8 || !f[0].CsumValid || f[0].CsumPartial {
					t.Errorf("frame 0 = %+v, want VLAN 0x2064/0x88a8, csum valid", f[0])
				}
				if !f[1].VLANValid || f[1].VLANTCI != 10 || f[1].VLANTPID != etherTypeVLAN || f[1].CsumValid || !f[1].CsumPartial {
					t.Errorf("frame 1 = %+v, want VLAN 10/0x8100 (default TPID), csum partial", f[1])
				}
			},
		},
		{
			name:      "truncated by snaplen",
			block:     buildBlock(4096, []testFrame{{data: small, wireLen: 1514}, {data: small}}),
			wantData:  [][]byte{small},
			wantDrops: dropCounts{dropTruncated: 1},
		},
		{
			name:      "oversize",
			block:     buildBlock(8192, []testFrame{{data: ethFrame(maxLen+1, 1)}, {data: small}}),
			wantData:  [][]byte{small},
			wantDrops: dropCounts{dropOversize: 1},
		},
		{
			name:      "shorter than ethernet header",
			block:     buildBlock(4096, []testFrame{{data: []byte{1, 2, 3}}, {data: small}}),
			wantData:  [][]byte{small},
			wantDrops: dropCounts{dropMalformed: 1},
		},
		{
			name:      "tp_len below tp_snaplen",
			block:     buildBlock(4096, []testFrame{{data: small, wireLen: 20}, {data: small}}),
			wantData:  [][]byte{small},
			wantDrops: dropCounts{dropMalformed: 1},
		},
		{
			name:      "tp_mac inside header",
			block:     buildBlock(4096, []testFrame{{data: small}, {data: small, mac: 10}}),
			wantData:  [][]byte{small},
			wantDrops: dropCounts{dropMalformed: 1},
		},
		{
			name:      "tp_mac beyond block",
			block:     buildBlock(4096, []testFrame{{data: small}, {data: small, mac: 60000}}),
			wantData:  [][]byte{small},
			wantDrops: dropCounts{dropMalformed: 1},
		},
		{
			name:      "snaplen beyond block",
			block:     buildBlock(4096, []testFrame{{data: small, snaplen: 1 << 30}}),
			wantDrops: dropCounts{dropMalformed: 1},
		},
		{
			name:      "next offset beyond block",
			block:     buildBlock(4096, []testFrame{{data: small, next: 1 << 31}, {data: small}}),
			wantData:  [][]byte{small},
			wantDrops: dropCounts{dropMalformed: 1},
		},
		{
			name: "next offset overlapping data",
			block: func() []byte {
				b := buildBlock(4096, []testFrame{{data: small}})
				le.PutUint32(b[bdNumPkts:], 2)
				le.PutUint32(b[blockDescLen+fhNextOffset:], 16)
				return b
			}(),
			wantData:  [][]byte{small},
			wantDrops: dropCounts{dropMalformed: 1},
		},
		{
			name: "num_pkts lying",
			block: func() []byte {
				b := buildBlock(4096, []testFrame{{data: small}})
				le.PutUint32(b[bdNumPkts:], 1<<31)
				return b
			}(),
			wantData:  [][]byte{small},
			wantDrops: dropCounts{dropMalformed: 1},
		},
		{
			name: "first offset out of bounds",
			block: func() []byte {
				b := buildBlock(4096, []testFrame{{data: small}})
				le.PutUint32(b[bdOffsetToFirstPkt:], 1<<20)
				return b
			}(),
			wantDrops: dropCounts{dropMalformed: 1},
		},
		{
			name:      "short block",
			block:     make([]byte, 20),
			wantDrops: dropCounts{dropMalformed: 1},
		},
		{
			name:  "empty block",
			block: buildBlock(4096, nil),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var drops dropCounts
			frames := make([]Frame, 0, maxFramesPerBlock(len(tt.block)))
			got := parseBlock(tt.block, frames, maxLen, false, &drops)
			if len(got) != len(tt.wantData) {
				t.Fatalf("parseBlock() = %d frames, want %d (drops %v)", len(got), len(tt.wantData), drops)
			}
			for i, f := range got {
				if !bytes.Equal(f.Data, tt.wantData[i]) {
					t.Errorf("frame %d data = % x..., want % x...", i, f.Data[:min(16, len(f.Data))], tt.wantData[i][:16])
				}
				if f.WireLen != len(tt.wantData[i]) {
					t.Errorf("frame %d WireLen = %d, want %d", i, f.WireLen, len(tt.wantData[i]))
				}
			}
			if drops != tt.wantDrops {
				t.Errorf("parseBlock() drops = %v, want %v", drops, tt.wantDrops)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

// vnetBytes encodes g as a test frame's virtio-net header.
func vnetBytes(g GSO) []byte {
	b := make([]byte, VnetHdrLen)
	VnetHdr(b).Encode(&g)
	return b
}

// TestParseBlockVnet: with vnet headers, a superframe longer than maxLen
// is delivered with its metadata, a plain frame that long is still
// oversize, and bad or unsupported headers are counted drops.
func TestParseBlockVnet(t *testing.T) {
	const maxLen = 1522
	tcp4 := GSO{Type: GSOTCPv4, Size: 1448, HdrLen: 66, NeedsCsum: true, CsumStart: 34, CsumOffset: 16}
	super := ethFrame(40000, 0x5a)
	small := ethFrame(60, 0x11)
	partial := GSO{NeedsCsum: true, CsumStart: 34, CsumOffset: 16}
	tests := []struct {
		name      string
		frames    []testFrame
		wantGSO   []GSO
		wantDrops dropCounts
	}{
		{
			name:    "superframe and plain frames",
			frames:  []testFrame{{data: small, vnet: vnetBytes(GSO{})}, {data: super, vnet: vnetBytes(tcp4), status: tpStatusCsumNotReady}, {data: small, vnet: vnetBytes(partial), status: tpStatusCsumNotReady}},
			wantGSO: []GSO{{}, tcp4, partial},
		},
		{
			name:    "largest superframe",
			frames:  []testFrame{{data: ethFrame(MaxGSOFrameLen, 1), vnet: vnetBytes(tcp4), status: tpStatusCsumNotReady}},
			wantGSO: []GSO{tcp4},
		},
		{
			name:      "superframe too long",
			frames:    []testFrame{{data: ethFrame(MaxGSOFrameLen+1, 1), vnet: vnetBytes(tcp4)}, {data: small, vnet: vnetBytes(GSO{})}},
			wantGSO:   []GSO{{}},
			wantDrops: dropCounts{dropOversize: 1},
		},
		{
			name:      "plain frame too long",
			frames:    []testFrame{{data: ethFrame(maxLen+1, 1), vnet: vnetBytes(GSO{})}},
			wantDrops: dropCounts{dropOversize: 1},
		},
		{
			name: "bad and unsupported headers",
			frames: []testFrame{
				{data: super, vnet: mustHexF("0101 4200 0000 2200 1000")}, // size 0
				{data: small, vnet: mustHexF("0100 0000 0000 3000 1000")}, // csum past the end
				{data: super, vnet: mustHexF("0103 2a00 b004 2200 0600")}, // UFO
				{data: small, vnet: vnetBytes(GSO{})},
			},
			wantGSO:   []GSO{{}},
			wantDrops: dropCounts{dropVnetHdr: 2, dropGSOUnsupported: 1},
		},
		{
			name:      "no room for the header",
			frames:    []testFrame{{data: small, mac: frameHdrLen + VnetHdrLen - 1}},
			wantDrops: dropCounts{dropMalformed: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			size := RingBlockSize
			b := buildBlock(size, tt.frames)
			var drops dropCounts
			got := parseBlock(b, make([]Frame, 0, maxFramesPerBlock(size)), maxLen, true, &drops)
			if drops != tt.wantDrops {
				t.Errorf("drops = %v, want %v", drops, tt.wantDrops)
			}
			if len(got) != len(tt.wantGSO) {
				t.Fatalf("parseBlock() = %d frames, want %d", len(got), len(tt.wantGSO))
			}
			for i, f := range got {
				if f.GSO != tt.wantGSO[i] {
					t.Errorf("frame %d GSO = %+v, want %+v", i, f.GSO, tt.wantGSO[i])
				}
				if f.GSO.NeedsCsum != f.CsumPartial {
					t.Errorf("frame %d: NeedsCsum %v but CsumPartial %v", i, f.GSO.NeedsCsum, f.CsumPartial)
				}
			}
		})
	}
	// Without vnet headers the same superframe is oversize, whatever the
	// bytes before it say.
	var drops dropCounts
	b := buildBlock(RingBlockSize, []testFrame{{data: super, vnet: vnetBytes(tcp4)}})
	if got := parseBlock(b, make([]Frame, 0, 8), maxLen, false, &drops); len(got) != 0 || drops != (dropCounts{dropOversize: 1}) {
		t.Errorf("without vnet: %d frames, drops %v; want none and one oversize", len(got), drops)
	}
}

func TestParseBlockFullBlockCapacity(t *testing.T) {
	// A block packed with minimum-size frames fits in maxFramesPerBlock.
	var tf []testFrame
	for range 60 {
		tf = append(tf, testFrame{data: ethFrame(EthernetHeaderLen, 1), mac: frameHdrLen + RingHeadroom})
	}
	const stride = (frameHdrLen + RingHeadroom + EthernetHeaderLen + 15) &^ 15
	b := buildBlock(blockDescLen+60*stride, tf)
	var drops dropCounts
	got := parseBlock(b, make([]Frame, 0, maxFramesPerBlock(len(b))), 1522, false, &drops)
	if len(got) != 60 || drops != (dropCounts{}) {
		t.Fatalf("parseBlock() = %d frames, drops %v; want 60, none", len(got), drops)
	}
}

func benchBlock() []byte {
	var tf []testFrame
	for i := range 150 {
		tf = append(tf, testFrame{data: ethFrame(64+(i%24)*60, byte(i)), status: tpStatusCsumValid})
	}
	return buildBlock(RingBlockSize, tf)
}

func TestParseBlockAllocs(t *testing.T) {
	b := benchBlock()
	frames := make([]Frame, 0, maxFramesPerBlock(len(b)))
	var drops dropCounts
	allocs := testing.AllocsPerRun(100, func() {
		frames = parseBlock(b, frames, 1522, false, &drops)
	})
	if allocs != 0 {
		t.Errorf("parseBlock allocs = %v, want 0", allocs)
	}
	if len(frames) != 150 {
		t.Errorf("parseBlock() = %d frames, want 150", len(frames))
	}
	// With vnet headers: superframes and plain frames, each header decoded.
	tcp4 := vnetBytes(GSO{Type: GSOTCPv4, Size: 1448, HdrLen: 66, NeedsCsum: true, CsumStart: 34, CsumOffset: 16})
	vb := buildBlock(RingBlockSize, []testFrame{
		{data: ethFrame(65000, 1), vnet: tcp4, status: tpStatusCsumNotReady},
		{data: ethFrame(1514, 2), vnet: vnetBytes(GSO{})},
		{data: ethFrame(65000, 3), vnet: tcp4, status: tpStatusCsumNotReady},
	})
	allocs = testing.AllocsPerRun(100, func() {
		frames = parseBlock(vb, frames, 1522, true, &drops)
	})
	if allocs != 0 || len(frames) != 3 || frames[0].GSO.Type != GSOTCPv4 {
		t.Errorf("parseBlock with vnet headers: %v allocs, %d frames (first %+v), want 0, 3 and a superframe", allocs, len(frames), frames[0].GSO)
	}
}

func BenchmarkParseBlock(b *testing.B) {
	blk := benchBlock()
	frames := make([]Frame, 0, maxFramesPerBlock(len(blk)))
	var drops dropCounts
	var c counters
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		frames = parseBlock(blk, frames, 1522, false, &drops)
		// Per-batch bookkeeping as the receive loop does it.
		var bytes uint64
		for i := range frames {
			bytes += uint64(len(frames[i].Data))
		}
		c.rxPackets.Add(uint64(len(frames)))
		c.rxBytes.Add(bytes)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(frames)), "ns/frame")
}

func FuzzParseBlock(f *testing.F) {
	small := ethFrame(60, 0xbb)
	f.Add(buildBlock(4096, []testFrame{{data: small}, {data: ethFrame(1514, 1)}}), 1522)
	f.Add(buildBlock(4096, []testFrame{{data: small, status: tpStatusVLANValid, tci: 5}, {data: small, wireLen: 900}}), 1522)
	f.Add(buildBlock(512, []testFrame{{data: small, next: 16}, {data: small}}), 100)
	f.Add(buildBlock(256, []testFrame{{data: small, mac: 3}}), 1522)
	f.Add(make([]byte, 48), 1522)
	f.Add([]byte{}, 0)
	f.Add(buildBlock(1<<17, []testFrame{{data: ethFrame(70000, 2), vnet: mustHexF("0101 4200 a805 2200 1000")}}), -1)
	f.Fuzz(func(t *testing.T, block []byte, maxLen int) {
		// A negative maxLen stands for vnet headers on and |maxLen|-1.
		vnet := maxLen < 0
		if vnet {
			maxLen = -maxLen - 1
		}
		frames := make([]Frame, 0, maxFramesPerBlock(len(block)))
		var drops dropCounts
		got := parseBlock(block, frames, maxLen, vnet, &drops)
		var dropped uint64
		for _, n := range drops {
			dropped += n
		}
		if len(block) >= blockDescLen {
			if n := uint64(le.Uint32(block[bdNumPkts:])); uint64(len(got))+dropped > n && !(n == 0 && dropped == 0) {
				t.Fatalf("delivered %d + dropped %d > num_pkts %d", len(got), dropped, n)
			}
		} else if len(got) != 0 || dropped != 1 {
			t.Fatalf("short block: delivered %d, dropped %d; want 0, 1", len(got), dropped)
		}
		for i, fr := range got {
			limit := maxLen
			if fr.GSO.Type != GSONone {
				limit = MaxGSOFrameLen
			}
			if !vnet && fr.GSO != (GSO{}) {
				t.Fatalf("frame %d: GSO %+v without vnet headers", i, fr.GSO)
			}
			if len(fr.Data) < EthernetHeaderLen || fr.WireLen != len(fr.Data) || fr.WireLen > limit {
				t.Fatalf("frame %d: len %d WireLen %d maxLen %d", i, len(fr.Data), fr.WireLen, maxLen)
			}
			if len(block) == 0 || cap(fr.Data) == 0 {
				continue
			}
			// Data must alias the block.
			if !within(block, fr.Data) {
				t.Fatalf("frame %d data outside block", i)
			}
		}
	})
}

// within reports whether s lies inside b.
func within(b, s []byte) bool {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return p >= base && p+uintptr(len(s)) <= base+uintptr(len(b))
}
