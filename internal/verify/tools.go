package verify

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Parsers of the text the stock RDMA tools print (rdma-core 44's
// ibv_*_pingpong and ibv_devinfo, perftest 4.5): the figures of the SSH
// gate. Formats: those of perftest 4.5 (Debian 4.5+0.17) and the rdma-core 44 pingpong tools. perftest's
// --out_json is not JSON, so the text tables are parsed instead.

// ErrNoResult is returned when a tool's output holds no result line.
var ErrNoResult = errors.New("verify: no result in the tool's output")

// ErrClockCalibration is returned by ParseLat and ParseBW when perftest
// ran the exchange but could not calibrate its cycle counter against the
// clock (it prints "Correlation coefficient r^2: ... < 0.9", then
// infinite latencies or zero bandwidth). Noisy virtual CPUs, TCG guests above all, cause it now and
// then; a rerun is the remedy.
var ErrClockCalibration = errors.New("verify: perftest could not calibrate its cycle counter (r^2 < 0.9); its figures are void")

// PingPong is the summary of an ibv_{rc,uc,ud,srq}_pingpong run.
type PingPong struct {
	Bytes       int64
	Seconds     float64
	MbitPerSec  float64
	Iters       int64
	USecPerIter float64
}

var (
	ppBytes = regexp.MustCompile(`(?m)^\s*(\d+) bytes in ([0-9.]+) seconds = ([0-9.]+) Mbit/sec\s*$`)
	ppIters = regexp.MustCompile(`(?m)^\s*(\d+) iters in ([0-9.]+) seconds = ([0-9.]+) usec/iter\s*$`)
)

// ParsePingPong reads the two summary lines of a pingpong tool.
func ParsePingPong(out string) (PingPong, error) {
	var p PingPong
	b := ppBytes.FindStringSubmatch(out)
	it := ppIters.FindStringSubmatch(out)
	if b == nil || it == nil {
		return p, ErrNoResult
	}
	p.Bytes, _ = strconv.ParseInt(b[1], 10, 64)
	p.Seconds, _ = strconv.ParseFloat(b[2], 64)
	p.MbitPerSec, _ = strconv.ParseFloat(b[3], 64)
	p.Iters, _ = strconv.ParseInt(it[1], 10, 64)
	p.USecPerIter, _ = strconv.ParseFloat(it[3], 64)
	return p, nil
}

// BW is one result row of a perftest bandwidth test. BW figures are in
// perftest's "MB/sec", which is MiB/s.
type BW struct {
	Bytes       int64
	Iters       int64
	PeakMiBs    float64
	AverageMiBs float64
	MsgRateMpps float64
}

// Lat is one result row of a perftest latency test, in µs.
type Lat struct {
	Bytes                         int64
	Iters                         int64
	Min, Max, Typical, Avg, Stdev float64
	P99, P999                     float64
}

// perftestRows returns the whitespace-split rows that follow the header
// line starting with "#bytes" (rows contain tabs).
func perftestRows(out string) (header []string, rows [][]string) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "#bytes" {
			continue
		}
		header = f
		for _, r := range lines[i+1:] {
			rf := strings.Fields(r)
			if len(rf) > 0 && rf[0] == "Correlation" {
				// perftest's clock calibration warning, printed
				// between the header and the row.
				continue
			}
			if len(rf) == 0 || strings.HasPrefix(rf[0], "-") {
				break
			}
			if _, err := strconv.ParseInt(rf[0], 10, 64); err != nil {
				break
			}
			rows = append(rows, rf)
		}
	}
	return header, rows
}

func floats(f []string) ([]float64, error) {
	out := make([]float64, len(f))
	for i, s := range f {
		// C's printf writes a NaN with its sign ("-nan"), which Go's
		// parser does not take.
		if t := strings.TrimLeft(strings.ToLower(s), "+-"); t == "nan" {
			s = "NaN"
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("verify: field %d %q: %w", i, s, err)
		}
		out[i] = v
	}
	return out, nil
}

// ParseBW reads the last result row of ib_{send,write,read,atomic}_bw.
func ParseBW(out string) (BW, error) {
	h, rows := perftestRows(out)
	if len(rows) == 0 || !strings.Contains(strings.Join(h, " "), "BW") {
		return BW{}, ErrNoResult
	}
	v, err := floats(rows[len(rows)-1])
	if err != nil {
		return BW{}, err
	}
	if len(v) < 5 {
		return BW{}, fmt.Errorf("verify: bandwidth row has %d fields, want 5", len(v))
	}
	// The average is the figure; a UD receiver's peak may read 0.
	// perftest prints MB/s with two decimals, so 8-byte atomics below
	// 625 op/s average 0.00: then the message rate shows the data moved.
	for i, f := range v[2:5] {
		if math.IsInf(f, 0) || math.IsNaN(f) || (i == 1 && f <= 0 && v[4] <= 0) {
			// perftest derives bandwidth from its cycle counter: with
			// the calibration failed it prints zeros (or inf).
			if strings.Contains(out, "Correlation coefficient r^2") {
				return BW{}, ErrClockCalibration
			}
			return BW{}, fmt.Errorf("verify: bandwidth row without a bandwidth: %s", strings.Join(rows[len(rows)-1], " "))
		}
	}
	return BW{Bytes: int64(v[0]), Iters: int64(v[1]), PeakMiBs: v[2], AverageMiBs: v[3], MsgRateMpps: v[4]}, nil
}

