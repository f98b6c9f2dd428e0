//go:build !race

package shmport

func raceRelease() {}
func raceAcquire() {}
