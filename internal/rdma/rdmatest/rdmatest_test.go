package rdmatest

import (
	"bytes"
	"testing"
)

type sink struct{ frames [][]byte }

func (s *sink) Deliver(f []byte) { s.frames = append(s.frames, append([]byte(nil), f...)) }

func roceFrame(i byte) []byte {
	f := make([]byte, 14+20+8+12+16+4)
	f[12], f[13] = 0x08, 0x00
	f[14] = 0x45
	f[len(f)-5] = i
	return f
}

func TestLinkFaults(t *testing.T) {
	for _, c := range []struct {
		name string
		f    Faults
		want func(st LinkStats, got [][]byte) bool
	}{
		{"clean", Faults{}, func(st LinkStats, got [][]byte) bool {
			return len(got) == 100 && st.Delivered == 100 && got[7][len(got[7])-5] == 7
		}},
		{"drop all", Faults{Drop: 1}, func(st LinkStats, got [][]byte) bool { return len(got) == 0 && st.Dropped == 100 }},
		{"duplicate all", Faults{Duplicate: 1}, func(st LinkStats, got [][]byte) bool { return len(got) == 200 }},
		{"corrupt all", Faults{Corrupt: 1}, func(st LinkStats, got [][]byte) bool {
			for i, g := range got {
				want := roceFrame(byte(i))
				// Exactly one bit differs, after the BTH.
				if !bytes.Equal(g[:54], want[:54]) || bytes.Equal(g, want) {
					return false
				}
			}
			return st.Corrupted == 100
		}},
		{"reorder", Faults{Reorder: 0.5}, func(st LinkStats, got [][]byte) bool {
			inOrder := true
			for i, g := range got {
				inOrder = inOrder && g[len(g)-5] == byte(i)
			}
			return len(got) == 100 && !inOrder && st.Reordered > 0
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := NewLink(1, c.f)
			s := &sink{}
			l.Connect(nil, s)
			for i := range 100 {
				l.A().Send(roceFrame(byte(i)))
			}
			l.Flush()
			ab, _ := l.Stats()
			if !c.want(ab, s.frames) {
				t.Fatalf("stats %+v, %d frames", ab, len(s.frames))
			}
		})
	}
}
