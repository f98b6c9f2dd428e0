package cmdutil

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// BytesCell formats n with a binary unit: "512 B", "1.0 MiB".
func BytesCell(n uint64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatUint(n, 10) + " B"
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + string("KMGTP"[exp]) + "iB"
}

// GuestCell is the guest column of a backend's status (`device status`,
// `gpu status`): "peer N" when a guest is connected, else "-".
func GuestCell(connected bool, peerID int) string {
	if !connected {
		return "-"
	}
	return "peer " + strconv.Itoa(peerID)
}

// StateCell is the state column of a backend's status: the state, or
// "fatal(code)" once the device went fatal with a code.
func StateCell(state string, fatalCode uint32) string {
	if fatalCode != 0 {
		return fmt.Sprintf("fatal(%d)", fatalCode)
	}
	return state
}

// ReasonsCell is a total with its non-zero reasons, in name order:
// "3 (malformed 1, oversize 2)", or "0". The drops columns of `fabric
// status` and `link status` use it.
func ReasonsCell(byReason map[string]uint64) string {
	var total uint64
	var parts []string
	for r, n := range byReason {
		total += n
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r, n))
		}
	}
	if total == 0 {
		return "0"
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}
