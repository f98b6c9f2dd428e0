package fabric

import (
	"fmt"
	"strconv"
	"strings"
)

// ByteSize is a size in bytes. In a config file it is an integer or a
// string with a unit: "64KiB", "1MiB", "9000", "1.5MB".
type ByteSize int64

// BitRate is a link speed in bits per second. In a config file it is an
// integer or a string with a unit: "100G", "25Gbps", "10M".
type BitRate int64

var byteUnits = []struct {
	suffix string
	mult   float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
	{"b", 1},
}

// UnmarshalText parses a size such as "64KiB".
func (s *ByteSize) UnmarshalText(text []byte) error {
	v, err := parseWithUnits(string(text), byteUnits)
	if err != nil {
		return fmt.Errorf("invalid size %q: %w (write for example 65536, 64KiB or 1MiB)", text, err)
	}
	*s = ByteSize(v)
	return nil
}

// String formats the size with the largest binary unit that divides it.
func (s ByteSize) String() string {
	switch {
	case s != 0 && s%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", s>>30)
	case s != 0 && s%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", s>>20)
	case s != 0 && s%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", s>>10)
	}
	return strconv.FormatInt(int64(s), 10)
}

var rateUnits = []struct {
	suffix string
	mult   float64
}{
	{"gbps", 1e9}, {"mbps", 1e6}, {"kbps", 1e3}, {"tbps", 1e12},
	{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3},
	{"g", 1e9}, {"m", 1e6}, {"k", 1e3}, {"t", 1e12},
	{"bps", 1},
}

// UnmarshalText parses a rate such as "100G".
func (r *BitRate) UnmarshalText(text []byte) error {
	v, err := parseWithUnits(string(text), rateUnits)
	if err != nil {
		return fmt.Errorf("invalid speed %q: %w (write for example 100G or 25Gbps)", text, err)
	}
	*r = BitRate(v)
	return nil
}

// String formats the rate as "100G", "10M" or bits per second.
func (r BitRate) String() string {
	switch {
	case r != 0 && r%1e9 == 0:
		return fmt.Sprintf("%dG", r/1e9)
	case r != 0 && r%1e6 == 0:
		return fmt.Sprintf("%dM", r/1e6)
	}
	return strconv.FormatInt(int64(r), 10)
}

func parseWithUnits(s string, units []struct {
	suffix string
	mult   float64
}) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t = strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			mult = u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("not a number")
	}
	if f < 0 {
		return 0, fmt.Errorf("negative")
	}
	return int64(f * mult), nil
}
