//go:build race

package stack

// raceEnabled: built with -race, where sync.Pool drops a quarter of what
// is put back (on purpose, to shake out reuse bugs), so a path that takes
// many pooled buffers per call allocates.
const raceEnabled = true
