// Package faultsuite is the fault-injection proof of the RDMA engine: two
// or four engines of an embedded rack (internal/rack) run a seeded random
// mix of RC operations (SEND, WRITE, WRITE with immediate, READ,
// FETCH_AND_ADD, CMP_AND_SWP) through a HiSwitch whose ports drop,
// duplicate, reorder and corrupt frames, and every operation is checked:
// it completes exactly once, in order, with the data its (stream,
// sequence) pattern says; immediates arrive in sequence; every atomic
// counter ends at the exact sum of the adds made to it, with the values
// fetched forming one unbroken chain; every CMP_AND_SWP word went through
// one chain of successful swaps. The report gives what the faults cost:
// retransmissions, NAKs, replays, and the corrupted frames the engines
// dropped.
//
// `go test` runs it at 10,000 operations (2,000 under -race); `make
// test` and `hinic bench rdma --faults` at 100,000 (docs/verify.md).
//
// faultsuite imports rack, fabric and rdma; nothing imports it but the
// CLI and its tests.
package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/rack"
	"github.com/PacketFive/hinic/internal/rdma"
)

// Defaults.
const (
	DefaultHosts   = 2
	DefaultOps     = 100_000
	DefaultMTU     = 1024
	DefaultQPs     = 2        // RC connections between each pair of hosts
	DefaultWindow  = 8        // operations in flight per stream
	DefaultMaxSize = 64 << 10 // largest SEND, WRITE or READ
	// DefaultTimeout is the local ACK timeout code: 4.096 µs × 2^16 =
	// 268 ms. Shorter recovers a lost tail faster, but the timeout is
	// fixed (no backoff), so a loaded machine that stalls an engine for
	// retry_cnt+1 timeouts fails an operation with RetryExcErr without
	// any fault to blame: at 67 ms (code 14) four engines on a shared
	// 2-core machine at load 8 did.
	DefaultTimeout = 16
	// flushGrace is how long a flushed completion waits for the error
	// that caused it to be reported before the run stops.
	flushGrace = 200 * time.Millisecond
	// recvSlots is the receives each endpoint keeps posted.
	recvSlots = 16
	// rnrDepth is the receives kept posted with Config.RNR.
	rnrDepth = 2
	// Atomic words per host: FETCH_AND_ADD counters, then CMP_AND_SWP
	// words, each 8 bytes.
	addWords  = 8
	swapWords = 8
)

// SpecFaults are the fault rates of the suite's specification: 1 % drop,
// duplication and reordering, 0.1 % corruption, on every host's port.
func SpecFaults() fabric.FaultsConfig {
	return fabric.FaultsConfig{Drop: 0.01, Duplicate: 0.01, Reorder: 0.01, Corrupt: 0.001}
}

// Config describes one run.
type Config struct {
	Hosts int // 2 or 4; default 2. Every pair of hosts is connected.
	Ops   int // operations in all streams together; default 100,000
	// Seed seeds the operation mix and, unless Faults.Seed is set, the
	// fabric's fault injection. 0 means 1.
	Seed    uint64
	Faults  fabric.FaultsConfig // injected at every host's fabric port
	MTU     int                 // path MTU, 256..4096; default 1024
	QPs     int                 // RC connections per pair of hosts; default 2
	Window  int                 // operations in flight per stream; default 8
	MaxSize int                 // largest payload; default 64 KiB
	Mix     Mix                 // zero: DefaultMix
	Timeout uint8               // local ACK timeout code; default 16
	// RNR lets streams post SENDs and WRITE_IMMs before the receive they
	// consume is posted, and receivers keep only two receives posted, so
	// RNR NAKs happen. Off, a stream waits for the receive (credit-based
	// flow control, as applications do) and no RNR NAK is needed.
	RNR bool
	// Port is the hosts' port kind: rack.PortSocket (default) or
	// rack.PortShm. The faults are injected at the switch either way.
	Port string
	// Restarts restarts the rack's fabric this many times during the
	// run, evenly spaced in operations checked (restart.go); the checks
	// and their expectations do not change. Ethernet racks only.
	Restarts int
	// Racks, when set, starts the racks the hosts live on (racks joined
	// by links, such as racks on two hosts joined by VXLAN) from base,
	// which carries the MTU, memory size, faults and port kind, with
	// Hosts the total; the suite's hosts are the racks' hosts in order.
	// Nil starts one rack with every host. Restarts needs one rack.
	Racks func(ctx context.Context, base rack.Config) ([]*rack.Rack, error)
	// Progress, when set, is called about every two seconds with a line
	// to show.
	Progress func(format string, a ...any)

	// tamper is a test hook: it sees the memory holding an op's result
	// just before the suite checks it, and may change it.
	tamper func(s *stream, o *op, mem *rdma.HostMemory, addr uint64)
	// tamperUD is a test hook: it sees each datagram a host took (the
	// payload after the GRH area) before the check, and may change it.
	tamperUD func(host int, d []byte)
}

