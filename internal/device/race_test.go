//go:build race

package device_test

// raceEnabled skips allocation tests: the race detector allocates.
const raceEnabled = true
