package rdma_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"

	"github.com/PacketFive/hinic/internal/clock/clocktest"
	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/rdma/rdmatest"
)

// rawNet is two devices on a link whose receivers steer as the device
// backend does: a frame a flow matches goes to its raw QP (DeliverRaw),
// anything else to the engine (which counts what is not RoCE).
type rawNet struct {
	t    *testing.T
	link *rdmatest.Link
	a, b *node
	devs []*rdma.Device
	// filtered are the frames device a's RawTxFilter refused.
	mu       sync.Mutex
	filtered [][]byte
}

type rawRx struct{ dev *rdma.Device }

func (r rawRx) Deliver(f []byte) {
	if !r.dev.DeliverRaw(f) {
		r.dev.Deliver(f)
	}
}

func newRawNet(t *testing.T) *rawNet {
	t.Helper()
	n := &rawNet{t: t, link: rdmatest.NewLink(1, rdmatest.Faults{})}
	clk := clocktest.New()
	o := pairOpts{}
	o.defaults()
	mk := func(i byte, port rdma.Port, filter func([]byte) bool) *node {
		nd := &node{mem: rdma.NewHostMemory(o.memSize), ip: netip.AddrFrom4([4]byte{10, 42, 0, i}),
			mac: [6]byte{0x02, 0x48, 0x4e, 0, 0, i}}
		dev, err := rdma.NewDevice(rdma.DeviceConfig{Name: "raw" + string('0'+i), MAC: nd.mac,
			IPv4: []netip.Addr{nd.ip}, Memory: nd.mem, Clock: clk, RawTxFilter: filter, MaxFlow: 4}, port)
		if err != nil {
			t.Fatal(err)
		}
		nd.dev = dev
		if nd.pd, err = dev.AllocPD(); err != nil {
			t.Fatal(err)
		}
		if nd.mr, err = dev.RegMR(nd.pd, 0, uint64(o.memSize), rdma.AccessLocalWrite); err != nil {
			t.Fatal(err)
		}
		if nd.scq, err = dev.CreateCQ(64, nil); err != nil {
			t.Fatal(err)
		}
		if nd.rcq, err = dev.CreateCQ(64, nil); err != nil {
			t.Fatal(err)
		}
		return nd
	}
	// Device a lets out only frames from its own MAC, as the backend's
	// source check does.
	n.a = mk(1, n.link.A(), func(f []byte) bool {
		if [6]byte(f[6:12]) == n.a.mac {
			return true
		}
		n.mu.Lock()
		n.filtered = append(n.filtered, append([]byte(nil), f...))
		n.mu.Unlock()
		return false
	})
	n.b = mk(2, n.link.B(), nil)
	n.devs = []*rdma.Device{n.a.dev, n.b.dev}
	n.link.Connect(rawRx{n.a.dev}, rawRx{n.b.dev})
	t.Cleanup(func() {
		n.a.dev.Close()
		n.b.dev.Close()
	})
	return n
}

func (n *rawNet) settle() { rdmatest.Settle(n.devs, n.link) }

// poll waits for k completions on cq.
func (n *rawNet) poll(cq *rdma.CQ, k int) []rdma.WC {
	n.t.Helper()
	n.settle()
	wcs := make([]rdma.WC, k+1)
	got := cq.Poll(wcs)
	if got != k {
		n.t.Fatalf("%d completions, want %d: %+v", got, k, wcs[:got])
	}
	return wcs[:k]
}

func (n *rawNet) none(cq *rdma.CQ) {
	n.t.Helper()
	n.settle()
	var wc [1]rdma.WC
	if cq.Poll(wc[:]) != 0 {
		n.t.Fatalf("unexpected completion %+v", wc[0])
	}
}

