package cmdutil

import "testing"

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"1": 1, "4096": 4096, "4K": 4 << 10, "4kb": 4 << 10, "4KiB": 4 << 10,
		"16M": 16 << 20, "2G": 2 << 30, "1024g": 1 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1", "1T", "lots", "1.5G", "18446744073709551615K"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
