package perf

import (
	"encoding/binary"
	"hash/crc32"
)

// fillPattern writes a pseudo-random pattern derived from seed into b, so
// that a receiver can tell every message (and every byte of it) apart.
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

// patternCRC is the CRC-32 of n bytes of the pattern for seed.
func patternCRC(n int, seed uint64) uint32 {
	b := make([]byte, n)
	fillPattern(b, seed)
	return crc32.ChecksumIEEE(b)
}
