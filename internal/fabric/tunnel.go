package fabric

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/PacketFive/hinic/internal/mmsg"
	"github.com/PacketFive/hinic/internal/proto"
)

// Links between hosts. A port of kind vxlan is a cable to a switch in
// another process, usually on another host, over UDP: an Ethernet link
// is VXLAN (RFC 7348, port 4789), so tshark dissects the tunnel and the
// RoCEv2 inside it; an IB link is HiNIC's IB-over-UDP (port 4792). Both
// headers are in package proto; docs/fabric-wire.md draws them.
//
// The tunnel is a relay in front of an ordinary port session: when the
// first valid datagram from the remote arrives, the tunnel makes a
// SOCK_SEQPACKET pair, attaches one end to the port as its peer (as an
// in-process link does) and relays between the other end and the UDP
// socket: rx decapsulates datagrams into the pair, txRelay encapsulates
// the port's frames in place (the header goes in the headroom before the
// frame) and sends them. The pipeline, queues, PFC, capture and fault
// injection of the port stay those of every port.
//
// Link state: each side sends a keepalive every tunnelKeepalive; a
// link that has seen no valid datagram for tunnelDeadAfter goes down
// (its relay end closes, so the port goes down as when a cable is
// pulled) and comes up with the next one.
//
// Lossless classes: PFC frames are inner frames and cross the tunnel as
// on a cable. The UDP socket is the ingress port's buffer: the underlay
// and a full socket drop datagrams where a cable would have stopped the
// sender. So the tunnel watches the bytes waiting in its socket
// (SO_MEMINFO) and, above tunnelPauseFraction of the receive buffer,
// pauses the peer itself: a PFC XOFF of every priority on Ethernet
// (the switch already holds its whole ingress port while a lossless
// class waits, fabric.md "Limits"), an IB-over-UDP XOFF on IB, which
// stops the peer's relay. The pause is refreshed every tunnelRefresh
// while the backlog lasts and lifted (XON) when it drains below half the
// threshold. What the peer sends between the XOFF and its stop (its
// relay's socket pair, one batch) must fit the rest of the buffer; the
// tunnel asks for tunnelRecvBuffer with SO_RCVBUFFORCE and reports the
// headroom it got. Datagrams the kernel still drops are counted
// (underlay_drops), never silent.

// Tunnel settings.
const (
	// tunnelKeepalive is the keepalive interval; tunnelDeadAfter the
	// silence after which the link is down.
	tunnelKeepalive = time.Second
	tunnelDeadAfter = 3500 * time.Millisecond
	// tunnelRetry is the wait before the socket is opened again after
	// a failure (address not there yet, for example).
	tunnelRetry = time.Second
	// tunnelPauseFraction: the peer is paused when the socket holds
	// more than 1/tunnelPauseFraction of its receive buffer.
	tunnelPauseFraction = 4
	// tunnelRefresh is how often a pause in force is renewed; an IB
	// XOFF lapses after tunnelIBPause without one.
	tunnelRefresh = time.Millisecond
	tunnelIBPause = 4 * tunnelRefresh
	// tunnelRecvBuffer is the receive buffer asked for (the kernel
	// doubles it for its accounting).
	tunnelRecvBuffer = 8 << 20
	// DefaultTunnelSpeed is a vxlan port's default speed: at 1 Gbit/s
	// the longest PFC pause (65535 quanta) is 33.6 ms, so a pause
	// outlasts a renewal that a loaded host delays by milliseconds
	// (measured on the 2-core build machine: PFC frames arriving 8 ms
	// apart let a 3.4 ms pause at 10 Gbit/s lapse and the peer overrun
	// the socket). The XON ends it as soon as the backlog drains.
	DefaultTunnelSpeed = BitRate(1e9)
)

// Encapsulations, as status shows them.
const (
	EncapVXLAN = "vxlan"
	EncapIBUDP = "ib-udp"
)

// Reasons a datagram is dropped by the tunnel, counted per port.
const (
	TunnelBadShort    = "short"     // shorter than the header and an inner header
	TunnelBadHeader   = "header"    // flags, magic, version or type wrong
	TunnelBadVNI      = "vni"       // another VNI
	TunnelBadOversize = "oversize"  // inner frame over the port's max-frame
	TunnelBadDown     = "link-down" // the port could not take it (switch closing)
)

