package verify

import (
	"context"

	"github.com/PacketFive/hinic/internal/perf"
	"github.com/PacketFive/hinic/internal/rack"
)

// EmbeddedOptions size the embedded gate. Zero values take the defaults,
// which keep the whole gate to seconds.
type EmbeddedOptions struct {
	PingPongIters int // ibv_rc_pingpong -n; default 500
	PingPongSize  int // ibv_rc_pingpong -s; default 4096
	BWIters       int // perftest -n for the bandwidth cases; default 1000
	BWSize        int // perftest -s for the bandwidth cases; default 65536
	LatIters      int // perftest -n for the latency cases; default 1000
	LatSize       int // perftest -s for the latency cases; default 2
	UDSize        int // ibv_ud_pingpong -s; default 2048 (at most the MTU)
	SRQQPs        int // ibv_srq_pingpong -q; default 16
	McastIters    int // datagrams of the UD multicast case; default 1000
}

func (o *EmbeddedOptions) defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.PingPongIters, 500)
	def(&o.PingPongSize, 4096)
	def(&o.BWIters, 1000)
	def(&o.BWSize, 65536)
	def(&o.LatIters, 1000)
	def(&o.LatSize, 2)
	def(&o.UDSize, 2048)
	def(&o.SRQQPs, 16)
	def(&o.McastIters, 1000)
}

// EmbeddedCases returns the gate's cases between the first two hosts of r:
// the equivalents of ibv_rc_pingpong, ibv_ud_pingpong, ibv_srq_pingpong
// and of perftest's ib_send_bw, ib_write_bw, ib_read_bw, ib_send_lat,
// ib_write_lat, ib_read_lat, ib_atomic_bw and ib_atomic_lat, each on its
// own freshly created QPs and each checking the data it moved; and UD
// multicast to a QP on every host of r.
func EmbeddedCases(r *rack.Rack, o EmbeddedOptions) []Case {
	o.defaults()
	a, b := r.Hosts[0], r.Hosts[1]
	return []Case{
		{"ibv_rc_pingpong", func(ctx context.Context) (Outcome, error) {
			return outcome(perf.PingPong(ctx, a, b, o.PingPongSize, o.PingPongIters))
		}},
		{"ibv_ud_pingpong", func(ctx context.Context) (Outcome, error) {
			size := min(o.UDSize, a.Device.QueryPort().ActiveMTU.Bytes())
			return outcome(perf.UDPingPong(ctx, a, b, size, o.PingPongIters))
		}},
		{"ibv_srq_pingpong", func(ctx context.Context) (Outcome, error) {
			return outcome(perf.SRQPingPong(ctx, a, b, o.PingPongSize, o.PingPongIters, o.SRQQPs))
		}},
		{"ib_send_bw", func(ctx context.Context) (Outcome, error) {
			return outcome(perf.SendBW(ctx, a, b, o.BWSize, o.BWIters))
		}},
		{"ib_write_bw", func(ctx context.Context) (Outcome, error) {
			return outcome(perf.WriteBW(ctx, a, b, o.BWSize, o.BWIters))
		}},
		{"ib_read_bw", func(ctx context.Context) (Outcome, error) {
			return outcome(perf.ReadBW(ctx, a, b, o.BWSize, o.BWIters))
		}},
		{"ib_send_lat", func(ctx context.Context) (Outcome, error) {
			return outcome(perf.SendLat(ctx, a, b, o.LatSize, o.LatIters))
		}},
		{"ib_write_lat", func(ctx context.Context) (Outcome, error) {
			return outcome(perf.WriteLat(ctx, a, b, o.LatSize, o.LatIters))
		}},
		{"ib_read_lat", func(ctx context.Context) (Outcome, error) {
			return outcome(perf.ReadLat(ctx, a, b, o.LatSize, o.LatIters))
		}},
		{"ib_atomic_bw", func(ctx context.Context) (Outcome, error) {
			return outcome(perf.AtomicBW(ctx, a, b, o.BWIters))
		}},
		{"ib_atomic_lat", func(ctx context.Context) (Outcome, error) {
			return outcome(perf.AtomicLat(ctx, a, b, o.LatIters))
		}},
		{"ud_multicast", func(ctx context.Context) (Outcome, error) {
			size := min(1024, a.Device.QueryPort().ActiveMTU.Bytes())
			return outcome(perf.UDMulticast(ctx, r.Hosts, size, o.McastIters))
		}},
	}
}

// outcome turns a workload's result into a case outcome.
func outcome(r perf.Result, err error) (Outcome, error) {
	return Outcome{Figure: r.Figure, Unit: r.Unit, Detail: r.Detail}, err
}