func (c *Config) defaults() error {
	if c.Hosts == 0 {
		c.Hosts = DefaultHosts
	}
	if c.Hosts != 2 && c.Hosts != 4 {
		return fmt.Errorf("faultsuite: %d hosts: want 2 or 4", c.Hosts)
	}
	if c.Ops == 0 {
		c.Ops = DefaultOps
	}
	if c.Ops < 1 {
		return fmt.Errorf("faultsuite: %d operations: want at least 1", c.Ops)
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Faults.Seed == 0 {
		c.Faults.Seed = c.Seed
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.QPs == 0 {
		c.QPs = DefaultQPs
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.MaxSize == 0 {
		c.MaxSize = DefaultMaxSize
	}
	if c.Mix == (Mix{}) {
		c.Mix = DefaultMix()
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	switch {
	case c.QPs < 1 || c.Window < 1 || c.Window > 64:
		return fmt.Errorf("faultsuite: %d QPs, window %d: want at least 1 QP and a window of 1 to 64", c.QPs, c.Window)
	case c.MaxSize < 8 || c.MaxSize > 1<<20:
		return fmt.Errorf("faultsuite: largest payload %d: want 8 B to 1 MiB", c.MaxSize)
	case c.Timeout > 31:
		return fmt.Errorf("faultsuite: timeout code %d: want 0 to 31", c.Timeout)
	case c.Restarts < 0 || c.Restarts > 100:
		return fmt.Errorf("faultsuite: %d fabric restarts: want 0 to 100", c.Restarts)
	case c.Restarts > 0 && c.Racks != nil:
		return fmt.Errorf("faultsuite: fabric restarts need the suite's own rack")
	}
	for k, w := range c.Mix {
		if w < 0 {
			return fmt.Errorf("faultsuite: weight of %v is negative", Kind(k))
		}
	}
	for _, p := range []float64{c.Faults.Drop, c.Faults.Duplicate, c.Faults.Reorder, c.Faults.Corrupt} {
		if p < 0 || p > 0.5 {
			return fmt.Errorf("faultsuite: fault probability %g: want 0 to 0.5", p)
		}
	}
	return nil
}

// A flow is a stream of operations on one transport with its own checks:
// one direction of an RC connection is one (stream, in rc.go). A UD or
// multicast kind brings a flow that runs its operations and counts what
// its transport may lose.
type flow interface {
	// run posts, polls and checks the flow's operations in order; it
	// returns the first failed check.
	run(ctx context.Context) error
	// finish runs the checks that need every flow done, such as no
	// completion after the last.
	finish() error
}

// suite is one run's state.
type suite struct {
	cfg     Config
	rack    *rack.Rack   // the first rack (the only one unless Config.Racks)
	racks   []*rack.Rack // every rack, in order
	hosts   []*rack.Host // every rack's hosts, in order
	streams []*stream
	recvs   []*receiver
	atomics []*hostAtomics // by host index
	mrs     []*rdma.MR     // the atomic and window MRs, deregistered before the endpoints close
	mws     []*rdma.MW     // the target windows, deallocated before them
	eps     []*rack.Endpoint
	done    atomic.Int64 // operations checked

	// The datagram flows (ud.go), when the mix has UD kinds.
	ud            []*udHost
	udSendersDone atomic.Int64
	udStalls      atomic.Int64

	// The fabric restarts (restart.go): the flow, and the last status of
	// each fabric a restart replaced.
	restarter  *restarter
	oldFabrics []fabric.Status
}

// Run runs the suite and returns its report. The error, if any, names the
// first operation that failed a check and why; the report is filled in
// as far as the run got.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &suite{cfg: cfg}
	if err := s.setup(ctx); err != nil {
		s.close()
		return nil, err
	}
	defer s.close()
	rep := s.newReport()
	start := time.Now()
	err := s.run(ctx)
	rep.Elapsed = time.Since(start)
	s.fill(rep)
	if err == nil {
		err = s.finish()
	}
	return rep, err
}

// bufSize is the registered buffer of one endpoint: the stream's local
// slots, the peer's WRITE targets, the receive slots and the READ source.
func (s *suite) bufSize() uint64 {
	c := s.cfg
	return uint64((2*c.Window + recvSlots + 2) * c.MaxSize)
}

func (s *suite) setup(ctx context.Context) error {
	c := s.cfg
	peers := c.Hosts - 1
	mem := int(s.bufSize()+4096)*peers*c.QPs + 1<<20 + udWindow*c.MTU + udRecvDepth*(40+c.MTU) + 8192
	base := rack.Config{Hosts: c.Hosts, MTU: c.MTU, MemSize: mem, Faults: c.Faults, Port: c.Port}
	start := c.Racks
	if start == nil {
		start = func(ctx context.Context, base rack.Config) ([]*rack.Rack, error) {
			r, err := rack.Start(ctx, base)
			if err != nil {
				return nil, err
			}
			return []*rack.Rack{r}, nil
		}
	}
	racks, err := start(ctx, base)
	if err != nil {
		return fmt.Errorf("faultsuite: %w", err)
	}
	s.racks = racks
	for _, r := range racks {
		s.hosts = append(s.hosts, r.Hosts...)
	}
	if len(racks) == 0 || len(s.hosts) != c.Hosts {
		return fmt.Errorf("faultsuite: the racks have %d hosts, want %d", len(s.hosts), c.Hosts)
	}
	s.rack = racks[0]
	for _, h := range s.hosts {
		addr, err := h.Alloc(8 * (addWords + swapWords))
		if err != nil {
			return fmt.Errorf("faultsuite: %w", err)
		}
		s.atomics = append(s.atomics, &hostAtomics{host: h, addr: addr})
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x6661756c74)) // "fault"
	for i := range c.Hosts {
		for j := i + 1; j < c.Hosts; j++ {
			for q := range c.QPs {
				if err := s.connect(ctx, s.hosts[i], s.hosts[j], q); err != nil {
					return err
				}
			}
		}
	}
	if c.Mix[UDSend]+c.Mix[McastSend] > 0 {
		if err := s.setupUD(); err != nil {
			return err
		}
	}
	// The plan: each op goes to a random stream (a datagram to a random
	// host's UD flow); each stream's receiver learns the ops that will
	// consume its receives.
	for range c.Ops {
		kind := c.Mix.pick(rng)
		if kinds[kind].ud {
			u := s.ud[rng.IntN(len(s.ud))]
			o := op{seq: len(u.ops), kind: kind, recv: -1, to: -1}
			if kind == UDSend {
				o.to = (u.idx + 1 + rng.IntN(c.Hosts-1)) % c.Hosts
			}
			o.size = max(udHeader+1, min(sizeFor(rng, c.MTU, c.MaxSize), c.MTU))
			u.ops = append(u.ops, o)
			continue
		}
		st := s.streams[rng.IntN(len(s.streams))]
		o := op{seq: len(st.ops), kind: kind, recv: -1}
		if kinds[o.kind].sized {
			o.size = sizeFor(rng, c.MTU, c.MaxSize)
			if o.kind == Read {
				o.readOff = rng.IntN(2*c.MaxSize - o.size + 1)
			}
		} else {
			o.size = 8
			if o.kind == FetchAdd {
				o.word = rng.IntN(addWords)
				o.add = 1 + rng.Uint64N(1<<20)
			} else {
				o.word = addWords + rng.IntN(swapWords)
			}
		}
		st.ops = append(st.ops, o)
	}
	for _, st := range s.streams {
		for i := range st.ops {
			if kinds[st.ops[i].kind].recv {
				st.ops[i].recv = len(st.peerRecv.expect)
				st.peerRecv.expect = append(st.peerRecv.expect, &st.ops[i])
			}
		}
	}
	return nil
}

// index returns h's place in s.hosts (Host.Index counts within its
// rack).
func (s *suite) index(h *rack.Host) int {
	for i, x := range s.hosts {
		if x == h {
			return i
		}
	}
	panic("faultsuite: a host of no rack")
}

// connect makes RC connection q between hosts a and b: two endpoints, a
// stream each way and a receiver at each end.
func (s *suite) connect(ctx context.Context, a, b *rack.Host, q int) error {
	c := s.cfg
	ea, eb, err := rack.ConnectRC(a, b, rack.RCOptions{BufSize: s.bufSize(), SendDepth: c.Window,
		RecvDepth: recvSlots, Events: true, Timeout: c.Timeout})
	if err != nil {
		return fmt.Errorf("faultsuite: %w", err)
	}
	s.eps = append(s.eps, ea, eb)
	access := rdma.AccessLocalWrite | rdma.AccessRemoteAtomic | rdma.AccessRemoteRead
	var mrs [2]*rdma.MR
	for i, e := range []*rack.Endpoint{ea, eb} {
		at := s.atomics[s.index(e.Host)]
		mr, err := e.Host.Device.RegMR(e.PD, at.addr, 8*(addWords+swapWords), access)
		if err != nil {
			return fmt.Errorf("faultsuite: %s: register the atomic words: %w", e.Host.Name, err)
		}
		s.mrs = append(s.mrs, mr)
		mrs[i] = mr
	}
	newEnd := func(e *rack.Endpoint, peer *rack.Host, id int) (*stream, *receiver, error) {
		l := layout(c, e)
		src := make([]byte, 2*c.MaxSize)
		fillPattern(src, readSeed(id))
		if err := e.Host.Memory.WriteAt(src, l.readSrc); err != nil {
			return nil, nil, err
		}
		st := &stream{suite: s, id: id, local: e, lay: l, readSrc: src,
			name: fmt.Sprintf("%s>%s/qp%d", e.Host.Name, peer.Name, q)}
		rv := &receiver{suite: s, ep: e, lay: l, credit: make(chan struct{}, 1)}
		return st, rv, nil
	}
	sa, ra, err := newEnd(ea, b, len(s.streams))
	if err != nil {
		return err
	}
	sb, rb, err := newEnd(eb, a, len(s.streams)+1)
	if err != nil {
		return err
	}
	// Each stream writes into its peer's memory and reads the peer's READ
	// source; the peer's receiver takes its SENDs.
	var keys [2]uint32
	for i, e := range []*rack.Endpoint{ea, eb} {
		if keys[i], err = s.targetWindow(ctx, e); err != nil {
			return err
		}
	}
	sa.windowKey, sb.windowKey = keys[1], keys[0]
	sa.remote, sa.peer, sa.peerRecv, sa.atomicKey = eb, sb, rb, mrs[1].RKey
	sb.remote, sb.peer, sb.peerRecv, sb.atomicKey = ea, sa, ra, mrs[0].RKey
	sa.peerAtomics, sb.peerAtomics = s.atomics[s.index(b)], s.atomics[s.index(a)]
	ra.from, rb.from = sb, sa
	s.streams = append(s.streams, sa, sb)
	s.recvs = append(s.recvs, ra, rb)
	return nil
}

// targetWindow binds a type 2 window over e's target slots to e's QP
// (the one the peer's WRITEs arrive on), through an MR of its own with
// MW_BIND, and returns its R_Key. The bind is unsignaled: it completes
// silently before any op, or with an error the stream's poller reports.
func (s *suite) targetWindow(ctx context.Context, e *rack.Endpoint) (uint32, error) {
	c := s.cfg
	l := layout(c, e)
	size := uint64(c.Window) * l.slot
	d := e.Host.Device
	mr, err := d.RegMR(e.PD, l.target, size, rdma.AccessLocalWrite|rdma.AccessRemoteWrite|rdma.AccessMWBind)
	if err != nil {
		return 0, fmt.Errorf("faultsuite: %s: register the window's MR: %w", e.Host.Name, err)
	}
	s.mrs = append(s.mrs, mr)
	mw, err := d.AllocMW(e.PD, rdma.MWType2)
	if err != nil {
		return 0, fmt.Errorf("faultsuite: %s: alloc MW: %w", e.Host.Name, err)
	}
	s.mws = append(s.mws, mw)
	key := mw.RKey()&^0xff | (mw.RKey()+1)&0xff
	if err := e.QP.PostSend([]rdma.SendWR{{WRID: ^uint64(0), Opcode: rdma.WRBindMW, Bind: rdma.MWBind{
		MWKey: mw.RKey(), NewRKey: key, LKey: mr.LKey, Addr: l.target, Length: size, Access: rdma.AccessRemoteWrite}}}); err != nil {
		return 0, fmt.Errorf("faultsuite: %s: bind MW: %w", e.Host.Name, err)
	}
	// The engine binds as soon as it takes the WR (the SQ is empty).
	for {
		if _, _, _, ok := mw.Bound(); ok {
			return key, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("faultsuite: %s: bind MW: %w", e.Host.Name, ctx.Err())
		case <-time.After(100 * time.Microsecond):
		}
	}
}

// run runs every flow to the end or to the first failure, which stops
// the others.
func (s *suite) run(parent context.Context) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var flows []flow
	for _, st := range s.streams {
		flows = append(flows, st)
	}
	for _, rv := range s.recvs {
		flows = append(flows, rv)
	}
	for _, u := range s.ud {
		flows = append(flows, udSender{u}, udReceiver{u})
	}
	if s.cfg.Restarts > 0 {
		s.restarter = &restarter{s: s}
		flows = append(flows, s.restarter)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, f := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := f.run(ctx)
			if err == nil || errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return
			}
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			var fe flushError
			if errors.As(err, &fe) {
				// A flush follows the error that moved the QP to ERR,
				// which its requester or receiver is about to see:
				// give it a moment to be the one reported.
				time.AfterFunc(flushGrace, cancel)
				return
			}
			cancel()
		}()
	}
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	if s.cfg.Progress != nil {
		pwg.Add(1)
		go s.progress(stop, &pwg)
	}
	wg.Wait()
	close(stop)
	pwg.Wait()
	if len(errs) == 0 {
		return parent.Err()
	}
	// Report the first error that is not a flush, else the first flush.
	first := errs[0]
	for _, err := range errs {
		var fe flushError
		if !errors.As(err, &fe) {
			first = err
			break
		}
	}
	if len(errs) > 1 {
		return fmt.Errorf("%w (and %d more failures)", first, len(errs)-1)
	}
	return first
}

