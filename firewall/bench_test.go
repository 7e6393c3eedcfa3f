package firewall

import (
	"strconv"
	"testing"
)

// BenchmarkEval measures deciding one new lan-to-wan flow against the
// test policy with 0 and 1,000 extra block rules in its chain.
func BenchmarkEval(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(strconv.Itoa(n)+"rules", func(b *testing.B) {
			rs, err := Compile(bigPolicy(n))
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
