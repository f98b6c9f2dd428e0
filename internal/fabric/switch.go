package fabric

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/PacketFive/hinic/internal/clock"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/shmport"
)

// handshakeLimit bounds the connections of one switch that are between
// accept and the end of their hello; more are closed at once.
const handshakeLimit = 16

// Switch is one HiSwitch. Its methods are safe for concurrent use.
type Switch struct {
	cfg     switchSettings
	clock   clock.Clock
	log     *slog.Logger
	ioBatch int
	sockBuf int
	shmOn   bool   // ports accept shared-memory rings
	shmMax  uint64 // the largest region a port accepts
	shmOpt  shmport.Options
	epoch   time.Time
	pool    *framePool
	ports   []*port
	fdb     *fdb
	pcapDir string
	pcapMax int64

	ib       IBSwitch // nil when the switch has no IB port
	ibMu     sync.Mutex
	ibIn     *port // the ingress port of the packet ibsw is working on
	ibNow    time.Time
	ibEmits  int
	ibEmitFn func(out int, pkt []byte)

	// dialTunnel opens vxlan ports' sockets (Config.DialTunnel).
	dialTunnel func(d *net.Dialer, network, address string) (net.Conn, error)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	hsSem  chan struct{}

	closing   atomic.Bool // set first by close
	mu        sync.Mutex  // guards started, closed, timers
	started   bool
	closed    bool
	sweepT    clock.Timer
	flushT    *time.Timer
	closeOnce sync.Once
}

func newSwitch(s switchSettings, c *Config) (*Switch, error) {
	bufSize := 0
	hasIB := false
	for _, p := range s.ports {
		bufSize = max(bufSize, p.maxFrame)
		hasIB = hasIB || p.link == LinkIB
	}
	ctx, cancel := context.WithCancel(context.Background())
	sw := &Switch{
		cfg: s, clock: c.Clock, log: c.Logger.With("switch", s.name), ioBatch: c.IOBatch, sockBuf: int(c.SocketBuffer),
		epoch: c.Clock.Now(), pool: newFramePool(bufSize), fdb: newFDB(s.fdbSize, int64(s.aging)),
		pcapDir: c.Pcap, pcapMax: int64(c.PcapMax), ctx: ctx, cancel: cancel, hsSem: make(chan struct{}, handshakeLimit),
	}
	sw.shmOn, sw.shmMax = !c.NoShm, uint64(c.ShmMax)
	sw.dialTunnel = c.DialTunnel
	if !c.ShmNoPoll {
		sw.shmOpt.Poll = shmport.DefaultPoll
	}
	sw.ibEmitFn = sw.ibEmit
	for i := range s.ports {
		sw.ports = append(sw.ports, newPort(sw, i, s.ports[i], bufSize))
	}
	for _, st := range s.static {
		sw.fdb.addStatic(makeKey(st.vlan, st.mac[:]), st.port-1)
	}
	if hasIB {
		newIB := c.NewIB
		if newIB == nil {
			newIB = defaultIB
		}
		ib, err := newIB(IBConfig{NodeGUID: s.nodeGUID, NumPorts: len(s.ports), Description: "HiSwitch " + s.name, Clock: c.Clock})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("fabric: switch %s: IB engine: %w", s.name, err)
		}
		sw.ib = ib
	}
	return sw, nil
}

// Name returns the switch's name.
func (sw *Switch) Name() string { return sw.cfg.name }

// NumPorts returns the number of ports.
func (sw *Switch) NumPorts() int { return len(sw.ports) }

// SocketPath returns the socket path of port num (1-based).
func (sw *Switch) SocketPath(num int) string {
	if num < 1 || num > len(sw.ports) {
		return ""
	}
	return sw.ports[num-1].cfg.path
}

// PortMAC returns the MAC address the switch uses on port num (the
// source of its PFC frames).
func (sw *Switch) PortMAC(num int) net.HardwareAddr {
	if num < 1 || num > len(sw.ports) {
		return nil
	}
	m := sw.ports[num-1].mac
	return net.HardwareAddr(m[:])
}

// nanotime returns t as nanoseconds since the switch was made.
func (sw *Switch) nanotime(t time.Time) int64 { return int64(t.Sub(sw.epoch)) }