var tunnelBadReasons = []string{TunnelBadShort, TunnelBadHeader, TunnelBadVNI, TunnelBadOversize, TunnelBadDown}

// tunnelSettings is a vxlan port's resolved configuration.
type tunnelSettings struct {
	remote, local string // host:port
	vni           uint32
}

func resolveTunnel(pc *PortConfig, link string) (tunnelSettings, error) {
	port := proto.VXLANPort
	if link == LinkIB {
		port = proto.IBUDPPort
	}
	var t tunnelSettings
	if pc.VNI < 1 || pc.VNI > proto.MaxVNI {
		return t, fmt.Errorf("vni %d: a vxlan port needs one, 1 to %d", pc.VNI, proto.MaxVNI)
	}
	t.vni = uint32(pc.VNI)
	if pc.Remote == "" {
		return t, errors.New("a vxlan port needs remote (host or host:port)")
	}
	var err error
	if t.remote, err = withPort(pc.Remote, port); err != nil {
		return t, fmt.Errorf("remote %q: %w", pc.Remote, err)
	}
	if h, _, _ := net.SplitHostPort(t.remote); h == "" {
		return t, fmt.Errorf("remote %q: no host", pc.Remote)
	}
	if t.local, err = withPort(pc.Local, port); err != nil {
		return t, fmt.Errorf("local %q: %w", pc.Local, err)
	}
	return t, nil
}

// withPort returns addr as host:port, adding def when addr has no port.
func withPort(addr string, def int) (string, error) {
	if addr == "" {
		return net.JoinHostPort("", strconv.Itoa(def)), nil
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		// No port: a host name, an IPv4 address, an IPv6 address with
		// or without brackets.
		h = strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
		return net.JoinHostPort(h, strconv.Itoa(def)), nil
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q: must be 1 to 65535", p)
	}
	return net.JoinHostPort(h, p), nil
}

// TunnelStatus is a vxlan port's tunnel in `hinic fabric status`.
type TunnelStatus struct {
	Encap  string `json:"encap"` // "vxlan" or "ib-udp"
	Local  string `json:"local"` // the bound address
	Remote string `json:"remote"`
	VNI    uint32 `json:"vni"`
	// Link is "up" while datagrams from the remote arrive (keepalives
	// at least every second), else "down"; LastSeen is seconds since
	// the last one (-1: never).
	Link     string  `json:"link"`
	LastSeen float64 `json:"last_seen_seconds"`
	Error    string  `json:"error,omitempty"` // why the socket is not open

	RxDatagrams  uint64 `json:"rx_datagrams"`
	RxBytes      uint64 `json:"rx_bytes"`
	TxDatagrams  uint64 `json:"tx_datagrams"`
	TxBytes      uint64 `json:"tx_bytes"`
	KeepalivesRx uint64 `json:"keepalives_received"`
	KeepalivesTx uint64 `json:"keepalives_sent"`
	// Bad counts dropped datagrams by reason (short, header, vni,
	// oversize, link-down).
	Bad map[string]uint64 `json:"bad"`
	// UnderlayDrops are datagrams the kernel dropped because the socket
	// was full (SO_MEMINFO); TxErrors sends that failed (the remote
	// unreachable, ICMP port unreachable).
	UnderlayDrops uint64 `json:"underlay_drops"`
	TxErrors      uint64 `json:"tx_errors"`
	// RecvBuffer is the socket's receive buffer as the kernel accounts
	// it; PauseAt the backlog at which the peer is paused; Headroom
	// what is left above it for frames in flight.
	RecvBuffer int `json:"recv_buffer"`
	PauseAt    int `json:"pause_at"`
	Headroom   int `json:"headroom"`
	// Paused says the tunnel is pausing its peer now; PausesSent counts
	// the pauses (and refreshes) it sent, PausedByPeer the IB XOFFs the
	// peer sent.
	Paused       bool   `json:"paused"`
	PausesSent   uint64 `json:"pauses_sent"`
	PausedByPeer uint64 `json:"paused_by_peer"`
}

