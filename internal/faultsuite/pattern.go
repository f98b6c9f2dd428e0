package faultsuite

import "github.com/PacketFive/hinic/internal/pattern"

// fillPattern and diffPattern are package pattern's: every (stream, op)
// has its own seed.
func fillPattern(b []byte, seed uint64) { pattern.Fill(b, seed) }

func diffPattern(b []byte, seed uint64) (int, byte, byte) { return pattern.Diff(b, seed) }

// complement inverts every byte of b: the poison that differs from the
// expected data in every byte.
func complement(b []byte) {
	for i := range b {
		b[i] = ^b[i]
	}
}
