package cmdutil

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize parses bytes with an optional K, M or G suffix (binary; KB,
// KiB and the lower case are the same).
func ParseSize(s string) (uint64, error) {
	mult := uint64(1)
	t := strings.TrimSuffix(strings.ToUpper(s), "B")
	t = strings.TrimSuffix(t, "I")
	switch {
	case strings.HasSuffix(t, "K"):
		mult, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "M"):
		mult, t = 1<<20, t[:len(t)-1]
	case strings.HasSuffix(t, "G"):
		mult, t = 1<<30, t[:len(t)-1]
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || n == 0 || n > (1<<64-1)/mult {
		return 0, fmt.Errorf("size %q: want a positive number with an optional K, M or G", s)
	}
	return n * mult, nil
}
