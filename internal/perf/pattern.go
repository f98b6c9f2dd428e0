package perf

import (
	"hash/crc32"

	"github.com/PacketFive/hinic/internal/pattern"
)

// fillPattern writes the pattern of seed (package pattern) into b, so
// that a receiver can tell every message (and every byte of it) apart.
func fillPattern(b []byte, seed uint64) { pattern.Fill(b, seed) }

// patternCRC is the CRC-32 of n bytes of the pattern for seed.
func patternCRC(n int, seed uint64) uint32 {
	b := make([]byte, n)
	fillPattern(b, seed)
	return crc32.ChecksumIEEE(b)
}
