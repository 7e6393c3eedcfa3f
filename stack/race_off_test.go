//go:build !race

package stack

// raceEnabled: see race_on_test.go.
const raceEnabled = false