// start opens the listening ports, dials the dialling ones and starts
// the timers.
func (sw *Switch) start() error {
	sw.mu.Lock()
	if sw.closed {
		sw.mu.Unlock()
		return ErrClosed
	}
	sw.started = true
	sw.mu.Unlock()
	for _, p := range sw.ports {
		if err := p.openCapture(sw.pcapDir, sw.pcapMax); err != nil {
			return err
		}
	}
	for _, p := range sw.ports {
		if p.linked {
			continue
		}
		if p.tun != nil {
			p.tun.start()
			continue
		}
		if p.cfg.dial != "" {
			sw.wg.Add(1)
			go p.dialLoop()
			continue
		}
		if err := p.listen(); err != nil {
			return err
		}
	}
	sw.armSweep()
	sw.armFlush()
	return nil
}

// sweepInterval is how often expired FDB entries are deleted (lookups
// already ignore them).
func (sw *Switch) sweepInterval() time.Duration {
	return min(max(sw.cfg.aging/4, time.Second), 30*time.Second)
}

func (sw *Switch) armSweep() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.closed {
		return
	}
	sw.sweepT = sw.clock.AfterFunc(sw.sweepInterval(), func() {
		sw.fdb.sweep(sw.nanotime(sw.clock.Now()))
		sw.armSweep()
	})
}

