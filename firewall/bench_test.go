package firewall

import (
	"net/netip"
	"strconv"
	"testing"
)

// BenchmarkEval measures deciding one new lan-to-wan flow against the
// test policy with 0 and 1,000 extra block rules in its chain.
//
// "hosts" is 1,000 rules of one source address each and no port, which
// the index cannot skip.
func BenchmarkEval(b *testing.B) {
	for _, n := range []int{0, 1000, -1000} {
		name := strconv.Itoa(n) + "rules"
		p := bigPolicy(n)
		if n < 0 {
			name, p = "1000hosts", bigPolicy(0)
			var extra []Rule
			for i := 0; i < 1000; i++ {
				extra = append(extra, Rule{Name: "block", Src: "lan", Dest: "wan", Target: Drop,
					SrcAddrs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(9 + i>>8), byte(i)}), 32)}})
			}
			p.Rules = append(extra, p.Rules...)
		}
		b.Run(name, func(b *testing.B) {
			rs, err := Compile(p)
			if err != nil {
				b.Fatal(err)
			}
			f := flow(lanIf, wanIf, 6, "192.168.1.10", "198.51.100.9", 4000, 10500)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if rs.Eval(&f, 1).Target != Accept {
					b.Fatal("refused")
				}
			}
		})
	}
}
