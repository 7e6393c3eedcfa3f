//go:build !race

package wireguard

// raceEnabled: see race_on_test.go.
const raceEnabled = false
