//go:build race

package wireguard

// raceEnabled: under -race sync.Pool drops a share of what is put in it
// at random, so gVisor's pooled packet buffers allocate now and then.
const raceEnabled = true