// tunnel is a vxlan port's UDP side. conn is set once by run before
// the goroutines start; link changes under mu and is read atomically;
// the counters are atomic.
type tunnel struct {
	p   *port
	cfg tunnelSettings
	ib  bool

	conn    *net.UDPConn // set by run before ready
	ready   atomic.Bool
	sockErr atomic.Pointer[string]
	rcvbuf  int // the kernel's accounting of the receive buffer
	pauseAt int

	mu   sync.Mutex
	link atomic.Pointer[tunnelLink]
	// lastSeen is the clock time (ns since the switch's epoch) of the
	// last valid datagram; 0 never.
	lastSeen atomic.Int64

	// Backlog pause towards the peer (pmu guards the timers); rxBusy
	// says rx waits for the port to take frames.
	pmu    sync.Mutex
	paused atomic.Bool
	pauseT *time.Timer
	watchT *time.Timer
	rxBusy atomic.Bool

	// IB: the peer asked txRelay to stop until peerStop (ns since the
	// switch's epoch); resume wakes it.
	peerStop atomic.Int64
	resume   chan struct{}

	rxDgrams, rxBytes, txDgrams, txBytes   atomic.Uint64
	kaRx, kaTx, txErrs, pausesTx, peerXOFF atomic.Uint64
	bad                                    [5]atomic.Uint64 // by tunnelBadReasons
	kaSeq                                  atomic.Uint32
}

// tunnelLink is one session's relay: conn is the relay's end of the
// socket pair whose other end is the port's peer connection; w writes
// into it (rx goroutine), r reads from it (txRelay).
type tunnelLink struct {
	conn *net.UnixConn
	w, r *mmsg.Conn
}

func newTunnel(p *port) *tunnel {
	return &tunnel{p: p, cfg: p.cfg.tunnel, ib: p.cfg.link == LinkIB, resume: make(chan struct{}, 1)}
}

func (t *tunnel) badCount(reason string) *atomic.Uint64 {
	for i, r := range tunnelBadReasons {
		if r == reason {
			return &t.bad[i]
		}
	}
	panic("fabric: unknown tunnel drop reason " + reason)
}

// start opens the socket, so that the port listens when the switch has
// started, and runs the tunnel; a socket that cannot be opened yet (an
// address not configured, a name not resolving) is tried again every
// tunnelRetry, with the error in status.
func (t *tunnel) start() {
	err := t.open()
	t.p.sw.wg.Add(1)
	go t.run(err)
}

// run runs the receive loop and the keepalives once the socket is open.
func (t *tunnel) run(err error) {
	sw := t.p.sw
	defer sw.wg.Done()
	for err != nil {
		msg := err.Error()
		t.sockErr.Store(&msg)
		sw.log.Warn("vxlan port: socket", "port", t.p.cfg.num, "err", err)
		select {
		case <-sw.ctx.Done():
			return
		case <-time.After(tunnelRetry):
		}
		err = t.open()
	}
	t.sockErr.Store(nil)
	t.ready.Store(true)
	stop := context.AfterFunc(sw.ctx, func() { t.conn.Close() })
	defer stop()
	sw.wg.Add(1)
	go t.keepalive()
	t.rxLoop()
	t.down(nil)
	t.pmu.Lock()
	for _, tm := range []*time.Timer{t.pauseT, t.watchT} {
		if tm != nil {
			tm.Stop()
		}
	}
	t.pmu.Unlock()
}

// open makes the UDP socket: bound to local (SO_REUSEADDR, so that
// links to several remotes share a port; the kernel hands each the
// datagrams of its remote), connected to remote (the kernel takes only
// datagrams from it), with the receive buffer forced to
// tunnelRecvBuffer where the process may (CAP_NET_ADMIN).
func (t *tunnel) open() error {
	sw := t.p.sw
	laddr, err := net.ResolveUDPAddr("udp", t.cfg.local)
	if err != nil {
		return fmt.Errorf("local %s: %w", t.cfg.local, err)
	}
	d := &net.Dialer{LocalAddr: laddr, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, tunnelRecvBuffer) != nil {
				_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, tunnelRecvBuffer)
			}
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, sw.sockBuf)
		})
		return errors.Join(err, serr)
	}}
	dial := sw.dialTunnel
	if dial == nil {
		dial = func(d *net.Dialer, network, address string) (net.Conn, error) { return d.Dial(network, address) }
	}
	c, err := dial(d, "udp", t.cfg.remote)
	if err != nil {
		return fmt.Errorf("remote %s: %w", t.cfg.remote, err)
	}
	uc, ok := c.(*net.UDPConn)
	if !ok {
		c.Close()
		return errors.New("not a UDP socket")
	}
	t.conn = uc
	if rc, err := uc.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			t.rcvbuf, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		})
	}
	t.pauseAt = t.rcvbuf / tunnelPauseFraction
	if t.rcvbuf < 2*tunnelRecvBuffer {
		sw.log.Warn("vxlan port: small receive buffer, lossless classes may lose frames on the underlay: run as root or raise net.core.rmem_max",
			"port", t.p.cfg.num, "bytes", t.rcvbuf, "want", 2*tunnelRecvBuffer)
	}
	return nil
}

