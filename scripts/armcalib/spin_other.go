//go:build !arm

package main

// spin is a plain loop off ARM, where no instruction count is promised.
func spin(n uint32) {
	for n > 0 {
		n--
	}
}
