//go:build race

package mmsg

import "sync/atomic"

// The race detector takes a write(2) and a later read(2) as a
// happens-before edge (package syscall marks them), but not the raw
// sendmmsg and recvmmsg here, so a frame's sender and receiver would
// look unsynchronised. The edge is repeated on a heap word it does see:
// released before a batch is sent, acquired after one is received. Only
// in race builds.
var raceSync atomic.Uint64

func raceRelease() { raceSync.Add(1) }
func raceAcquire() { raceSync.Load() }