// rxLoop reads datagrams in batches, checks them and hands the inner
// frames to the port, bringing the link up on the first valid one.
func (t *tunnel) rxLoop() {
	sw, p := t.p.sw, t.p
	r, err := mmsg.NewDatagram(t.conn, sw.ioBatch)
	if err != nil {
		return
	}
	n := sw.ioBatch
	// One byte more than the largest datagram that can be valid, so a
	// longer one reads as truncated.
	size := proto.TunnelHeaderSize + p.cfg.maxFrame + 1
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	sizes, trunc := make([]int, n), make([]bool, n)
	out := make([][]byte, 0, n)
	for {
		got, err := r.ReadBatch(bufs, sizes, trunc)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || sw.ctx.Err() != nil {
				return
			}
			// ECONNREFUSED: an ICMP port unreachable for an earlier
			// send (the remote is not listening yet); anything else is
			// transient too. Neither ends the link.
			t.txErrs.Add(1)
			continue
		}
		now := sw.clock.Now()
		out = out[:0]
		for i := range got {
			if trunc[i] {
				t.rxDgrams.Add(1)
				t.rxBytes.Add(uint64(sizes[i]))
				t.badCount(TunnelBadOversize).Add(1)
				continue
			}
			if inner, ok := t.decap(bufs[i][:sizes[i]], now); ok {
				out = append(out, inner)
			}
		}
		if got > 1 || t.paused.Load() {
			t.checkBacklog()
		}
		if len(out) == 0 {
			continue
		}
		l := t.link.Load()
		if l == nil {
			l = t.up()
		}
		if l == nil || t.deliver(l, out) != nil {
			t.badCount(TunnelBadDown).Add(uint64(len(out)))
		}
	}
}

// deliver writes frames into the relay, waiting while the port cannot
// take them (a lossless class waits for space). While it waits the
// datagrams pile up in the socket, so a timer watches the backlog in
// its place, and the remote counts as heard from (its datagrams are
// there, unread).
func (t *tunnel) deliver(l *tunnelLink, out [][]byte) error {
	k, err := l.w.TryWriteBatch(out)
	if err != nil || k == len(out) {
		return err
	}
	t.rxBusy.Store(true)
	t.pmu.Lock()
	if t.watchT == nil {
		t.watchT = time.AfterFunc(tunnelRefresh, t.watchBlocked)
	} else {
		t.watchT.Reset(tunnelRefresh)
	}
	t.pmu.Unlock()
	err = l.w.WriteBatch(out[k:])
	t.rxBusy.Store(false)
	return err
}

// watchBlocked checks the backlog while rx waits in deliver.
func (t *tunnel) watchBlocked() {
	if !t.rxBusy.Load() || t.p.sw.closing.Load() {
		return
	}
	t.checkBacklog()
	t.pmu.Lock()
	t.watchT.Reset(tunnelRefresh)
	t.pmu.Unlock()
}

