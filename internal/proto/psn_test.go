package proto

import (
	"testing"
	"testing/quick"
)

// refDiff is the reference signed distance: the representative of
// (a-b) mod 2^24 in [-2^23, 2^23), computed with plain integer arithmetic.
func refDiff(a, b uint32) int64 {
	d := (int64(a&PSNMask) - int64(b&PSNMask)) % PSNModulus
	if d < 0 {
		d += PSNModulus
	}
	if d >= PSNHalfWindow {
		d -= PSNModulus
	}
	return d
}

func TestPSNTable(t *testing.T) {
	tests := []struct {
		a, b PSN
		diff int32
	}{
		{0, 0, 0},
		{1, 0, 1},
		{0, 1, -1},
		{0, 0xFFFFFF, 1},
		{0xFFFFFF, 0, -1},
		{0x7FFFFF, 0, 0x7FFFFF},
		{0x800000, 0, -0x800000},
		{5, 0xFFFFFA, 11},
	}
	for _, tc := range tests {
		if got := tc.a.Diff(tc.b); got != tc.diff {
			t.Errorf("%#x.Diff(%#x) = %d, want %d", tc.a, tc.b, got, tc.diff)
		}
	}
	if got := PSN(0xFFFFFF).Next(); got != 0 {
		t.Errorf("Next wraps to %#x", got)
	}
	if got := PSN(2).Add(-5); got != 0xFFFFFD {
		t.Errorf("Add(-5) = %#x", got)
	}
	if !PSN(1).InWindow(0xFFFFFF, 3) || PSN(2).InWindow(0xFFFFFF, 3) {
		t.Error("InWindow across the wrap")
	}
	if PSN(5).InWindow(5, 0) || PSN(5).InWindow(5, -1) || !PSN(4).InWindow(5, 1<<30) {
		t.Error("InWindow with an empty, negative or oversized window")
	}
}

func TestPSNProperties(t *testing.T) {
	cfg := &quick.Config{MaxCount: 20000}
	diff := func(a, b uint32) bool {
		return int64(PSN(a&PSNMask).Diff(PSN(b&PSNMask))) == refDiff(a, b)
	}
	if err := quick.Check(diff, cfg); err != nil {
		t.Error("Diff:", err)
	}
	add := func(a uint32, n int32) bool {
		got := PSN(a & PSNMask).Add(int(n))
		want := (int64(a&PSNMask) + int64(n)) % PSNModulus
		if want < 0 {
			want += PSNModulus
		}
		return int64(got) == want
	}
	if err := quick.Check(add, cfg); err != nil {
		t.Error("Add:", err)
	}
	order := func(a, b uint32) bool {
		p, q := PSN(a&PSNMask), PSN(b&PSNMask)
		d := refDiff(a, b)
		return p.Before(q) == (d < 0) && p.After(q) == (d > 0) &&
			p.Compare(q) == -q.Compare(p) || d == -PSNHalfWindow
	}
	if err := quick.Check(order, cfg); err != nil {
		t.Error("ordering:", err)
	}
	addThenDiff := func(a uint32, n int32) bool {
		n %= PSNHalfWindow
		p := PSN(a & PSNMask)
		return p.Add(int(n)).Diff(p) == n
	}
	if err := quick.Check(addThenDiff, cfg); err != nil {
		t.Error("Add/Diff inverse:", err)
	}
	window := func(start uint32, off uint32, n uint16) bool {
		s := PSN(start & PSNMask)
		p := s.Add(int(off % (1 << 20)))
		return p.InWindow(s, int(n)) == (off%(1<<20) < uint32(n))
	}
	if err := quick.Check(window, cfg); err != nil {
		t.Error("InWindow:", err)
	}
}