// rawQP creates a raw packet QP on nd and takes it to RTS as pyverbs
// does (RESET->INIT with the port, then RTR and RTS with no attributes).
func rawQP(t *testing.T, nd *node) *rdma.QP {
	t.Helper()
	qp, err := nd.dev.CreateQP(nd.pd, rdma.QPInitAttr{SendCQ: nd.scq, RecvCQ: nd.rcq, QPType: rdma.QPTypeRawPacket,
		Cap: rdma.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 128}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		a    rdma.QPAttr
		mask rdma.QPAttrMask
	}{
		{rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1}, rdma.QPAttrState | rdma.QPAttrPort},
		{rdma.QPAttr{QPState: rdma.QPStateRTR}, rdma.QPAttrState},
		{rdma.QPAttr{QPState: rdma.QPStateRTS}, rdma.QPAttrState},
	} {
		if err := qp.Modify(&s.a, s.mask); err != nil {
			t.Fatal(err)
		}
	}
	return qp
}

// Addresses of pyverbs' PacketConsts (tests/utils.py), whose raw
// traffic tests run client and server on one device.
var (
	pvSrcMAC = [6]byte{0x24, 0x8a, 0x07, 0xa5, 0x28, 0xc8}
	pvDstMAC = [6]byte{0x01, 0x50, 0x56, 0x19, 0x20, 0xa7}
	pvSrcIP6 = netip.MustParseAddr("a0a1::a2a3:a4a5:a6a7:a8a9").As16()
	pvDstIP6 = netip.MustParseAddr("b0b1::b2b3:b4b5:b6b7:b8b9").As16()
	allOnes6 = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	ones4    = [4]byte{0xff, 0xff, 0xff, 0xff}
)

// frameOpts describe a test frame, as pyverbs' gen_packet builds them.
type frameOpts struct {
	dst, src [6]byte
	vlan     uint16 // TCI; 0: untagged
	ip6      bool
	tcp      bool
	src4     [4]byte
	size     int
}

func rawFrame(o frameOpts) []byte {
	if o.size == 0 {
		o.size = 200
	}
	if o.src4 == ([4]byte{}) {
		o.src4 = [4]byte{1, 1, 1, 1}
	}
	f := append(append([]byte{}, o.dst[:]...), o.src[:]...)
	if o.vlan != 0 {
		f = binary.BigEndian.AppendUint16(f, 0x8100)
		f = binary.BigEndian.AppendUint16(f, o.vlan)
	}
	proto := byte(17)
	if o.tcp {
		proto = 6
	}
	if o.ip6 {
		f = binary.BigEndian.AppendUint16(f, 0x86dd)
		f = append(f, 0x60, 0, 0, 0, 0, 0, proto, 64)
		f = append(f, pvSrcIP6[:]...)
		f = append(f, pvDstIP6[:]...)
	} else {
		f = binary.BigEndian.AppendUint16(f, 0x0800)
		f = append(f, 0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0)
		f = append(f, o.src4[:]...)
		f = append(f, 2, 2, 2, 2)
	}
	f = binary.BigEndian.AppendUint16(f, 1234)
	f = binary.BigEndian.AppendUint16(f, 5678)
	for len(f) < o.size {
		f = append(f, byte('a'+len(f)%26))
	}
	return f
}

func ethSpec(et uint16) *rdma.FlowEth {
	return &rdma.FlowEth{DstMAC: pvDstMAC, DstMACMask: allOnes6, SrcMAC: pvSrcMAC, SrcMACMask: pvSrcMAC,
		EtherType: et, EtherTypeMask: 0xffff}
}