// decap checks one datagram and returns the inner frame to forward, if
// any; a keepalive or a flow-control datagram is consumed here. Any
// valid datagram refreshes the link and brings it up.
func (t *tunnel) decap(b []byte, now time.Time) ([]byte, bool) {
	t.rxDgrams.Add(1)
	t.rxBytes.Add(uint64(len(b)))
	var vni uint32
	var inner []byte
	var err error
	typ := uint8(proto.IBUDPData)
	if t.ib {
		typ, vni, inner, err = proto.ParseIBUDP(b)
	} else {
		vni, inner, err = proto.ParseVXLAN(b)
	}
	switch {
	case errors.Is(err, proto.ErrTruncated):
		t.badCount(TunnelBadShort).Add(1)
		return nil, false
	case err != nil:
		t.badCount(TunnelBadHeader).Add(1)
		return nil, false
	case vni != t.cfg.vni:
		t.badCount(TunnelBadVNI).Add(1)
		return nil, false
	case len(inner) > t.p.cfg.maxFrame:
		t.badCount(TunnelBadOversize).Add(1)
		return nil, false
	}
	t.lastSeen.Store(max(t.p.sw.nanotime(now), 1))
	switch {
	case typ == proto.IBUDPKeepalive || (!t.ib && proto.IsKeepaliveFrame(inner)):
		t.kaRx.Add(1)
		if t.link.Load() == nil {
			t.up()
		}
		return nil, false
	case typ == proto.IBUDPXOFF:
		t.peerXOFF.Add(1)
		t.peerStop.Store(t.p.sw.nanotime(now.Add(tunnelIBPause)))
		return nil, false
	case typ == proto.IBUDPXON:
		t.peerStop.Store(0)
		select {
		case t.resume <- struct{}{}:
		default:
		}
		return nil, false
	}
	return inner, true
}

// up attaches a new relay to the port, unless one is there; it returns
// the link, or nil when the port cannot take one (switch closing).
func (t *tunnel) up() *tunnelLink {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.link.Load(); l != nil {
		return l
	}
	sw, p := t.p.sw, t.p
	a, b, err := socketPair()
	if err != nil {
		return nil
	}
	w, err1 := mmsg.New(b, sw.ioBatch)
	r, err2 := mmsg.New(b, sw.ioBatch)
	if err1 != nil || err2 != nil {
		a.Close()
		b.Close()
		return nil
	}
	setSocketBuffers(b, sw.sockBuf)
	l := &tunnelLink{conn: b, w: w, r: r}
	peer := PeerInfo{Name: t.cfg.remote, Role: "switch", MaxFrame: p.cfg.maxFrame}
	if err := p.attach(a, peer, false); err != nil {
		a.Close()
		b.Close()
		return nil
	}
	t.link.Store(l)
	sw.wg.Add(1)
	go t.txRelay(l)
	return l
}

// down takes the link l (nil: whichever is up) down: the relay's end
// closes, so the port's session ends and txRelay returns.
func (t *tunnel) down(l *tunnelLink) {
	t.mu.Lock()
	cur := t.link.Load()
	if cur != nil && (l == nil || l == cur) {
		t.link.Store(nil)
	}
	t.mu.Unlock()
	if l == nil {
		l = cur
	}
	if l != nil {
		l.conn.Close()
	}
}

// txRelay reads the port's frames from the relay end, encapsulates them
// in place and sends them, until the session ends.
func (t *tunnel) txRelay(l *tunnelLink) {
	sw, p := t.p.sw, t.p
	defer sw.wg.Done()
	defer t.down(l)
	w, err := mmsg.NewDatagram(t.conn, sw.ioBatch)
	if err != nil {
		return
	}
	n := sw.ioBatch
	hdr := proto.TunnelHeaderSize
	raw := make([][]byte, n)
	in := make([][]byte, n)
	out := make([][]byte, n)
	for i := range raw {
		raw[i] = make([]byte, hdr+p.cfg.maxFrame+1)
		in[i] = raw[i][hdr:]
	}
	sizes, trunc := make([]int, n), make([]bool, n)
	for {
		if t.ib && !t.waitPeer() {
			return
		}
		got, err := l.r.ReadBatch(in, sizes, trunc)
		if err != nil {
			return
		}
		m := 0
		for i := range got {
			if trunc[i] {
				continue // over max-frame: the port never sends one
			}
			b := raw[i][:hdr+sizes[i]]
			if t.ib {
				proto.PutIBUDP(b, proto.IBUDPData, t.cfg.vni)
			} else {
				proto.PutVXLAN(b, t.cfg.vni)
			}
			out[m] = b
			m++
		}
		t.send(w, out[:m])
	}
}

