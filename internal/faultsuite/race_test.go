//go:build race

package faultsuite

// raceEnabled scales the suite down under the race detector.
const raceEnabled = true