func (s *suite) progress(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	start := time.Now()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			d := s.done.Load()
			s.cfg.Progress("faults: %d/%d operations checked (%.0f %%), %v", d, s.cfg.Ops,
				100*float64(d)/float64(s.cfg.Ops), time.Since(start).Round(time.Second))
		}
	}
}

// finish runs the checks that need every flow done: no completion after
// the last one, the atomic ledgers against memory, and no completion error
// or CQ overflow on any engine.
func (s *suite) finish() error {
	var errs []error
	for _, st := range s.streams {
		errs = append(errs, st.finish())
	}
	for _, rv := range s.recvs {
		errs = append(errs, rv.finish())
	}
	if s.restarter != nil {
		errs = append(errs, s.restarter.finish())
	}
	for _, at := range s.atomics {
		errs = append(errs, at.check())
	}
	// Every atomic executed exactly once: duplicates are answered from
	// the replay ring, never executed again.
	var atomics, executed uint64
	for _, st := range s.streams {
		for _, o := range st.ops {
			if o.kind == FetchAdd || o.kind == CmpSwap {
				atomics++
			}
		}
	}
	for _, h := range s.hosts {
		c := h.Device.Counters()
		executed += c.AtomicsExecuted
		if c.CompletionErrors != 0 || c.CQOverflows != 0 {
			errs = append(errs, fmt.Errorf("%s: %d completion errors, %d CQ overflows", h.Name, c.CompletionErrors, c.CQOverflows))
		}
	}
	if executed != atomics {
		errs = append(errs, fmt.Errorf("the engines executed %d atomics for %d atomic operations", executed, atomics))
	}
	if _, err := s.udTotals(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("faultsuite: %w", err)
	}
	return nil
}

func (s *suite) close() {
	for i := len(s.ud) - 1; i >= 0; i-- {
		_ = s.ud[i].ep.Close()
	}
	for _, mw := range s.mws {
		_ = mw.Dealloc()
	}
	for _, mr := range s.mrs {
		_ = mr.Dereg()
	}
	for i := len(s.eps) - 1; i >= 0; i-- {
		_ = s.eps[i].Close()
	}
	for _, r := range s.racks {
		_ = r.Close()
	}
}