// ParseLat reads the last result row of ib_{send,write,read,atomic}_lat.
func ParseLat(out string) (Lat, error) {
	h, rows := perftestRows(out)
	if len(rows) == 0 || !strings.Contains(strings.Join(h, " "), "t_typical") {
		return Lat{}, ErrNoResult
	}
	if strings.Contains(out, "Correlation coefficient r^2") {
		for _, f := range rows[len(rows)-1] {
			if f = strings.ToLower(f); strings.Contains(f, "inf") || strings.Contains(f, "nan") {
				return Lat{}, ErrClockCalibration
			}
		}
	}
	v, err := floats(rows[len(rows)-1])
	if err != nil {
		return Lat{}, err
	}
	if len(v) < 9 {
		return Lat{}, fmt.Errorf("verify: latency row has %d fields, want 9", len(v))
	}
	// The standard deviation (field 6) may be NaN: perftest takes the
	// square root of a variance that rounding made slightly negative
	// when the samples are nearly all equal. It is not a figure of ours.
	for i, f := range v[2:9] {
		if i+2 == 6 {
			continue
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return Lat{}, fmt.Errorf("verify: latency row has non-finite figures: %s", strings.Join(rows[len(rows)-1], " "))
		}
	}
	return Lat{Bytes: int64(v[0]), Iters: int64(v[1]), Min: v[2], Max: v[3], Typical: v[4], Avg: v[5], Stdev: v[6], P99: v[7], P999: v[8]}, nil
}

// ParseDevices reads the device names of ibv_devices.
func ParseDevices(out string) []string {
	var names []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] == "device" || strings.HasPrefix(f[0], "-") {
			continue
		}
		names = append(names, f[0])
	}
	return names
}

// DevPort is one port of an ibv_devinfo -v listing.
type DevPort struct {
	Num   int
	State string // PORT_ACTIVE, PORT_DOWN, ...
	Link  string // Ethernet, InfiniBand
	LID   int    // an InfiniBand port's LID, 0 until a subnet manager gives one
	SMLID int    // the LID of the port's subnet manager
	// MaxMTU and ActiveMTU in bytes (ibv_devinfo prints "4096 (5)"); 0
	// when not listed.
	MaxMTU, ActiveMTU int
	GIDs              []GID
}

// GID is one GID table entry.
type GID struct {
	Index int
	GID   string
	Type  string // "RoCE v2", "RoCE v1", "" (IB)
}

var (
	diPort  = regexp.MustCompile(`^\s*port:\s*(\d+)`)
	diState = regexp.MustCompile(`^\s*state:\s*(\S+)`)
	diLink  = regexp.MustCompile(`^\s*link_layer:\s*(\S+)`)
	diLID   = regexp.MustCompile(`^\s*(port_lid|sm_lid):\s*(\d+)`)
	diMTU   = regexp.MustCompile(`^\s*(max_mtu|active_mtu):\s*(\d+)`)
	diGID   = regexp.MustCompile(`GID\[\s*(\d+)\]:\s*([0-9a-fA-F:.]+)(?:,\s*(RoCE v\d))?`)
)

// ParseDevinfo reads the ports of one device from ibv_devinfo [-v].
func ParseDevinfo(out string) []DevPort {
	var ports []DevPort
	for _, l := range strings.Split(out, "\n") {
		if m := diPort.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			ports = append(ports, DevPort{Num: n})
			continue
		}
		if len(ports) == 0 {
			continue
		}
		p := &ports[len(ports)-1]
		if m := diState.FindStringSubmatch(l); m != nil {
			p.State = m[1]
		} else if m := diLink.FindStringSubmatch(l); m != nil {
			p.Link = m[1]
		} else if m := diLID.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[2])
			if m[1] == "port_lid" {
				p.LID = n
			} else {
				p.SMLID = n
			}
		} else if m := diMTU.FindStringSubmatch(l); m != nil {
			n, err := strconv.Atoi(m[2])
			if err != nil {
				n = 0 // out of range: not an MTU
			}
			if m[1] == "max_mtu" {
				p.MaxMTU = n
			} else {
				p.ActiveMTU = n
			}
		} else if m := diGID.FindStringSubmatch(l); m != nil {
			i, _ := strconv.Atoi(m[1])
			p.GIDs = append(p.GIDs, GID{Index: i, GID: m[2], Type: m[3]})
		}
	}
	return ports
}

// RoCEv2GID returns the index of the RoCEv2 GID that carries ip
// (::ffff:a.b.c.d), the one perftest and the pingpongs must use.
func RoCEv2GID(gids []GID, ip string) (int, error) {
	want, err := netip.ParseAddr(ip)
	if err != nil {
		return -1, err
	}
	want = netip.AddrFrom16(want.As16())
	for _, g := range gids {
		a, err := netip.ParseAddr(g.GID)
		if err == nil && g.Type == "RoCE v2" && a == want {
			return g.Index, nil
		}
	}
	return -1, fmt.Errorf("verify: no RoCE v2 GID ::ffff:%s in %v", ip, gids)
}

// RoCEv2LinkLocalGID returns the index of the first RoCEv2 GID in fe80::/10,
// or -1.
func RoCEv2LinkLocalGID(gids []GID) int {
	for _, g := range gids {
		a, err := netip.ParseAddr(g.GID)
		if err == nil && g.Type == "RoCE v2" && a.Is6() && !a.Is4In6() && a.IsLinkLocalUnicast() {
			return g.Index
		}
	}
	return -1
}

// median is the median of vs (which it sorts), 0 for none.
func median(vs []float64) float64 {
	n := len(vs)
	if n == 0 {
		return 0
	}
	slices.Sort(vs)
	if n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return vs[n/2]
}
