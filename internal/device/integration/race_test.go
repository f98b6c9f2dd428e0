//go:build race

package integration

// raceEnabled skips allocation tests: the race detector allocates.
const raceEnabled = true