// armFlush flushes the captures every second, so that a capture read
// while the switch runs is at most a second behind.
func (sw *Switch) armFlush() {
	if sw.pcapDir == "" {
		return
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.closed {
		return
	}
	sw.flushT = time.AfterFunc(time.Second, func() {
		for _, p := range sw.ports {
			p.cap.flush()
		}
		sw.armFlush()
	})
}

// close stops the switch: listeners closed (their sockets unlinked),
// sessions ended, goroutines joined, captures closed. It is idempotent.
func (sw *Switch) close() {
	sw.closeOnce.Do(func() {
		sw.closing.Store(true)
		sw.mu.Lock()
		sw.closed = true
		if sw.sweepT != nil {
			sw.sweepT.Stop()
		}
		if sw.flushT != nil {
			sw.flushT.Stop()
		}
		sw.mu.Unlock()
		sw.cancel()
		for _, p := range sw.ports {
			p.closeListener()
		}
		for _, p := range sw.ports {
			p.eg.stop()
			p.endSession()
		}
		sw.wg.Wait()
		for _, p := range sw.ports {
			p.cap.close()
		}
	})
}

// wakeWaiters makes rx goroutines blocked on a full lossless queue
// re-check whether their session still runs.
func (sw *Switch) wakeWaiters() {
	for _, p := range sw.ports {
		p.eg.wake()
	}
}

// receive runs the ingress pipeline on a frame read from port p, taking
// ownership of f. It is the single entry point of received frames (the
// fuzz target): nothing in f can make it panic; what it cannot forward
// it counts and drops.
func (sw *Switch) receive(p *port, f *frame, now time.Time) {
	n := len(f.buf)
	p.ctr.rxFrames.Add(1)
	p.ctr.rxBytes.Add(uint64(n))
	p.cap.write(now, f.buf)
	if n > p.cfg.maxFrame {
		sw.drop(p, f, DropOversize)
		return
	}
	if p.faults != nil {
		p.faults.apply(sw, p, f, now)
		return
	}
	sw.process(p, f, now)
}

// process forwards a frame that passed fault injection.
func (sw *Switch) process(p *port, f *frame, now time.Time) {
	if p.cfg.link == LinkIB {
		sw.ibIngress(p, f, now)
		return
	}
	sw.ethIngress(p, f, now)
}

// drop counts f against port p and returns it to the pool.
func (sw *Switch) drop(p *port, f *frame, why DropReason) {
	p.ctr.drops[why].Add(1)
	sw.pool.put(f)
}

// ethIngress is the Ethernet pipeline: parse, MAC Control, VLAN,
// learning, lookup, traffic class, forwarding or flooding.
func (sw *Switch) ethIngress(p *port, f *frame, now time.Time) {
	pkt, err := proto.Parse(f.buf, proto.LinkEthernet)
	if err != nil && err != proto.ErrUnknownOpcode {
		// A switch forwards what it cannot interpret above L2 only when
		// L2 itself is sound; HiNIC's peers never send a broken IP or
		// RoCE header, so one is a fault to count, not to pass on.
		sw.drop(p, f, DropMalformed)
		return
	}
	eth := pkt.Eth
	if pkt.Type == proto.FrameMACControl {
		// PAUSE and PFC stop this port's egress: only a trusted peer
		// may send them (a guest that could would stall the port).
		if !p.cfg.trustPause {
			sw.drop(p, f, DropMACControl)
			return
		}
		p.onMACControl(pkt.MACControl, now)
		sw.pool.put(f)
		return
	}
	dst, src := eth.Dst(), eth.Src()
	if isLinkLocal(dst) {
		// IEEE 802.1Q table 8-1: bridges never forward these (LLDP,
		// STP, MAC Control); HiSwitch has no protocol entity for them.
		sw.pool.put(f)
		return
	}
	if src[0]&1 != 0 {
		sw.drop(p, f, DropMalformed) // a group address as source
		return
	}
	vlan := eth.VLANID()
	if vlan == 0 || !eth.HasVLAN() {
		vlan = p.cfg.pvid
	}
	if vlan == 0xFFF || !p.cfg.member(vlan) {
		sw.drop(p, f, DropVLAN)
		return
	}
	var tc uint8
	switch {
	case eth.HasVLAN():
		tc = sw.cfg.pcpToTC[eth.PCP()]
	case pkt.IPv4 != nil:
		tc = sw.cfg.dscpToTC[pkt.IPv4.DSCP()]
	case pkt.IPv6 != nil:
		tc = sw.cfg.dscpToTC[pkt.IPv6.TrafficClass()>>2]
	}
	f.in, f.tc, f.lossless = int16(p.idx), tc, sw.cfg.lossless[tc]
	switch {
	case pkt.IPv4 != nil && isECT(pkt.IPv4.ECN()):
		f.ipOff = uint16(len(eth))
	case pkt.IPv6 != nil && isECT(pkt.IPv6.ECN()):
		f.ipOff, f.ipv6 = uint16(len(eth)), true
	}
	t := sw.nanotime(now)
	sw.fdb.learn(makeKey(vlan, src), p.idx, t)
	if dst[0]&1 == 0 {
		if out, ok := sw.fdb.lookup(makeKey(vlan, dst), t); ok {
			if out == p.idx {
				sw.drop(p, f, DropFiltered)
				return
			}
			o := sw.ports[out]
			if o.cfg.link != LinkEthernet {
				sw.drop(p, f, DropLinkLayer)
				return
			}
			if !o.cfg.member(vlan) {
				sw.drop(p, f, DropVLAN)
				return
			}
			sw.enqueue(p, o, f, now)
			return
		}
	}
	sw.flood(p, f, vlan, now)
}

// flood sends f to every other up Ethernet port in its VLAN: broadcast,
// multicast (no snooping) and unknown unicast. The last port gets f
// itself, the others copies.
func (sw *Switch) flood(p *port, f *frame, vlan uint16, now time.Time) {
	p.ctr.floods.Add(1)
	last := -1
	for _, o := range sw.ports {
		if o == p || !o.up.Load() || o.cfg.link != LinkEthernet || !o.cfg.member(vlan) {
			continue
		}
		if last >= 0 {
			sw.enqueue(p, sw.ports[last], sw.pool.clone(f), now)
		}
		last = o.idx
	}
	if last < 0 {
		sw.pool.put(f)
		return
	}
	sw.enqueue(p, sw.ports[last], f, now)
}

// enqueue hands f to egress port o, charging it to ingress port in.
func (sw *Switch) enqueue(in, o *port, f *frame, now time.Time) {
	size := int64(len(f.buf))
	// f belongs to the egress queue once enqueue took it: it may be
	// sent and back in the pool before the counters below are added.
	tc := f.tc & (NumTC - 1)
	in.charge(f.tc, size, now)
	switch o.eg.enqueue(f, in, now) {
	case enqOK:
		return
	case enqMarked:
		o.ctr.ecnClass[tc].Add(1)
		return
	case enqFull:
		o.ctr.drops[DropQueueFull].Add(1)
		o.ctr.queueFullClass[tc].Add(1)
	case enqLinkDown, enqAborted:
		o.ctr.drops[DropLinkDown].Add(1)
	}
	in.uncharge(f.tc, size)
	sw.pool.put(f)
}

// sent releases frames the tx goroutine has written (or dropped when the
// port went down).
func (sw *Switch) release(f *frame) {
	if f.in >= 0 && int(f.in) < len(sw.ports) {
		sw.ports[f.in].uncharge(f.tc, int64(len(f.buf)))
	}
	sw.pool.put(f)
}

func isLinkLocal(d []byte) bool {
	return d[0] == 0x01 && d[1] == 0x80 && d[2] == 0xC2 && d[3] == 0 && d[4] == 0 && d[5]&0xF0 == 0
}

func isECT(ecn uint8) bool { return ecn == proto.ECNECT0 || ecn == proto.ECNECT1 }
