package pattern

import "testing"

func TestFillAndDiff(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 4096, 4099} {
		b := make([]byte, n)
		Fill(b, 42)
		if i, _, _ := Diff(b, 42); i != -1 {
			t.Fatalf("%d bytes: differs at %d from itself", n, i)
		}
		if n == 0 {
			continue
		}
		if i, _, _ := Diff(b, 43); i == -1 {
			t.Fatalf("%d bytes: seeds 42 and 43 give the same pattern", n)
		}
		b[n-1] ^= 1
		if i, got, want := Diff(b, 42); i != n-1 || got^want != 1 {
			t.Fatalf("%d bytes: a flipped last byte found at %d (%#x vs %#x)", n, i, got, want)
		}
	}
}
