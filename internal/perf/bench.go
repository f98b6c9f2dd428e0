package perf

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rack"
)

// RawFrameSize is the frame size of the raw ceiling: 4 KiB, the IB MTU the
// engines run at by default.
const RawFrameSize = 4096

// rawEtherType is IEEE 802's local experimental EtherType: frames nobody
// interprets.
const rawEtherType = 0x88B5

// RawResult is the raw ceiling: bytes moved host to host through the same
// two socket hops (host A -> HiSwitch -> host B) with no protocol work.
type RawResult struct {
	FrameSize int           `json:"frame_size"`
	Frames    int           `json:"frames"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	MiBps     float64       `json:"mib_s"`
	Gbps      float64       `json:"gbit_s"`
}

// RawCeiling moves total bytes from a to b as RawFrameSize frames, tagged
// with priority 3 so they travel in the fabric's lossless class as the
// engines' RoCE traffic does. a and b must come from a rack started with
// Raw set.
func RawCeiling(ctx context.Context, a, b *rack.Host, total int) (RawResult, error) {
	frames := max(1, total/RawFrameSize)
	frame := make([]byte, RawFrameSize)
	eth := proto.EthernetFields{Dst: b.MAC, Src: a.MAC, VLAN: true, PCP: 3, VLANID: 1, EtherType: rawEtherType}
	proto.Ethernet(frame).Encode(&eth)
	fillPattern(frame[eth.Size():], 1)
	// b speaks first so the switch has learned its MAC before the
	// measurement: nothing is flooded.
	learn := make([]byte, 64)
	back := eth
	back.Dst, back.Src = a.MAC, b.MAC
	proto.Ethernet(learn).Encode(&back)
	if err := b.SendRaw(learn); err != nil {
		return RawResult{}, fmt.Errorf("raw: %w", err)
	}
	buf := make([]byte, 64<<10)
	if err := readOne(a, buf, 5*time.Second); err != nil {
		return RawResult{}, fmt.Errorf("raw: learning frame: %w", err)
	}

	start := time.Now()
	recvErr := make(chan error, 1)
	go func() {
		got := 0
		for got < frames {
			if err := readOne(b, buf, 10*time.Second); err != nil {
				recvErr <- fmt.Errorf("raw: after %d of %d frames: %w", got, frames, err)
				return
			}
			got++
		}
		recvErr <- nil
	}()
	for i := range frames {
		if ctx.Err() != nil {
			return RawResult{}, ctx.Err()
		}
		if err := a.SendRaw(frame); err != nil {
			return RawResult{}, fmt.Errorf("raw: frame %d: %w", i, err)
		}
	}
	if err := <-recvErr; err != nil {
		return RawResult{}, err
	}
	d := time.Since(start)
	bw := mibps(frames*RawFrameSize, d)
	return RawResult{FrameSize: RawFrameSize, Frames: frames, Elapsed: d, MiBps: bw, Gbps: bw * (1 << 20) * 8 / 1e9}, nil
}

func readOne(h *rack.Host, buf []byte, timeout time.Duration) error {
	_, err := h.RecvRaw(buf, timeout)
	return err
}

// RawPingPong bounces a 64-byte frame between a and b iters times and
// returns half of each round trip (µs), the floor under the latency
// rows. a and b come from a Raw rack that RawCeiling has run on (the
// switch has learned both MACs).
func RawPingPong(ctx context.Context, a, b *rack.Host, iters int) (BenchRow, error) {
	ping, pong := make([]byte, 64), make([]byte, 64)
	eth := proto.EthernetFields{Dst: b.MAC, Src: a.MAC, VLAN: true, PCP: 3, VLANID: 1, EtherType: rawEtherType}
	proto.Ethernet(ping).Encode(&eth)
	eth.Dst, eth.Src = a.MAC, b.MAC
	proto.Ethernet(pong).Encode(&eth)
	errc := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for range iters {
			if err := readOne(b, buf, 10*time.Second); err != nil {
				errc <- err
				return
			}
			if err := b.SendRaw(pong); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	buf := make([]byte, 64<<10)
	lat := make([]float64, 0, iters)
	for i := range iters {
		if ctx.Err() != nil {
			return BenchRow{}, ctx.Err()
		}
		t0 := time.Now()
		if err := a.SendRaw(ping); err != nil {
			return BenchRow{}, fmt.Errorf("raw pingpong %d: %w", i, err)
		}
		if err := readOne(a, buf, 10*time.Second); err != nil {
			return BenchRow{}, fmt.Errorf("raw pingpong %d: %w", i, err)
		}
		lat = append(lat, float64(time.Since(t0).Nanoseconds())/2e3)
	}
	if err := <-errc; err != nil {
		return BenchRow{}, fmt.Errorf("raw pingpong: %w", err)
	}
	slices.Sort(lat)
	sum := 0.0
	for _, v := range lat {
		sum += v
	}
	return BenchRow{Test: "raw_pingpong", Size: 64, Iters: iters, Typical: lat[len(lat)/2],
		Avg: sum / float64(len(lat)), P99: lat[len(lat)*99/100]}, nil
}

// DefaultMaxIters is the most iterations of a bandwidth test by default:
// perftest's default -n for its bandwidth tests.
const DefaultMaxIters = 5000

// BenchConfig sizes `hinic bench rdma`.
type BenchConfig struct {
	MTU int // path MTU; default 4096
	// Port is the hosts' port kind, rack.PortSocket (default) or
	// rack.PortShm; the raw ceiling uses the same.
	Port  string
	Sizes []int // bandwidth message sizes; default 64 B to 1 MiB
	Bytes int   // bytes per bandwidth test (iterations = Bytes/size, 100 to MaxIters); default 64 MiB
	// MaxIters bounds a bandwidth test's iterations; default 5000,
	// perftest's. Small messages need more for a steady-state rate.
	MaxIters int
	LatSizes []int // latency message sizes; default 2 and 4096
	LatIters int   // round trips per latency test; default 1000
	// Progress receives a line per test; nil discards.
	Progress func(format string, a ...any)
}

// BenchRow is one line of the report. Bandwidth rows fill MiBps, Gbps and
// VsRaw; ib_atomic_bw fills OpsPerS; latency rows fill the latencies (µs; halved round trips for SEND
// and WRITE, whole ones for READ, as perftest reports).
type BenchRow struct {
	Test    string  `json:"test"`
	Size    int     `json:"size"`
	Iters   int     `json:"iters"`
	MiBps   float64 `json:"mib_s,omitempty"`
	Gbps    float64 `json:"gbit_s,omitempty"`
	VsRaw   float64 `json:"vs_raw,omitempty"`
	OpsPerS float64 `json:"ops_s,omitempty"` // atomics: operations per second
	Typical float64 `json:"typical_us,omitempty"`
	Avg     float64 `json:"avg_us,omitempty"`
	P99     float64 `json:"p99_us,omitempty"`
}

// BenchReport is the outcome of Bench.
type BenchReport struct {
	MTU  int       `json:"mtu"`
	Port string    `json:"port"`
	Raw  RawResult `json:"raw_ceiling"`
	// RawLat is the raw ping-pong: half the round trip of a 64-byte
	// frame host to host and back, no protocol work (µs).
	RawLat BenchRow `json:"raw_pingpong"`
	// Copy is the copy ceiling (CopyCeiling): what three copies and two
	// CRC-32s per frame allow on this machine, with no protocol work.
	Copy RawResult  `json:"copy_ceiling"`
	Rows []BenchRow `json:"results"`
}

func (c *BenchConfig) defaults() {
	if c.MTU == 0 {
		c.MTU = 4096
	}
	if c.Port == "" {
		c.Port = rack.PortSocket
	}
	if len(c.Sizes) == 0 {
		c.Sizes = []int{64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20}
	}
	if c.Bytes == 0 {
		c.Bytes = 64 << 20
	}
	if c.MaxIters == 0 {
		c.MaxIters = DefaultMaxIters
	}
	if len(c.LatSizes) == 0 {
		c.LatSizes = []int{2, 4096}
	}
	if c.LatIters == 0 {
		c.LatIters = 1000
	}
	if c.Progress == nil {
		c.Progress = func(string, ...any) {}
	}
}

// Bench measures the embedded rack as perftest would (ib_send_bw,
// ib_write_bw and ib_read_bw over Sizes; ib_send_lat, ib_write_lat and
// ib_read_lat over LatSizes; ib_atomic_bw and ib_atomic_lat; UD send
// bandwidth at 64 B and the MTU and the UD ping-pong's latency), then the
// raw ceiling and the copy ceiling in the same run, and returns each
// bandwidth as a ratio of the raw ceiling.
func Bench(ctx context.Context, cfg BenchConfig) (*BenchReport, error) {
	cfg.defaults()
	maxSize := 0
	for _, s := range cfg.Sizes {
		if s < 1 || s > 1<<20 {
			return nil, fmt.Errorf("bench: size %d: want 1 B to 1 MiB", s)
		}
		maxSize = max(maxSize, s)
	}
	r, err := rack.Start(ctx, rack.Config{Hosts: 2, MTU: cfg.MTU, MemSize: slots*maxSize + 16<<20, Port: cfg.Port})
	if err != nil {
		return nil, err
	}
	rep := &BenchReport{MTU: cfg.MTU, Port: cfg.Port}
	a, b := r.Hosts[0], r.Hosts[1]
	err = func() error {
		for _, size := range cfg.Sizes {
			iters := min(max(cfg.Bytes/size, 100), cfg.MaxIters)
			for _, t := range []struct {
				name string
				run  func(context.Context, *rack.Host, *rack.Host, int, int) (Result, error)
			}{{"ib_send_bw", SendBW}, {"ib_write_bw", WriteBW}, {"ib_read_bw", ReadBW}} {
				res, err := t.run(ctx, a, b, size, iters)
				if err != nil {
					return fmt.Errorf("%s %d B: %w", t.name, size, err)
				}
				bw := res.MiBps()
				cfg.Progress("%-12s %8d B  %6d iters  %9.1f MiB/s", t.name, size, iters, bw)
				rep.Rows = append(rep.Rows, BenchRow{Test: t.name, Size: size, Iters: iters, MiBps: bw, Gbps: bw * (1 << 20) * 8 / 1e9})
			}
		}
		for _, size := range cfg.LatSizes {
			for _, t := range []struct {
				name string
				run  func(context.Context, *rack.Host, *rack.Host, int, int) (Result, error)
			}{{"ib_send_lat", SendLat}, {"ib_write_lat", WriteLat}, {"ib_read_lat", ReadLat}} {
				res, err := t.run(ctx, a, b, size, cfg.LatIters)
				if err != nil {
					return fmt.Errorf("%s %d B: %w", t.name, size, err)
				}
				cfg.Progress("%-12s %8d B  %6d iters  typical %.2f us, 99%% %.2f us", t.name, size, cfg.LatIters, res.Typical, res.P99)
				rep.Rows = append(rep.Rows, BenchRow{Test: t.name, Size: size, Iters: cfg.LatIters, Typical: res.Typical, Avg: res.Avg, P99: res.P99})
			}
		}
		res, err := AtomicBW(ctx, a, b, cfg.LatIters*5)
		if err != nil {
			return fmt.Errorf("ib_atomic_bw: %w", err)
		}
		cfg.Progress("%-12s %8d B  %6d iters  %9.0f ops/s", "ib_atomic_bw", 8, res.Iters, res.Figure)
		rep.Rows = append(rep.Rows, BenchRow{Test: "ib_atomic_bw", Size: 8, Iters: res.Iters, OpsPerS: res.Figure})
		if res, err = AtomicLat(ctx, a, b, cfg.LatIters); err != nil {
			return fmt.Errorf("ib_atomic_lat: %w", err)
		}
		cfg.Progress("%-12s %8d B  %6d iters  typical %.2f us, 99%% %.2f us", "ib_atomic_lat", 8, cfg.LatIters, res.Typical, res.P99)
		rep.Rows = append(rep.Rows, BenchRow{Test: "ib_atomic_lat", Size: 8, Iters: cfg.LatIters, Typical: res.Typical, Avg: res.Avg, P99: res.P99})
		// UD: datagrams of 64 B and of the MTU (ib_send_bw -c UD), and
		// the UD ping-pong's half round trip.
		for _, size := range []int{64, cfg.MTU} {
			iters := min(max(cfg.Bytes/size, 100), cfg.MaxIters)
			res, err := UDSendBW(ctx, a, b, size, iters)
			if err != nil {
				return fmt.Errorf("ud_send_bw %d B: %w", size, err)
			}
			bw := res.MiBps()
			cfg.Progress("%-12s %8d B  %6d iters  %9.1f MiB/s", "ud_send_bw", size, iters, bw)
			rep.Rows = append(rep.Rows, BenchRow{Test: "ud_send_bw", Size: size, Iters: iters, MiBps: bw, Gbps: bw * (1 << 20) * 8 / 1e9})
		}
		if res, err = UDPingPong(ctx, a, b, 2, cfg.LatIters); err != nil {
			return fmt.Errorf("ud_send_lat: %w", err)
		}
		half := res.Figure / 2
		cfg.Progress("%-12s %8d B  %6d iters  avg %.2f us", "ud_send_lat", 2, cfg.LatIters, half)
		rep.Rows = append(rep.Rows, BenchRow{Test: "ud_send_lat", Size: 2, Iters: cfg.LatIters, Avg: half})
		return nil
	}()
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}

	raw, err := rack.Start(ctx, rack.Config{Hosts: 2, Raw: true, Port: cfg.Port})
	if err != nil {
		return nil, err
	}
	rep.Raw, err = RawCeiling(ctx, raw.Hosts[0], raw.Hosts[1], cfg.Bytes)
	if err == nil {
		rep.RawLat, err = RawPingPong(ctx, raw.Hosts[0], raw.Hosts[1], cfg.LatIters)
	}
	err = errors.Join(err, raw.Close())
	if err != nil {
		return nil, err
	}
	g := rack.ShmGeometry()
	if rep.Copy, err = CopyCeiling(ctx, cfg.Bytes, int(g.Entries), int(g.BufSize)); err != nil {
		return nil, err
	}
	cfg.Progress("copy ceiling %8d B  %6d frames %9.1f MiB/s", RawFrameSize, rep.Copy.Frames, rep.Copy.MiBps)
	cfg.Progress("raw ceiling  %8d B  %6d frames %9.1f MiB/s", RawFrameSize, rep.Raw.Frames, rep.Raw.MiBps)
	cfg.Progress("raw pingpong %8d B  %6d iters  typical %.2f us, 99%% %.2f us", rep.RawLat.Size, rep.RawLat.Iters, rep.RawLat.Typical, rep.RawLat.P99)
	for i := range rep.Rows {
		if rep.Rows[i].MiBps > 0 {
			rep.Rows[i].VsRaw = rep.Rows[i].MiBps / rep.Raw.MiBps
		}
	}
	return rep, nil
}