// TestRawLoopbackFlow is pyverbs' raw_traffic: a client raw QP sends
// frames to a multicast MAC, a server raw QP on the same device has a
// flow for them and gets each whole, gathered from two SGEs into two
// receive SGEs; none reaches the port.
func TestRawLoopbackFlow(t *testing.T) {
	n := newRawNet(t)
	cli, srv := rawQP(t, n.a), rawQP(t, n.a)
	if _, err := srv.CreateFlow(rdma.FlowSpec{Eth: ethSpec(0x0800)}); err != nil {
		t.Fatal(err)
	}
	mem := n.a.mem.Bytes()
	for i := range 3 {
		f := rawFrame(frameOpts{dst: pvDstMAC, src: pvSrcMAC, size: 1024 - 100*i})
		copy(mem[0x1000:], f[:100])
		copy(mem[0x3000:], f[100:])
		mustPost(t, srv.PostRecv([]rdma.RecvWR{{WRID: uint64(10 + i), SGList: []rdma.SGE{
			{Addr: 0x8000, Length: 64, LKey: n.a.mr.LKey}, {Addr: 0x9000, Length: 2048, LKey: n.a.mr.LKey}}}}))
		mustPost(t, cli.PostSend([]rdma.SendWR{{WRID: uint64(20 + i), Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
			SGList: []rdma.SGE{{Addr: 0x1000, Length: 100, LKey: n.a.mr.LKey},
				{Addr: 0x3000, Length: uint32(len(f) - 100), LKey: n.a.mr.LKey}}}}))
		wantWC(t, n.poll(n.a.scq, 1)[0], uint64(20+i), rdma.WCSuccess, rdma.WCSend)
		wc := n.poll(n.a.rcq, 1)[0]
		wantWC(t, wc, uint64(10+i), rdma.WCSuccess, rdma.WCRecv)
		if wc.ByteLen != uint32(len(f)) || wc.QPNum != srv.QPN() || wc.WCFlags != 0 {
			t.Fatalf("wc %+v, want byte_len %d on QP %#x", wc, len(f), srv.QPN())
		}
		got := append(append([]byte{}, mem[0x8000:0x8000+64]...), mem[0x9000:0x9000+len(f)-64]...)
		if !bytes.Equal(got, f) {
			t.Fatalf("frame %d placed wrong", i)
		}
	}
	c := n.a.dev.Counters()
	if c.RawSent != 3 || c.RawReceived != 3 || c.LoopbackPackets != 3 || c.TxPackets != 0 {
		t.Fatalf("counters %+v", c)
	}
	if c := n.b.dev.Counters(); c.RxNotRoCE+c.RxMalformed != 0 {
		t.Fatal("a looped-back frame reached the port")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.filtered) != 0 {
		t.Fatal("a looped-back frame went through the port's filter")
	}
}

// TestRawWire: a frame no flow of its device matches goes to the port,
// through the source filter; on the other side a flow steers it to a
// raw QP instead of the netdev, and frames no flow matches stay the
// netdev's.
func TestRawWire(t *testing.T) {
	n := newRawNet(t)
	cli, srv := rawQP(t, n.a), rawQP(t, n.b)
	if _, err := srv.CreateFlow(rdma.FlowSpec{
		IPv4: &rdma.FlowIPv4{Src: [4]byte{1, 1, 1, 1}, SrcMask: ones4, Dst: [4]byte{2, 2, 2, 2}, DstMask: ones4,
			Proto: 17, ProtoMask: 0xff},
		L4: &rdma.FlowL4{Proto: rdma.ProtoUDP, DstPort: 5678, DstPortMask: 0xffff}}); err != nil {
		t.Fatal(err)
	}
	mem := n.a.mem.Bytes()
	good := rawFrame(frameOpts{dst: n.b.mac, src: n.a.mac})
	spoofed := rawFrame(frameOpts{dst: n.b.mac, src: pvSrcMAC})
	other := rawFrame(frameOpts{dst: n.b.mac, src: n.a.mac, tcp: true})
	for i, f := range [][]byte{good, spoofed, other} {
		copy(mem[0x1000*(i+1):], f)
	}
	mustPost(t, srv.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: n.b.sge(0x8000, 2048)}}))
	for i, f := range [][]byte{good, spoofed, other} {
		mustPost(t, cli.PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
			SGList: n.a.sge(uint64(0x1000*(i+1)), uint32(len(f)))}}))
	}
	for i, wc := range n.poll(n.a.scq, 3) {
		wantWC(t, wc, uint64(i), rdma.WCSuccess, rdma.WCSend)
	}
	wc := n.poll(n.b.rcq, 1)[0]
	wantWC(t, wc, 1, rdma.WCSuccess, rdma.WCRecv)
	if wc.ByteLen != uint32(len(good)) || !bytes.Equal(n.b.mem.Bytes()[0x8000:0x8000+len(good)], good) {
		t.Fatalf("wc %+v: the frame did not arrive whole", wc)
	}
	ca, cb := n.a.dev.Counters(), n.b.dev.Counters()
	if ca.RawSent != 3 || ca.RawTxFiltered != 1 || ca.TxPackets != 2 {
		t.Fatalf("sender counters %+v", ca)
	}
	// The engine takes what no flow took, and drops it as not its own
	// (test frames have no IP length or checksum: malformed to it).
	if cb.RawReceived != 1 || cb.RxNotRoCE+cb.RxMalformed != 1 {
		t.Fatalf("receiver counters %+v: want the TCP frame left to the netdev", cb)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.filtered) != 1 || !bytes.Equal(n.filtered[0], spoofed) {
		t.Fatalf("filtered %d frames, want the spoofed one", len(n.filtered))
	}
}

