//go:build arm

package main

// spin loops n times (n > 0). It is spin_arm.s: two instructions of
// set-up, five per iteration (one of them conditional and never executed,
// which a trace must still count, as the CPU issues it) and the return.
func spin(n uint32)
