package rdma_test

import (
	"errors"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/clock"
	"github.com/PacketFive/hinic/internal/clock/clocktest"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/rdma/rdmatest"
)

// node is one device with a host memory registered as a single MR.
type node struct {
	dev      *rdma.Device
	mem      *rdma.HostMemory
	pd       *rdma.PD
	mr       *rdma.MR
	scq, rcq *rdma.CQ
	ip       netip.Addr
	mac      [6]byte
}

type pairOpts struct {
	mtu       int // device MTU and path MTU in bytes (default 1024)
	memSize   int
	faults    rdmatest.Faults
	seed      int64
	sendWR    int
	recvWR    int
	sge       int
	inline    int
	cqe       int
	timeout   uint8 // QP timeout attribute (default 14)
	retry     uint8 // default 7
	rnrRetry  uint8 // default 7
	minRNR    uint8 // responder's min_rnr_timer (default 12 = 0.64 ms)
	rdAtomic  uint8 // max_rd_atomic and max_dest_rd_atomic (default rdma.DefaultMaxQPRDAtomic)
	qpAccess  rdma.Access
	mrAccess  rdma.Access
	loopback  bool // both QPs on device a
	ipv6      bool // use IPv6 GIDs
	realClock bool
	sqSigAll  bool
	dcqcn     *rdma.DCQCNConfig
	cnpIntvl  time.Duration
	rxInline  bool // frames reach each device as a backend's rx goroutine gives them (inlineRx)
}

func (o *pairOpts) defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.mtu, 1024)
	def(&o.memSize, 1<<20)
	def(&o.sendWR, 256)
	def(&o.recvWR, 256)
	def(&o.sge, 4)
	def(&o.cqe, 1024)
	if o.timeout == 0 {
		o.timeout = 14
	}
	if o.retry == 0 {
		o.retry = 7
	}
	if o.rnrRetry == 0 {
		o.rnrRetry = 7
	}
	if o.minRNR == 0 {
		o.minRNR = 12
	}
	if o.rdAtomic == 0 {
		o.rdAtomic = rdma.DefaultMaxQPRDAtomic
	}
	if o.qpAccess == 0 {
		o.qpAccess = rdma.AccessLocalWrite | rdma.AccessRemoteWrite | rdma.AccessRemoteRead
	}
	if o.mrAccess == 0 {
		o.mrAccess = rdma.AccessLocalWrite | rdma.AccessRemoteWrite | rdma.AccessRemoteRead
	}
}

// pair is two RC QPs connected over an in-memory link (or loopback).
type pair struct {
	t      testing.TB
	o      pairOpts
	clk    *clocktest.Fake
	link   *rdmatest.Link
	a, b   *node
	qa, qb *rdma.QP
	devs   []*rdma.Device
}

func newNode(t testing.TB, o *pairOpts, port rdma.Port, clk clock.Clock, i byte) *node {
	t.Helper()
	n := &node{
		mem: rdma.NewHostMemory(o.memSize),
		ip:  netip.AddrFrom4([4]byte{10, 42, 0, i}),
		mac: [6]byte{0x02, 0x48, 0x4e, 0, 0, i},
	}
	cfg := rdma.DeviceConfig{
		Name: "hinic" + string('0'+i), NodeGUID: 0x0248_4eff_fe00_0000 | uint64(i), PortGUID: uint64(i),
		MAC: n.mac, IPv4: []netip.Addr{n.ip}, MTU: o.mtu, Memory: n.mem, Clock: clk,
		DCQCN: o.dcqcn, CNPInterval: o.cnpIntvl,
	}
	if o.ipv6 {
		cfg.IPv6 = []netip.Addr{netip.MustParseAddr("fd00::42:" + string('0'+i))}
	}
	dev, err := rdma.NewDevice(cfg, port)
	if err != nil {
		t.Fatal(err)
	}
	n.dev = dev
	if n.pd, err = dev.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if n.mr, err = dev.RegMR(n.pd, 0, uint64(o.memSize), o.mrAccess); err != nil {
		t.Fatal(err)
	}
	if n.scq, err = dev.CreateCQ(o.cqe, nil); err != nil {
		t.Fatal(err)
	}
	if n.rcq, err = dev.CreateCQ(o.cqe, nil); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *node) createQP(t testing.TB, o *pairOpts) *rdma.QP {
	t.Helper()
	qp, err := n.dev.CreateQP(n.pd, rdma.QPInitAttr{
		SendCQ: n.scq, RecvCQ: n.rcq, QPType: rdma.QPTypeRC, SQSigAll: o.sqSigAll,
		Cap: rdma.QPCap{MaxSendWR: o.sendWR, MaxRecvWR: o.recvWR, MaxSendSGE: o.sge, MaxRecvSGE: o.sge, MaxInlineData: o.inline},
	})
	if err != nil {
		t.Fatal(err)
	}
	return qp
}

// gidIndex is the GID the pair's QPs use: 1 (IPv4) or 2 (IPv6).
func (o *pairOpts) gidIndex() uint8 {
	if o.ipv6 {
		return 2
	}
	return 1
}

