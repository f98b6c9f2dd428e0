// Package pattern is the data the workloads and the fault suite move: a
// xorshift stream per seed, so that a receiver can tell every message, and
// every byte of it, apart, and data that lands in the wrong place, twice
// or from another message shows.
package pattern

import "encoding/binary"

// Fill writes the pattern of seed into b.
func Fill(b []byte, seed uint64) {
	x := start(seed)
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x = next(x)
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	for ; i < len(b); i++ {
		x = next(x)
		b[i] = byte(x)
	}
}

// Diff returns the first byte of b that differs from the pattern of seed,
// with its value and the pattern's, or -1.
func Diff(b []byte, seed uint64) (int, byte, byte) {
	x := start(seed)
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x = next(x)
		if w := binary.LittleEndian.Uint64(b[i:]); w != x {
			var want [8]byte
			binary.LittleEndian.PutUint64(want[:], x)
			for j := range want {
				if b[i+j] != want[j] {
					return i + j, b[i+j], want[j]
				}
			}
		}
	}
	for ; i < len(b); i++ {
		x = next(x)
		if b[i] != byte(x) {
			return i, b[i], byte(x)
		}
	}
	return -1, 0, 0
}

func start(seed uint64) uint64 { return seed*0x9E3779B97F4A7C15 + 0x2545F4914F6CDD1D }

func next(x uint64) uint64 {
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	return x
}