// TestRawFlowMatch checks each field of each spec, with its mask, over
// the frames pyverbs' flow tests send: DeliverRaw reports whether a flow
// took the frame.
func TestRawFlowMatch(t *testing.T) {
	udp4 := rawFrame(frameOpts{dst: pvDstMAC, src: pvSrcMAC})
	tcp6 := rawFrame(frameOpts{dst: pvDstMAC, src: pvSrcMAC, ip6: true, tcp: true})
	udp6 := rawFrame(frameOpts{dst: pvDstMAC, src: pvSrcMAC, ip6: true})
	tagged := rawFrame(frameOpts{dst: pvDstMAC, src: pvSrcMAC, vlan: 0xac0c})
	otherSrc := rawFrame(frameOpts{dst: pvDstMAC, src: pvSrcMAC, src4: [4]byte{1, 2, 3, 4}})
	var frag []byte
	frag = append(frag, udp4...)
	frag[14+6] = 0x20 | 0x01 // a later fragment: no ports
	ipv6Spec := &rdma.FlowIPv6{Src: pvSrcIP6, Dst: pvDstIP6, NextHdr: 6, NextHdrMask: 0xff}
	for i := range 16 {
		ipv6Spec.SrcMask[i], ipv6Spec.DstMask[i] = 0xff, 0xff
	}
	for _, tc := range []struct {
		name string
		spec rdma.FlowSpec
		hit  [][]byte
		miss [][]byte
	}{
		{"eth", rdma.FlowSpec{Eth: ethSpec(0x0800)}, [][]byte{udp4, otherSrc, tagged}, [][]byte{tcp6, udp6}},
		{"eth-src-mask", rdma.FlowSpec{Eth: &rdma.FlowEth{SrcMAC: [6]byte{0x24}, SrcMACMask: [6]byte{0xff}}},
			[][]byte{udp4, tcp6}, [][]byte{rawFrame(frameOpts{dst: pvDstMAC, src: [6]byte{0x25}})}},
		{"vlan", rdma.FlowSpec{Eth: &rdma.FlowEth{VLANTag: 0x0c0c, VLANMask: 0x0fff}}, [][]byte{tagged},
			[][]byte{udp4}},
		{"ipv4", rdma.FlowSpec{IPv4: &rdma.FlowIPv4{Src: [4]byte{1, 1, 1, 1}, SrcMask: ones4,
			Dst: [4]byte{2, 2, 2, 2}, DstMask: ones4, Proto: 17, ProtoMask: 0xff}},
			[][]byte{udp4, tagged, frag}, [][]byte{otherSrc, tcp6}},
		{"ipv4-prefix", rdma.FlowSpec{IPv4: &rdma.FlowIPv4{Src: [4]byte{1}, SrcMask: [4]byte{0xff}}},
			[][]byte{udp4, otherSrc}, [][]byte{udp6}},
		{"ipv6-tcp", rdma.FlowSpec{Eth: ethSpec(0x86dd), IPv6: ipv6Spec,
			L4: &rdma.FlowL4{Proto: rdma.ProtoTCP, SrcPort: 1234, SrcPortMask: 0xffff, DstPort: 5678, DstPortMask: 0xffff}},
			[][]byte{tcp6}, [][]byte{udp6, udp4}},
		{"udp-port", rdma.FlowSpec{L4: &rdma.FlowL4{Proto: rdma.ProtoUDP, DstPort: 5678, DstPortMask: 0xffff}},
			[][]byte{udp4, udp6}, [][]byte{tcp6, frag}},
		{"udp-other-port", rdma.FlowSpec{L4: &rdma.FlowL4{Proto: rdma.ProtoUDP, DstPort: 5679, DstPortMask: 0xffff}},
			nil, [][]byte{udp4, udp6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newRawNet(t)
			qp := rawQP(t, n.b)
			fl, err := qp.CreateFlow(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range tc.hit {
				if !n.b.dev.DeliverRaw(f) {
					t.Errorf("frame %d not steered", i)
				}
			}
			for i, f := range tc.miss {
				if n.b.dev.DeliverRaw(f) {
					t.Errorf("frame %d steered", i)
				}
			}
			if err := fl.Destroy(); err != nil {
				t.Fatal(err)
			}
			for i, f := range tc.hit {
				if n.b.dev.DeliverRaw(f) {
					t.Errorf("frame %d steered after the flow went", i)
				}
			}
		})
	}
}

// TestRawFlowPriority: of two flows that match, the lower priority
// value takes the frame, whatever the order they came in.
func TestRawFlowPriority(t *testing.T) {
	n := newRawNet(t)
	lo, hi := rawQP(t, n.b), rawQP(t, n.b)
	if _, err := hi.CreateFlow(rdma.FlowSpec{Priority: 5, Eth: &rdma.FlowEth{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := lo.CreateFlow(rdma.FlowSpec{Priority: 1, Eth: ethSpec(0x0800)}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []*rdma.QP{lo, hi} {
		mustPost(t, q.PostRecv([]rdma.RecvWR{{WRID: uint64(q.QPN()), SGList: n.b.sge(0x8000, 2048)}}))
	}
	n.b.dev.DeliverRaw(rawFrame(frameOpts{dst: pvDstMAC, src: pvSrcMAC}))
	if wc := n.poll(n.b.rcq, 1)[0]; wc.QPNum != lo.QPN() {
		t.Fatalf("frame went to QP %#x, want %#x", wc.QPNum, lo.QPN())
	}
	n.b.dev.DeliverRaw(rawFrame(frameOpts{dst: pvDstMAC, src: pvSrcMAC, ip6: true}))
	if wc := n.poll(n.b.rcq, 1)[0]; wc.QPNum != hi.QPN() {
		t.Fatalf("IPv6 frame went to QP %#x, want %#x", wc.QPNum, hi.QPN())
	}
}

// TestRawErrors: what a raw QP and its flows refuse.
func TestRawErrors(t *testing.T) {
	n := newRawNet(t)
	qp := rawQP(t, n.a)
	for _, wr := range []rdma.SendWR{
		{Opcode: rdma.WRSend, SGList: n.a.sge(0x1000, rdma.EthHeaderLen-1)},
		{Opcode: rdma.WRSend, SGList: n.a.sge(0x1000, rdma.MaxRawFrame+1)},
		{Opcode: rdma.WRSendWithImm, SGList: n.a.sge(0x1000, 64)},
		{Opcode: rdma.WRRDMAWrite, SGList: n.a.sge(0x1000, 64)},
		{Opcode: rdma.WRSend, SendFlags: rdma.SendInline, SGList: n.a.sge(0x1000, 129)},
	} {
		if err := qp.PostSend([]rdma.SendWR{wr}); !isErr(err, rdma.ErrInvalid) {
			t.Errorf("%v of %d bytes: %v, want ErrInvalid", wr.Opcode, wr.SGList[0].Length, err)
		}
	}
	// Inline frames are sent as they were when posted.
	f := rawFrame(frameOpts{dst: n.b.mac, src: n.a.mac, size: 100})
	copy(n.a.mem.Bytes()[0x1000:], f)
	mustPost(t, qp.PostSend([]rdma.SendWR{{WRID: 7, Opcode: rdma.WRSend, SendFlags: rdma.SendInline | rdma.SendSignaled,
		SGList: n.a.sge(0x1000, uint32(len(f)))}}))
	clear(n.a.mem.Bytes()[0x1000 : 0x1000+len(f)])
	wantWC(t, n.poll(n.a.scq, 1)[0], 7, rdma.WCSuccess, rdma.WCSend)
	if c := n.b.dev.Counters(); c.RxNotRoCE+c.RxMalformed != 1 {
		t.Fatalf("the inline frame did not reach the port: %+v", c)
	}
	// A frame longer than the receive buffer: LocLenErr, the QP goes on.
	srv := rawQP(t, n.b)
	if _, err := srv.CreateFlow(rdma.FlowSpec{}); err != nil {
		t.Fatal(err)
	}
	mustPost(t, srv.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: n.b.sge(0x8000, 64)}}))
	n.b.dev.DeliverRaw(f)
	wantWC(t, n.poll(n.b.rcq, 1)[0], 1, rdma.WCLocLenErr, rdma.WCRecv)
	if srv.State() != rdma.QPStateRTS {
		t.Fatalf("QP in %v after a long frame", srv.State())
	}
	// With no receive posted the frame is dropped and counted.
	n.b.dev.DeliverRaw(f)
	n.none(n.b.rcq)
	if c := n.b.dev.Counters(); c.RawNoRecv != 1 || c.RawTooLong != 1 {
		t.Fatalf("counters %+v", c)
	}

	// Flows: only on raw QPs, one IP family, TCP or UDP, MaxFlow (4).
	ud := udQP(t, n.a, testQKey)
	if _, err := ud.CreateFlow(rdma.FlowSpec{}); !isErr(err, rdma.ErrUnsupported) {
		t.Errorf("flow on a UD QP: %v", err)
	}
	if _, err := qp.CreateFlow(rdma.FlowSpec{IPv4: &rdma.FlowIPv4{}, IPv6: &rdma.FlowIPv6{}}); !isErr(err, rdma.ErrInvalid) {
		t.Errorf("IPv4 and IPv6: %v", err)
	}
	if _, err := qp.CreateFlow(rdma.FlowSpec{L4: &rdma.FlowL4{Proto: 1}}); !isErr(err, rdma.ErrInvalid) {
		t.Errorf("ICMP ports: %v", err)
	}
	var flows []*rdma.Flow
	for range 4 {
		f, err := qp.CreateFlow(rdma.FlowSpec{})
		if err != nil {
			t.Fatal(err)
		}
		flows = append(flows, f)
	}
	if _, err := qp.CreateFlow(rdma.FlowSpec{}); !isErr(err, rdma.ErrNoResources) {
		t.Errorf("flow past MaxFlow: %v", err)
	}
	if err := flows[0].Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := flows[0].Destroy(); !isErr(err, rdma.ErrInvalid) {
		t.Errorf("second destroy: %v", err)
	}
	// Destroying the QP takes its flows with it.
	if err := qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	if n.a.dev.DeliverRaw(f) {
		t.Fatal("a destroyed QP's flow still steers")
	}
	if _, err := qp.CreateFlow(rdma.FlowSpec{}); err == nil {
		t.Fatal("flow on a destroyed QP")
	}
	// RESET->INIT needs the port, as ib_modify_qp_is_ok says.
	q2, err := n.a.dev.CreateQP(n.a.pd, rdma.QPInitAttr{SendCQ: n.a.scq, RecvCQ: n.a.rcq, QPType: rdma.QPTypeRawPacket,
		Cap: rdma.QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if err := q2.Modify(&rdma.QPAttr{QPState: rdma.QPStateInit}, rdma.QPAttrState); !isErr(err, rdma.ErrInvalid) {
		t.Errorf("RESET->INIT without the port: %v", err)
	}
	if err := q2.Modify(&rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1, QKey: 1},
		rdma.QPAttrState|rdma.QPAttrPort|rdma.QPAttrQKey); !isErr(err, rdma.ErrInvalid) {
		t.Errorf("RESET->INIT with a Q_Key: %v", err)
	}
}

// TestRawNotOnInfiniBand: raw packet QPs need an Ethernet port.
func TestRawNotOnInfiniBand(t *testing.T) {
	mem := rdma.NewHostMemory(1 << 16)
	dev, err := rdma.NewDevice(rdma.DeviceConfig{Name: "ib0", LinkLayer: rdma.LinkLayerInfiniBand, NodeGUID: 0x10, LID: 1,
		Memory: mem}, discardPort{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pd, _ := dev.AllocPD()
	cq, _ := dev.CreateCQ(4, nil)
	if _, err := dev.CreateQP(pd, rdma.QPInitAttr{SendCQ: cq, RecvCQ: cq, QPType: rdma.QPTypeRawPacket}); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("raw QP on InfiniBand: %v", err)
	}
}

// TestParseFlowKeyAllocs: steering a frame allocates nothing.
func TestParseFlowKeyAllocs(t *testing.T) {
	f := rawFrame(frameOpts{dst: pvDstMAC, src: pvSrcMAC, vlan: 5, ip6: true, tcp: true})
	if n := testing.AllocsPerRun(100, func() { rdma.ParseFlowKey(f) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// FuzzParseFlowKey: any frame parses without a panic, and every field
// comes from the bytes where its header puts it.
func FuzzParseFlowKey(f *testing.F) {
	f.Add(rawFrame(frameOpts{dst: pvDstMAC, src: pvSrcMAC}))                                     // Eth/IPv4/UDP
	f.Add(rawFrame(frameOpts{dst: pvDstMAC, src: pvSrcMAC, vlan: 0xac0c, ip6: true, tcp: true})) // tagged IPv6/TCP
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x08, 0x00, 0x4f})                       // IHL past the end
	f.Add(make([]byte, 13))                                                                      // short
	f.Fuzz(func(t *testing.T, b []byte) {
		k, ok := rdma.ParseFlowKey(b)
		if ok != (len(b) >= rdma.EthHeaderLen) {
			t.Fatalf("ok %v for %d bytes", ok, len(b))
		}
		if !ok {
			return
		}
		if k.DstMAC != [6]byte(b[0:6]) || k.SrcMAC != [6]byte(b[6:12]) {
			t.Fatal("MACs")
		}
		off := 14
		if k.HasVLAN {
			if binary.BigEndian.Uint16(b[12:]) != 0x8100 || k.VLANTag != binary.BigEndian.Uint16(b[14:]) {
				t.Fatal("VLAN")
			}
			off = 18
		}
		if k.EtherType != binary.BigEndian.Uint16(b[off-2:]) {
			t.Fatal("EtherType")
		}
		switch k.IPVersion {
		case 4:
			if k.EtherType != 0x0800 || !bytes.Equal(k.Src[:4], b[off+12:off+16]) || k.Proto != b[off+9] {
				t.Fatal("IPv4")
			}
		case 6:
			if k.EtherType != 0x86dd || !bytes.Equal(k.Dst[:], b[off+24:off+40]) || k.Proto != b[off+6] {
				t.Fatal("IPv6")
			}
		case 0:
			if k.HasPorts {
				t.Fatal("ports without IP")
			}
		default:
			t.Fatalf("IP version %d", k.IPVersion)
		}
		if k.HasPorts && k.Proto != 6 && k.Proto != 17 {
			t.Fatal("ports of another protocol")
		}
	})
}

// TestToeplitz checks the hash against the verification suite of
// Microsoft's RSS specification (IPv4, with and without ports).
func TestToeplitz(t *testing.T) {
	key := []byte{0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
		0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
		0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa}
	for _, tc := range []struct {
		src, dst     [4]byte
		sport, dport uint16
		want2, want4 uint32
	}{
		{[4]byte{66, 9, 149, 187}, [4]byte{161, 142, 100, 80}, 2794, 1766, 0x323e8fc2, 0x51ccc178},
		{[4]byte{199, 92, 111, 2}, [4]byte{65, 69, 140, 83}, 14230, 4739, 0xd718262a, 0xc626b0ea},
		{[4]byte{24, 19, 198, 95}, [4]byte{12, 22, 207, 184}, 12898, 38024, 0xd2d0a5de, 0x5c2b394a},
	} {
		in := append(tc.src[:], tc.dst[:]...)
		if got := rdma.Toeplitz(key, in); got != tc.want2 {
			t.Errorf("%v -> %v: %#x, want %#x", tc.src, tc.dst, got, tc.want2)
		}
		in = binary.BigEndian.AppendUint16(in, tc.sport)
		in = binary.BigEndian.AppendUint16(in, tc.dport)
		if got := rdma.Toeplitz(key, in); got != tc.want4 {
			t.Errorf("%v:%d -> %v:%d: %#x, want %#x", tc.src, tc.sport, tc.dst, tc.dport, got, tc.want4)
		}
	}
}

// TestRawRSS is pyverbs' RSS traffic: an RSS QP over eight work queues
// (raw QPs with a receive queue only, on two CQs) hashing source and
// destination IPv4; each frame lands in the work queue the Toeplitz hash
// of its addresses picks, and frames from different sources spread.
func TestRawRSS(t *testing.T) {
	n := newRawNet(t)
	nd := n.a
	var wqs []*rdma.QP
	for i := range 8 {
		cq := nd.scq
		if i%2 == 1 {
			cq = nd.rcq
		}
		wq, err := nd.dev.CreateQP(nd.pd, rdma.QPInitAttr{SendCQ: cq, RecvCQ: cq, QPType: rdma.QPTypeRawPacket,
			Cap: rdma.QPCap{MaxRecvWR: 16, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		// A work queue goes RESET -> INIT -> RTR (ibv_modify_wq's RDY).
		if err := wq.Modify(&rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1}, rdma.QPAttrState|rdma.QPAttrPort); err != nil {
			t.Fatal(err)
		}
		if err := wq.Modify(&rdma.QPAttr{QPState: rdma.QPStateRTR}, rdma.QPAttrState); err != nil {
			t.Fatal(err)
		}
		for j := range 16 {
			mustPost(t, wq.PostRecv([]rdma.RecvWR{{WRID: uint64(i<<8 | j), SGList: nd.sge(uint64(0x10000+i*2048), 2048)}}))
		}
		wqs = append(wqs, wq)
	}
	rss, err := nd.dev.CreateQP(nd.pd, rdma.QPInitAttr{QPType: rdma.QPTypeRawPacket, SendCQ: nd.scq, RecvCQ: nd.rcq})
	if err != nil {
		t.Fatal(err)
	}
	var key [rdma.RSSKeyLen]byte
	for i := range key {
		key[i] = byte(0x2c + 7*i)
	}
	if err := rss.SetRSS(rdma.RSSConfig{Fields: rdma.RxHashSrcIPv4 | rdma.RxHashDstIPv4, Key: key, Table: wqs[:3]}); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("table of 3: %v", err)
	}
	if err := wqs[0].SetRSS(rdma.RSSConfig{Key: key, Table: wqs}); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("RSS on a work queue: %v", err)
	}
	if err := rss.SetRSS(rdma.RSSConfig{Fields: rdma.RxHashSrcIPv4 | rdma.RxHashDstIPv4, Key: key, Table: wqs}); err != nil {
		t.Fatal(err)
	}
	if _, err := rss.CreateFlow(rdma.FlowSpec{Eth: ethSpec(0x0800)}); err != nil {
		t.Fatal(err)
	}
	cli := rawQP(t, nd)
	used := map[uint32]bool{}
	for i := range 16 {
		src := [4]byte{byte(i), byte(i + 1), byte(i + 2), byte(i + 3)}
		f := rawFrame(frameOpts{dst: pvDstMAC, src: pvSrcMAC, src4: src})
		copy(nd.mem.Bytes()[0x1000:], f)
		mustPost(t, cli.PostSend([]rdma.SendWR{{WRID: 99, Opcode: rdma.WRSend, SGList: nd.sge(0x1000, uint32(len(f)))}}))
		n.settle()
		want := wqs[rdma.Toeplitz(key[:], append(src[:], 2, 2, 2, 2))&7]
		used[want.QPN()] = true
		var got []rdma.WC
		for _, cq := range []*rdma.CQ{nd.scq, nd.rcq} {
			wc := make([]rdma.WC, 4)
			got = append(got, wc[:cq.Poll(wc)]...)
		}
		if len(got) != 1 || got[0].QPNum != want.QPN() || got[0].Status != rdma.WCSuccess || got[0].ByteLen != uint32(len(f)) {
			t.Fatalf("frame from %v: completions %+v, want one on work queue %#x", src, got, want.QPN())
		}
	}
	if len(used) < 3 {
		t.Fatalf("16 sources hashed to %d work queues", len(used))
	}
}
