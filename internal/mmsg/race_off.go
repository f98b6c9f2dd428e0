//go:build !race

package mmsg

func raceRelease() {}
func raceAcquire() {}