// send writes datagrams, counting what went and what failed; a failed
// send never ends the link (the underlay is lossy).
func (t *tunnel) send(w *mmsg.Conn, bufs [][]byte) {
	for len(bufs) > 0 {
		k, err := w.TryWriteBatch(bufs)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// The first datagram failed (ECONNREFUSED after an ICMP
			// unreachable, ENOBUFS): it is lost, the rest go on.
			t.txErrs.Add(1)
			k = 1
		} else if k == 0 {
			if err := w.WriteBatch(bufs[:1]); err != nil {
				t.txErrs.Add(1)
			} else {
				t.count(bufs[0])
			}
			k = 1
		} else {
			for _, b := range bufs[:k] {
				t.count(b)
			}
		}
		bufs = bufs[k:]
	}
}

func (t *tunnel) count(b []byte) {
	t.txDgrams.Add(1)
	t.txBytes.Add(uint64(len(b)))
}

// keepalive sends a keepalive every tunnelKeepalive and takes the link
// down when the remote has been silent for tunnelDeadAfter.
func (t *tunnel) keepalive() {
	sw := t.p.sw
	defer sw.wg.Done()
	tk := time.NewTicker(tunnelKeepalive)
	defer tk.Stop()
	buf := make([]byte, proto.TunnelHeaderSize+proto.KeepaliveFrameSize)
	for {
		t.sendKeepalive(buf)
		select {
		case <-sw.ctx.Done():
			return
		case <-tk.C:
		}
		seen := t.lastSeen.Load()
		if t.rxBusy.Load() {
			continue // datagrams are waiting: the remote is there
		}
		if l := t.link.Load(); l != nil && sw.nanotime(sw.clock.Now())-seen > int64(tunnelDeadAfter) {
			sw.log.Info("vxlan port: remote silent, link down", "port", t.p.cfg.num, "remote", t.cfg.remote)
			t.down(l)
		}
	}
}

func (t *tunnel) sendKeepalive(buf []byte) {
	b := buf
	if t.ib {
		b = buf[:proto.TunnelHeaderSize]
		proto.PutIBUDP(b, proto.IBUDPKeepalive, t.cfg.vni)
	} else {
		proto.PutVXLAN(b, t.cfg.vni)
		proto.PutKeepaliveFrame(b[proto.TunnelHeaderSize:], t.p.mac, t.kaSeq.Add(1))
	}
	if _, err := t.conn.Write(b); err != nil {
		t.txErrs.Add(1)
		return
	}
	t.kaTx.Add(1)
}

// status returns the tunnel's part of the port's status.
func (t *tunnel) status(now time.Time) *TunnelStatus {
	sw := t.p.sw
	ts := &TunnelStatus{Encap: EncapVXLAN, Local: t.cfg.local, Remote: t.cfg.remote, VNI: t.cfg.vni,
		Link: "down", LastSeen: -1, Bad: map[string]uint64{}}
	if t.ib {
		ts.Encap = EncapIBUDP
	}
	if e := t.sockErr.Load(); e != nil {
		ts.Error = *e
	}
	if t.link.Load() != nil {
		ts.Link = "up"
	}
	if seen := t.lastSeen.Load(); seen != 0 {
		ts.LastSeen = float64(sw.nanotime(now)-seen) / 1e9
	}
	ts.RxDatagrams, ts.RxBytes = t.rxDgrams.Load(), t.rxBytes.Load()
	ts.TxDatagrams, ts.TxBytes = t.txDgrams.Load(), t.txBytes.Load()
	ts.KeepalivesRx, ts.KeepalivesTx = t.kaRx.Load(), t.kaTx.Load()
	for i, r := range tunnelBadReasons {
		ts.Bad[r] = t.bad[i].Load()
	}
	ts.TxErrors = t.txErrs.Load()
	ts.Paused, ts.PausesSent, ts.PausedByPeer = t.paused.Load(), t.pausesTx.Load(), t.peerXOFF.Load()
	if t.ready.Load() {
		if _, drops, ok := t.meminfo(); ok {
			ts.UnderlayDrops = drops
		}
		ts.Local = t.conn.LocalAddr().String()
		ts.RecvBuffer, ts.PauseAt = t.rcvbuf, t.pauseAt
		ts.Headroom = t.rcvbuf - t.pauseAt
	}
	return ts
}