func newPair(t testing.TB, o pairOpts) *pair {
	t.Helper()
	o.defaults()
	p := &pair{t: t, o: o}
	var clk clock.Clock = clock.System()
	if !o.realClock {
		p.clk = clocktest.New()
		clk = p.clk
	}
	p.link = rdmatest.NewLink(o.seed, o.faults)
	p.a = newNode(t, &p.o, p.link.A(), clk, 1)
	if o.loopback {
		p.b = p.a
		p.devs = []*rdma.Device{p.a.dev}
	} else {
		p.b = newNode(t, &p.o, p.link.B(), clk, 2)
		p.devs = []*rdma.Device{p.a.dev, p.b.dev}
	}
	if o.rxInline {
		p.link.Connect(newInlineRx(t, p.a.dev), newInlineRx(t, p.b.dev))
	} else {
		p.link.Connect(p.a.dev, p.b.dev)
	}
	p.qa = p.a.createQP(t, &p.o)
	p.qb = p.b.createQP(t, &p.o)
	p.connect(p.qa, p.qb, p.b)
	p.connect(p.qb, p.qa, p.a)
	t.Cleanup(func() {
		for _, d := range p.devs {
			d.Close()
		}
	})
	return p
}

// connect takes qp to RTS talking to remote (on node rn).
func (p *pair) connect(qp, remote *rdma.QP, rn *node) {
	p.t.Helper()
	o := &p.o
	gid, err := rn.dev.QueryGID(int(o.gidIndex()))
	if err != nil {
		p.t.Fatal(err)
	}
	mtu, _ := rdma.MTUFromBytes(o.mtu)
	steps := []struct {
		a    rdma.QPAttr
		mask rdma.QPAttrMask
	}{
		{rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1, QPAccessFlags: o.qpAccess},
			rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrAccessFlags},
		{rdma.QPAttr{QPState: rdma.QPStateRTR, PathMTU: mtu, DestQPNum: remote.QPN(), RQPSN: remotePSN(remote),
			MaxDestRDAtomic: o.rdAtomic, MinRNRTimer: o.minRNR,
			AHAttr: rdma.AHAttr{IsGlobal: true, PortNum: 1, DMAC: rn.mac,
				GRH: rdma.GlobalRoute{DGID: gid, SGIDIndex: o.gidIndex(), HopLimit: 64, TrafficClass: 26 << 2}}},
			rdma.QPAttrState | rdma.QPAttrAV | rdma.QPAttrPathMTU | rdma.QPAttrDestQPN | rdma.QPAttrRQPSN |
				rdma.QPAttrMaxDestRDAtomic | rdma.QPAttrMinRNRTimer},
		{rdma.QPAttr{QPState: rdma.QPStateRTS, SQPSN: remotePSN(qp), Timeout: o.timeout, RetryCnt: o.retry,
			RNRRetry: o.rnrRetry, MaxRDAtomic: o.rdAtomic},
			rdma.QPAttrState | rdma.QPAttrSQPSN | rdma.QPAttrTimeout | rdma.QPAttrRetryCnt | rdma.QPAttrRNRRetry |
				rdma.QPAttrMaxQPRDAtomic},
	}
	for _, s := range steps {
		if err := qp.Modify(&s.a, s.mask); err != nil {
			p.t.Fatal(err)
		}
	}
}

// remotePSN is the initial SQ PSN of a QP in these tests: derived from its
// number and close to the 24-bit wrap so that wrapping is exercised.
func remotePSN(qp *rdma.QP) uint32 { return (0xFFFFF0 + qp.QPN()*7) & 0xFFFFFF }

// settle waits for quiescence (fake clock) and returns.
func (p *pair) settle() { rdmatest.Settle(p.devs, p.link) }

// advance fires the next timer after settling; false if none was pending.
func (p *pair) advance() bool {
	p.settle()
	_, ok := p.clk.AdvanceToNext()
	p.settle()
	return ok
}

// poll collects n completions from cq, advancing the fake clock when the
// devices are quiescent. It fails the test after too many timer firings.
func (p *pair) poll(cq *rdma.CQ, n int) []rdma.WC {
	p.t.Helper()
	var out []rdma.WC
	buf := make([]rdma.WC, 64)
	deadline := time.Now().Add(30 * time.Second)
	for fires := 0; len(out) < n; {
		k := cq.Poll(buf[:min(len(buf), n-len(out))])
		out = append(out, buf[:k]...)
		if k > 0 || len(out) >= n {
			continue
		}
		if p.clk == nil {
			if time.Now().After(deadline) {
				p.t.Fatalf("timed out waiting for %d completions, have %d", n, len(out))
			}
			runtime.Gosched() // real clock: the engine runs on its own
			continue
		}
		p.settle()
		if k = cq.Poll(buf[:min(len(buf), n-len(out))]); k > 0 {
			out = append(out, buf[:k]...)
			continue
		}
		if _, ok := p.clk.AdvanceToNext(); !ok {
			p.t.Fatalf("waiting for %d completions, have %d, and no timer is pending", n, len(out))
		}
		if fires++; fires > 100000 {
			p.t.Fatalf("waiting for %d completions, have %d, after %d timer firings", n, len(out), fires)
		}
	}
	return out
}

