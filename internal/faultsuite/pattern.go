package faultsuite

import "encoding/binary"

// fillPattern writes the xorshift pattern of seed into b: every (stream,
// op) has its own, so data that lands in the wrong place, twice or from
// the wrong op shows.
func fillPattern(b []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 0x2545F4914F6CDD1D
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	for ; i < len(b); i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

// diffPattern returns the first byte of b that differs from the pattern of
// seed, with its value and the pattern's, or -1.
func diffPattern(b []byte, seed uint64) (int, byte, byte) {
	x := seed*0x9E3779B97F4A7C15 + 0x2545F4914F6CDD1D
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
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
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if b[i] != byte(x) {
			return i, b[i], byte(x)
		}
	}
	return -1, 0, 0
}

// complement inverts every byte of b: the poison that differs from the
// expected data in every byte.
func complement(b []byte) {
	for i := range b {
		b[i] = ^b[i]
	}
}
