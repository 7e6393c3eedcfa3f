//go:build race

package config

// raceSlowdown scales time limits: the race detector makes yaml.v3 ~12
// times slower.
const raceSlowdown = 12
