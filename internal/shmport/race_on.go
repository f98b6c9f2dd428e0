//go:build race

package shmport

import "sync/atomic"

// The race detector does not see atomics on memory outside Go's heap,
// such as the mapped rings, so the happens-before edges of the ring
// indices are repeated on a heap word it does see. Only in race builds.
var raceSync atomic.Uint64

func raceRelease() { raceSync.Add(1) }
func raceAcquire() { raceSync.Load() }
