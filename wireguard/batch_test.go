package wireguard

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// fakeBatchConn is a BatchReader that returns its datagrams, all of
// them, to every read, each from its own source.
type fakeBatchConn struct {
	fakeConn
	dgrams [][]byte
	from   []netip.AddrPort
}

func (c *fakeBatchConn) ReadBatchUDPAddrPort(bufs [][]byte, sizes []int, addrs []netip.AddrPort) (int, error) {
	n := 0
	for ; n < len(bufs) && n < len(c.dgrams); n++ {
		sizes[n] = copy(bufs[n], c.dgrams[n])
		addrs[n] = c.from[n]
	}
	return n, nil
}

func transport(size int) []byte {
	p := make([]byte, size)
	p[0] = msgTransport
	return p
}

// TestBindReceiveBatch: a socket that hands over several datagrams per
// read (stack.UDPConn's ReadBatchUDPAddrPort) gives the device all of
// them in one receive call, each with its source's Endpoint; refused
// ones keep their slot with size 0 (the device skips those) and are
// counted; the batch costs no allocation once its sources are known.
func TestBindReceiveBatch(t *testing.T) {
	fc := &fakeBatchConn{
		dgrams: [][]byte{transport(200), []byte("junk"), transport(1440), append([]byte{0xde, 0xad}, make([]byte, 60)...), transport(100)},
	}
	for i := range fc.dgrams {
		fc.from = append(fc.from, netip.AddrPortFrom(netip.MustParseAddr("198.51.100.7"), uint16(51820+i)))
	}
	b, fns := openUDP4Bind(t, fc)
	defer b.Close()
	bufs, sizes, eps := make([][]byte, b.BatchSize()), make([]int, b.BatchSize()), make([]conn.Endpoint, b.BatchSize())
	for i := range bufs {
		bufs[i] = make([]byte, 1500)
	}
	n, err := fns[0](bufs, sizes, eps)
	if err != nil || n != 5 {
		t.Fatalf("receive = %d, %v; want the batch of 5", n, err)
	}
	for i, want := range []int{200, 0, 1440, 0, 100} {
		if sizes[i] != want {
			t.Errorf("sizes[%d] = %d, want %d", i, sizes[i], want)
		}
		if want != 0 && eps[i].DstToString() != fc.from[i].String() {
			t.Errorf("eps[%d] = %v, want %v", i, eps[i], fc.from[i])
		}
	}
	if got := b.Stats.RxTransport.Load(); got != 3 {
		t.Errorf("RxTransport = %d, want 3", got)
	}
	if got := b.Stats.RxShort.Load() + b.Stats.RxUnknownType.Load(); got != 2 {
		t.Errorf("RxShort + RxUnknownType = %d, want 2", got)
	}
	if got := b.Stats.RxBatches.Load(); got != 1 {
		t.Errorf("RxBatches = %d, want 1", got)
	}
	if got := testing.AllocsPerRun(1000, func() { fns[0](bufs, sizes, eps) }); got != 0 {
		t.Errorf("receive: %v allocations per batch of %d, want 0", got, len(fc.dgrams))
	}
}

// TestBindReceiveBatchAllRefused: a batch with nothing worth the
// device's time is not handed to it; the receive function reads on.
func TestBindReceiveBatchAllRefused(t *testing.T) {
	good := &fakeBatchConn{dgrams: [][]byte{transport(64)}, from: []netip.AddrPort{netip.MustParseAddrPort("198.51.100.7:1")}}
	junk := &fakeBatchConn{dgrams: [][]byte{[]byte("x"), []byte("y")}, from: good.from[:1:1]}
	junk.from = append(junk.from, good.from[0])
	reads := 0
	c := &switchConn{first: junk, then: good, reads: &reads}
	b, fns := openUDP4Bind(t, c)
	bufs, sizes, eps := [][]byte{make([]byte, 1500), make([]byte, 1500)}, make([]int, 2), make([]conn.Endpoint, 2)
	n, err := fns[0](bufs, sizes, eps)
	if err != nil || n != 1 || sizes[0] != 64 || reads != 2 {
		t.Fatalf("receive = %d (sizes %v), %v after %d reads; want the good datagram from the second read", n, sizes, err, reads)
	}
	if got := b.Stats.RxShort.Load(); got != 2 {
		t.Errorf("RxShort = %d, want 2", got)
	}
}

