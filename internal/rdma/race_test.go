//go:build race

package rdma_test

// raceEnabled scales long tests down under the race detector.
const raceEnabled = true
