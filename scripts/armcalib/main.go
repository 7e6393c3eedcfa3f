// Command armcalib is the known answer for scripts/armproj.sh: spin(n)
// executes exactly 5n+3 ARM instructions (spin_arm.s), so a trace that
// gives one line per executed instruction shows exactly that many lines
// in main.spin, between its call from main.main and the return.
//
//	CGO_ENABLED=0 GOARCH=arm GOARM=7 go build -o armcalib ./scripts/armcalib
//	qemu-arm-static -singlestep -d nochain,exec -D /dev/stdout ./armcalib 1000
package main

import (
	"fmt"
	"os"
	"strconv"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: armcalib N (runs 5N+3 instructions in main.spin)")
		os.Exit(2)
	}
	n, err := strconv.ParseUint(os.Args[1], 10, 32)
	if err != nil || n == 0 {
		fmt.Fprintf(os.Stderr, "armcalib: N must be a positive 32-bit number, not %q\n", os.Args[1])
		os.Exit(2)
	}
	spin(uint32(n))
	fmt.Printf("spin %d: %d instructions\n", n, 5*n+3)
}
