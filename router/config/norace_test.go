//go:build !race

package config

const raceSlowdown = 1
