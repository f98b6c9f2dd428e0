package verify

import (
	"context"
	"fmt"
	"strings"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"

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
// the equivalents of ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong,
// ibv_srq_pingpong
// and of perftest's ib_send_bw, ib_write_bw, ib_read_bw, ib_send_lat,
// ib_write_lat, ib_read_lat, ib_atomic_bw and ib_atomic_lat, each on its
// own freshly created QPs and each checking the data it moved; and UD
// multicast to a QP on every host of r.
func EmbeddedCases(r *rack.Rack, o EmbeddedOptions) []Case {
	o.defaults()
	a, b := r.Hosts[0], r.Hosts[1]
	return []Case{
		{"ibv_devinfo", func(ctx context.Context) (Outcome, error) { return embeddedDevinfo(r) }},
		{"ibv_rc_pingpong", func(ctx context.Context) (Outcome, error) {
			return outcome(perf.PingPong(ctx, a, b, o.PingPongSize, o.PingPongIters))
		}},
		{"integrity", func(ctx context.Context) (Outcome, error) {
			// ibv_rc_pingpong --chk with 64 KiB messages: every byte of
			// every message compared both ways.
			return outcome(perf.PingPong(ctx, a, b, 64<<10, max(o.PingPongIters/5, 10)))
		}},
		{"ibv_uc_pingpong", func(ctx context.Context) (Outcome, error) {
			return outcome(perf.UCPingPong(ctx, a, b, o.PingPongSize, o.PingPongIters))
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

// embeddedDevinfo checks what ibv_devinfo -v shows of every host's device: the
// port ACTIVE with the rack's link layer and MTU, and the addressing it
// is reached by (the RoCEv2 GID of its IPv4 address, or a LID). The
// figure is the number of devices checked.
func embeddedDevinfo(r *rack.Rack) (Outcome, error) {
	var parts []string
	for _, h := range r.Hosts {
		d, pa := h.Device.QueryDevice(), h.Device.QueryPort()
		if d.VendorID != rdma.DefaultVendorID || d.VendorPartID != rdma.DefaultVendorPartID || d.PhysPortCnt != 1 ||
			d.MaxQP == 0 || d.AtomicCap != rdma.AtomicCapHCA || d.MaxSRQ == 0 {
			return Outcome{}, fmt.Errorf("%s: device attributes %+v", h.Name, d)
		}
		if pa.State != rdma.PortActive || pa.ActiveMTU == 0 {
			return Outcome{}, fmt.Errorf("%s: port state %d, active MTU %v", h.Name, pa.State, pa.ActiveMTU)
		}
		if h.IB() {
			if pa.LinkLayer != rdma.LinkLayerInfiniBand || pa.LID == 0 {
				return Outcome{}, fmt.Errorf("%s: link layer %d, LID %d", h.Name, pa.LinkLayer, pa.LID)
			}
			parts = append(parts, fmt.Sprintf("%s LID %d", h.Name, pa.LID))
			continue
		}
		gid, err := h.Device.QueryGID(rack.GIDIndex)
		typ, _ := h.Device.QueryGIDType(rack.GIDIndex)
		if err != nil || pa.LinkLayer != rdma.LinkLayerEthernet || gid != h.IP.As16() || typ != rdma.GIDTypeRoCEv2 {
			return Outcome{}, fmt.Errorf("%s: link layer %d, GID[%d] %x (%v, type %d), want RoCEv2 ::ffff:%v",
				h.Name, pa.LinkLayer, rack.GIDIndex, gid, err, typ, h.IP)
		}
		parts = append(parts, fmt.Sprintf("%s GID[%d] ::ffff:%v", h.Name, rack.GIDIndex, h.IP))
	}
	mtu := r.Hosts[0].Device.QueryPort().ActiveMTU
	return Outcome{Figure: float64(len(r.Hosts)), Unit: "devices",
		Detail: fmt.Sprintf("vendor 0x1ed5:0xca10, port ACTIVE, active MTU %v; %s", mtu, strings.Join(parts, ", "))}, nil
}

// EmbeddedIBCases returns the gate's native-InfiniBand run on r, a rack
// started with rack.LinkIB: first "ib:subnet", which checks what the
// rack's subnet manager did (every node found, every port Active with its
// LID, the switch routing) and reads host2's PortCounters through its PMA;
// then every case of EmbeddedCases, addressed by LID, named "ib:<case>";
// UD multicast goes to rack.IBAllHosts, which the rack's subnet manager
// programs into the switch's MFT.
func EmbeddedIBCases(r *rack.Rack, o EmbeddedOptions) []Case {
	cases := []Case{{"ib:subnet", func(ctx context.Context) (Outcome, error) { return ibSubnet(r) }}}
	for _, c := range EmbeddedCases(r, o) {
		cases = append(cases, Case{"ib:" + c.Name, c.Run})
	}
	return cases
}

// ibSubnet checks an InfiniBand rack's subnet as ibstat, ibnetdiscover
// and perfquery would: the figure is the number of SMPs the sweep took.
func ibSubnet(r *rack.Rack) (Outcome, error) {
	sm := r.SM
	if sm == nil {
		return Outcome{}, fmt.Errorf("the rack has no subnet manager (not an InfiniBand rack)")
	}
	if want := len(r.Hosts) + 1; len(sm.Nodes) != want || len(sm.Switches()) != 1 {
		return Outcome{}, fmt.Errorf("the subnet manager found %d nodes (%d switches), want %d (1)", len(sm.Nodes),
			len(sm.Switches()), want)
	}
	lids := make([]string, 0, len(r.Hosts))
	for _, h := range r.Hosts {
		pa := h.Device.QueryPort()
		if pa.LinkLayer != rdma.LinkLayerInfiniBand || pa.State != rdma.PortActive || pa.LID == 0 || pa.SMLID != sm.LID {
			return Outcome{}, fmt.Errorf("%s: link layer %d, state %d, LID %d, SM LID %d; want InfiniBand, Active, a LID, SM LID %d",
				h.Name, pa.LinkLayer, pa.State, pa.LID, pa.SMLID, sm.LID)
		}
		lids = append(lids, fmt.Sprintf("%s=%d", h.Name, pa.LID))
	}
	sw := sm.Switches()[0]
	for _, h := range r.Hosts {
		if port := int(sw.LFT[h.LID()]); port < 1 || port >= len(sw.Ports) || sw.Ports[port].Remote == nil ||
			sw.Ports[port].Remote.Info.PortGUID != h.Device.QueryDevice().NodeGUID+1 {
			return Outcome{}, fmt.Errorf("the switch routes %s's LID %d to port %d, which does not lead to it", h.Name, h.LID(), port)
		}
	}
	// perfquery: PortCounters of host2 through its PMA, LID-routed.
	req := make([]byte, proto.PortCountersSize)
	proto.PortCounters(req).Encode(&proto.PortCountersFields{PortSelect: 1})
	data, status, err := sm.Perf(proto.MADMethodGet, r.Hosts[1].LID(), proto.PMAAttrPortCounters, 0, req)
	if err != nil || status != proto.MADStatusOK {
		return Outcome{}, fmt.Errorf("PortCounters of %s: status %#x, %v", r.Hosts[1].Name, status, err)
	}
	pc := proto.PortCounters(data[:proto.PortCountersSize])
	if pc.PortRcvPkts() == 0 || pc.PortXmitPkts() == 0 {
		return Outcome{}, fmt.Errorf("PortCounters of %s: %d packets received, %d sent", r.Hosts[1].Name, pc.PortRcvPkts(), pc.PortXmitPkts())
	}
	return Outcome{Figure: float64(len(sm.Log)), Unit: "SMPs",
		Detail: fmt.Sprintf("%d nodes (1 switch, %d HCAs), every port Active, LIDs %s (switch %d), LFT routes each LID to its host; PortCounters of %s: %d packets in, %d out",
			len(sm.Nodes), len(r.Hosts), strings.Join(lids, " "), sw.LID, r.Hosts[1].Name, pc.PortRcvPkts(), pc.PortXmitPkts())}, nil
}