// switchConn reads from first once, then from then.
type switchConn struct {
	fakeConn
	first, then *fakeBatchConn
	reads       *int
}

func (c *switchConn) ReadBatchUDPAddrPort(bufs [][]byte, sizes []int, addrs []netip.AddrPort) (int, error) {
	*c.reads++
	if *c.reads == 1 {
		return c.first.ReadBatchUDPAddrPort(bufs, sizes, addrs)
	}
	return c.then.ReadBatchUDPAddrPort(bufs, sizes, addrs)
}

// TestTUNBackPressure: with the device's reader behind (the queue full),
// the router's own packet waits for room instead of being dropped
// (TxParked) and goes in once Read takes a batch; a forwarded packet is
// dropped at once (TxQueueFull), as a router's queue drops; a packet
// of the router's own that finds no room within maxPark is dropped too.
func TestTUNBackPressure(t *testing.T) {
	tn := NewTUN("wg0", 0)
	defer tn.Device().Close()
	packet := func(forwarded bool) stack.PacketBufferList {
		ip := make([]byte, 100)
		ip[0] = 0x45
		p := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: bufferOf(ip)})
		p.NetworkPacketInfo.IsForwardedPacket = forwarded
		var l stack.PacketBufferList
		l.PushBack(p)
		return l
	}
	for range txQueueLen {
		l := packet(false)
		tn.WritePackets(l)
		l.DecRef()
	}
	if got := tn.Stats.TxParked.Load() + tn.Stats.TxQueueFull.Load(); got != 0 {
		t.Fatalf("filling the queue: %d parked or dropped, want 0", got)
	}
	fwd := packet(true)
	tn.WritePackets(fwd)
	fwd.DecRef()
	if got := tn.Stats.TxQueueFull.Load(); got != 1 {
		t.Errorf("a forwarded packet into the full queue: TxQueueFull = %d, want 1", got)
	}

	wrote := make(chan struct{})
	go func() {
		l := packet(false)
		tn.WritePackets(l)
		l.DecRef()
		close(wrote)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for tn.Stats.TxParked.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	bufs, sizes := make([][]byte, tn.BatchSize()), make([]int, tn.BatchSize())
	for i := range bufs {
		bufs[i] = make([]byte, 2000)
	}
	if n, err := tn.Read(bufs, sizes, 16); err != nil || n != tn.BatchSize() {
		t.Fatalf("Read = %d, %v; want a full batch of %d", n, err, tn.BatchSize())
	}
	<-wrote
	if p, d := tn.Stats.TxParked.Load(), tn.Stats.TxQueueFull.Load(); p != 1 || d != 1 {
		t.Errorf("the router's own packet into the full queue: TxParked = %d, TxQueueFull = %d; want 1 (it waited and got in) and 1 (the forwarded one)", p, d)
	}
	total := 0
	for total < txQueueLen-tn.BatchSize()+1 {
		n, err := tn.Read(bufs, sizes, 16)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != txQueueLen-tn.BatchSize()+1 {
		t.Errorf("read %d more packets, want %d: the parked one is lost", total, txQueueLen-tn.BatchSize()+1)
	}

	for range txQueueLen {
		l := packet(false)
		tn.WritePackets(l)
		l.DecRef()
	}
	start := time.Now()
	l := packet(false)
	tn.WritePackets(l)
	l.DecRef()
	if waited := time.Since(start); waited < maxPark || waited > maxPark+time.Second {
		t.Errorf("a packet of the router's own with no reader returned after %v, want about maxPark (%v)", waited, maxPark)
	}
	if d := tn.Stats.TxQueueFull.Load(); d != 2 {
		t.Errorf("after maxPark with no reader: TxQueueFull = %d, want 2", d)
	}

	// A wait costs no allocation (park's timers are pooled): park
	// directly, with a reader taking the packets.
	stop := make(chan struct{})
	read := make(chan struct{})
	go func() {
		defer close(read)
		for {
			select {
			case <-stop:
				return
			case q := <-tn.tx:
				q.pkt.DecRef()
			}
		}
	}()
	pl := packet(false)
	defer pl.DecRef()
	pkt := pl.AsSlice()[0]
	if got := testing.AllocsPerRun(200, func() {
		pkt.IncRef()
		if !tn.park(queued{pkt: pkt}) {
			pkt.DecRef()
		}
	}); got != 0 && !raceEnabled { // -race: sync.Pool drops some timers
		t.Errorf("park: %v allocations per packet, want 0", got)
	}
	close(stop)
	<-read
}

// batchDispatcher records deliveries and the Batcher brackets around them.
type batchDispatcher struct {
	nopDispatcher
	events []string
}

func (d *batchDispatcher) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {
	d.events = append(d.events, "packet")
}
func (d *batchDispatcher) BeginBatch() { d.events = append(d.events, "begin") }
func (d *batchDispatcher) EndBatch()   { d.events = append(d.events, "end") }

// batchWriter records the batches sent through it.
type batchWriter struct {
	fakeConn
	batches []int
}

func (c *batchWriter) WriteBatchToUDPAddrPort(bufs [][]byte, _ netip.AddrPort) (int, error) {
	c.batches = append(c.batches, len(bufs))
	return len(bufs), nil
}

// TestBatchedWrites: the device's batch of decrypted packets reaches
// netstack inside one Begin/EndBatch bracket (so what netstack forwards
// out of it leaves in one write per interface), and its batch of
// encrypted datagrams goes to a BatchWriter socket in one call; neither
// allocates.
func TestBatchedWrites(t *testing.T) {
	tn := NewTUN("wg0", 0)
	d := &batchDispatcher{}
	tn.Attach(d)
	ip := make([]byte, 100)
	ip[0] = 0x45
	wbufs := [][]byte{append(make([]byte, 16), ip...), append(make([]byte, 16), ip...), append(make([]byte, 16), ip...)}
	tn.Write(wbufs, 16)
	if got := strings.Join(d.events, " "); got != "begin packet packet packet end" {
		t.Errorf("deliveries of a batch of 3: %q, want one bracket around the three", got)
	}

	bw := &batchWriter{}
	b, _ := openUDP4Bind(t, bw)
	ep, err := b.ParseEndpoint("198.51.100.7:51820")
	if err != nil {
		t.Fatal(err)
	}
	out := [][]byte{transport(100), transport(100), transport(100), transport(100)}
	if err := b.Send(out, ep); err != nil || len(bw.batches) != 1 || bw.batches[0] != 4 || b.Stats.TxDatagrams.Load() != 4 {
		t.Errorf("Send of 4: %v, batches %v, TxDatagrams %d; want one batch of 4", err, bw.batches, b.Stats.TxDatagrams.Load())
	}
	bw.batches = bw.batches[:0:cap(bw.batches)]
	if got := testing.AllocsPerRun(100, func() {
		bw.batches = bw.batches[:0]
		b.Send(out, ep)
	}); got != 0 {
		t.Errorf("Send to a BatchWriter: %v allocations per batch, want 0", got)
	}
	d.events = make([]string, 0, 1<<20)
	if got := testing.AllocsPerRun(100, func() { tn.Write(wbufs, 16) }); got != 0 && !raceEnabled {
		t.Errorf("Write with a Batcher: %v allocations per batch, want 0", got)
	}
}
