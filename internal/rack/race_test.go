//go:build race

package rack

// raceEnabled scales long tests down under the race detector.
const raceEnabled = true
