package stack

import (
	"net/netip"
	"testing"
)

// BenchmarkUDPWriteBatch: a WireGuard Bind's send of one batch of 64
// encrypted datagrams (1440 B) to one peer, per datagram.
func BenchmarkUDPWriteBatch(b *testing.B) {
	l := newLabWith(b, nil, nil)
	c, err := l.r.ListenUDPConn(netip.AddrPortFrom(lanIP4, 51820))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	to := netip.MustParseAddrPort("10.1.0.2:4000") // no socket there: host A drops them
	bufs := make([][]byte, 64)
	for i := range bufs {
		bufs[i] = make([]byte, 1440)
	}
	c.WriteToUDPAddrPort(bufs[0], to)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(bufs) {
		if _, err := c.WriteBatchToUDPAddrPort(bufs, to); err != nil {
			b.Fatal(err)
		}
	}
}