// expectNone settles and checks cq is empty.
func (p *pair) expectNone(cq *rdma.CQ, what string) {
	p.t.Helper()
	p.settle()
	var wc [4]rdma.WC
	if n := cq.Poll(wc[:]); n != 0 {
		p.t.Fatalf("%s: unexpected completion %+v", what, wc[0])
	}
}

func (n *node) sge(addr uint64, length uint32) []rdma.SGE {
	return []rdma.SGE{{Addr: addr, Length: length, LKey: n.mr.LKey}}
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7+i>>8)
	}
}

func mustPost(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantWC(t testing.TB, wc rdma.WC, wrid uint64, status rdma.WCStatus, op rdma.WCOpcode) {
	t.Helper()
	if wc.WRID != wrid || wc.Status != status || wc.Opcode != op {
		t.Fatalf("completion %+v (status %v), want WRID %d status %v opcode %v", wc, wc.Status, wrid, status, op)
	}
}

// interceptPort wraps a Port and lets a test drop or capture frames.
type interceptPort struct {
	mu     sync.Mutex
	next   rdma.Port
	drop   func(p *proto.Packet) bool
	frames [][]byte
	keep   bool
	mutate func(frame []byte) // applied to a copy of every frame before it goes on
}

func (ip *interceptPort) Send(frame []byte) error {
	ip.mu.Lock()
	drop := false
	if ip.drop != nil || ip.keep {
		pkt, err := proto.Parse(frame, proto.LinkEthernet)
		if err == nil && ip.drop != nil {
			drop = ip.drop(&pkt)
		}
		if ip.keep {
			ip.frames = append(ip.frames, append([]byte(nil), frame...))
		}
	}
	mutate := ip.mutate
	ip.mu.Unlock()
	if drop {
		return nil
	}
	if mutate != nil {
		frame = append([]byte(nil), frame...)
		mutate(frame)
	}
	return ip.next.Send(frame)
}

func (ip *interceptPort) setDrop(f func(p *proto.Packet) bool) {
	ip.mu.Lock()
	ip.drop = f
	ip.mu.Unlock()
}

func (ip *interceptPort) captured() [][]byte {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	return append([][]byte(nil), ip.frames...)
}

// newInterceptPair is newPair with both ports wrapped in interceptPorts.
func newInterceptPair(t testing.TB, o pairOpts) (*pair, *interceptPort, *interceptPort) {
	t.Helper()
	o.defaults()
	p := &pair{t: t, o: o, clk: clocktest.New()}
	p.link = rdmatest.NewLink(o.seed, o.faults)
	ia := &interceptPort{next: p.link.A()}
	ib := &interceptPort{next: p.link.B()}
	p.a = newNode(t, &p.o, ia, p.clk, 1)
	p.b = newNode(t, &p.o, ib, p.clk, 2)
	p.devs = []*rdma.Device{p.a.dev, p.b.dev}
	p.link.Connect(p.a.dev, p.b.dev)
	p.qa = p.a.createQP(t, &p.o)
	p.qb = p.b.createQP(t, &p.o)
	p.connect(p.qa, p.qb, p.b)
	p.connect(p.qb, p.qa, p.a)
	t.Cleanup(func() {
		p.a.dev.Close()
		p.b.dev.Close()
	})
	return p, ia, ib
}

func isErr(err, target error) bool { return errors.Is(err, target) }

// inlineRx stands for a backend's fabric receive goroutine: the frames the
// link delivers are queued, and one goroutine hands them to the device in
// batches and runs the engine itself (HoldKick, DeliverBatch, RunInline),
// racing the engine goroutine and the posting goroutines.
type inlineRx struct {
	dev  *rdma.Device
	ch   chan []byte
	done chan struct{}
}

func newInlineRx(t testing.TB, dev *rdma.Device) *inlineRx {
	r := &inlineRx{dev: dev, ch: make(chan []byte, 1024), done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		batch := make([][]byte, 0, 16)
		for {
			select {
			case <-r.done:
				return
			case f := <-r.ch:
				batch = append(batch[:0], f)
			}
			for more := true; more && len(batch) < cap(batch); {
				select {
				case f := <-r.ch:
					batch = append(batch, f)
				default:
					more = false
				}
			}
			r.dev.HoldKick()
			r.dev.DeliverBatch(batch)
			r.dev.RunInline(true)
		}
	}()
	t.Cleanup(func() {
		close(r.done)
		wg.Wait()
	})
	return r
}

// Deliver queues a copy of f (the sender keeps its buffer).
func (r *inlineRx) Deliver(f []byte) {
	select {
	case r.ch <- append([]byte(nil), f...):
	case <-r.done:
	}
}
