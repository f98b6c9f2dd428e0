package device

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/shmport"
)

// The fabric link survives the switch: when `hinic fabric serve` exits
// or restarts, the vNIC's port connection drops, the guest sees its port
// go down (dropLink: LINK_UP cleared, PORT_ERR), and the fabric rx
// goroutine dials the port again, backing off while the switch is away.
// Once the port's hello is answered the link is up again (portUp:
// LINK_UP, PORT_ACTIVE), as after a cable re-plug; the guest keeps every
// verbs object, and RC QPs retransmit what the switch lost, within their
// retry budget. Frames sent while the link is down are lost.

const (
	// linkRedialMin and linkRedialMax bound the back-off of the redial.
	// A restarted switch listens again within milliseconds; every
	// millisecond without a link eats into the guests' RC retry budget.
	linkRedialMin = 10 * time.Millisecond
	linkRedialMax = 500 * time.Millisecond
	// linkHelloTimeout bounds one dial and its hello.
	linkHelloTimeout = 5 * time.Second
)

// fabricLink is the vNIC's connection to its switch port. The fabric rx
// goroutine alone reads it and replaces the connection (redial); Write
// is safe from any goroutine and goes to the connection of the moment (a
// frame written to one that just failed is lost). Close is idempotent.
type fabricLink struct {
	path  string
	hello *proto.HelloFields
	shm   bool // offer the switch shared memory (VNICConfig.FabricTransport)
	conn  atomic.Pointer[linkConn]
	downs atomic.Uint64 // link up -> down transitions (LinkDownedCounter)
	// Over rings: frames lost because the ring stayed full
	// (maxShmBacklog) or failed with frames kept; descriptors of the
	// switch's ring dropped as malformed.
	txLost, rxBad atomic.Uint64

	// ctx ends at Close: it stops a redial in progress.
	ctx    context.Context
	cancel context.CancelFunc
}

// newFabricLink dials the port and returns the link, up.
func newFabricLink(ctx context.Context, path string, hello *proto.HelloFields, shm bool) (*fabricLink, error) {
	l := &fabricLink{path: path, hello: hello, shm: shm}
	c, err := l.dial(ctx)
	if err != nil {
		return nil, err
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.conn.Store(c)
	return l, nil
}

// Write sends one frame on the connection of the moment: at once on a
// socket; on rings it is published with anything the engine queued
// before it, or kept behind a backlog.
func (l *fabricLink) Write(b []byte) (int, error) {
	c := l.conn.Load()
	if c.tx == nil {
		return c.uc.Write(b)
	}
	if err := c.tx.send(b, nil); err != nil {
		return 0, err
	}
	if err := c.tx.flush(); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Transport is the current connection's: TransportShm or
// TransportSocket.
func (l *fabricLink) Transport() string { return l.conn.Load().transport() }

// Close closes the connection and stops a redial in progress.
func (l *fabricLink) Close() error {
	l.cancel()
	return l.conn.Load().close()
}

// FabricTransport is how frames cross the vNIC's fabric port now:
// TransportShm or TransportSocket; "" without a port.
func (v *VNIC) FabricTransport() string {
	if v.fabric == nil {
		return ""
	}
	return v.fabric.Transport()
}

// Transports of the fabric link, as `hinic device status` shows them.
const (
	TransportShm    = "shm"    // a shared-memory ring pair (package shmport)
	TransportSocket = "socket" // SOCK_SEQPACKET, one message per frame
)

// linkShmEntries is the slots of each ring of a shared-memory link:
// room for a burst of the engine's window at MTU 4096.
const linkShmEntries = 512

// linkConn is one connection of the link to its switch port: the
// socket, and the ring pair when the switch took shared memory. With
// rings the socket carries no frame; its end is how the backend learns
// that the switch went away. A linkConn is never reused once it fails.
type linkConn struct {
	uc  *net.UnixConn
	shm *shmport.Conn // nil on a socket
	tx  *shmWriter    // the rings' sending side; nil on a socket
}

func (c *linkConn) transport() string {
	if c.shm != nil {
		return TransportShm
	}
	return TransportSocket
}

// shutdown breaks the connection: the socket closes, the rings fail
// every call and wake whoever waits on them.
func (c *linkConn) shutdown() error {
	err := c.uc.Close()
	if c.shm != nil {
		c.shm.Shutdown()
	}
	return err
}

// close shuts the connection down and, once no call is inside them,
// unmaps the rings. Not from inside a Recv callback.
func (c *linkConn) close() error {
	err := c.shutdown()
	if c.shm != nil {
		c.shm.Close()
	}
	return err
}

// dial opens a HiSwitch port connection: SOCK_SEQPACKET, our hello,
// the switch's answer (docs/fabric-wire.md) and, when the link offers
// shared memory and the switch does too, the ring setup. A switch that
// refuses the rings leaves the frames on the socket. It is not
// fabric.DialPort because device and fabric do not import each other.
func (l *fabricLink) dial(ctx context.Context) (*linkConn, error) {
	path := l.path
	h := *l.hello
	h.Features &^= proto.HelloFeatureShm
	if l.shm {
		h.Features |= proto.HelloFeatureShm
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unixpacket", path)
	if err != nil {
		return nil, fmt.Errorf("dial fabric port %s: %w", path, err)
	}
	uc := c.(*net.UnixConn)
	dl := time.Now().Add(10 * time.Second)
	if d, ok := ctx.Deadline(); ok {
		dl = d
	}
	uc.SetDeadline(dl)
	if _, err := uc.Write(proto.AppendHello(nil, &h)); err != nil {
		uc.Close()
		return nil, fmt.Errorf("hello to %s: %w", path, err)
	}
	buf := make([]byte, proto.HelloMaxSize+1)
	n, err := uc.Read(buf)
	if err == nil && n == 0 {
		err = errors.New("connection closed")
	}
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("hello from %s: %w", path, err)
	}
	ans, err := proto.ParseHello(buf[:n])
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("hello from %s: %w", path, err)
	}
	if ans.Status() != proto.HelloOK {
		uc.Close()
		return nil, fmt.Errorf("fabric port %s refused: %s", path, proto.HelloStatusText(ans.Status()))
	}
	lc := &linkConn{uc: uc}
	if h.Features&ans.Features()&proto.HelloFeatureShm != 0 {
		// No polling: the backend shares the host's CPUs with the
		// guests' vCPUs, and a side that polls takes the CPU from the
		// one that would fill its ring (docs/device.md).
		g := shmport.GeometryFor(linkShmEntries, int(h.MaxFrame))
		sc, _, err := shmport.Offer(uc, g, shmport.Options{})
		if err != nil {
			uc.Close()
			return nil, fmt.Errorf("shared memory with %s: %w", path, err)
		}
		if sc != nil { // nil: refused, the frames stay on the socket
			lc.shm, lc.tx = sc, &shmWriter{c: sc, lost: &l.txLost}
		}
	}
	uc.SetDeadline(time.Time{})
	if lc.shm == nil {
		_ = uc.SetReadBuffer(nicSocketBuffer)
		_ = uc.SetWriteBuffer(nicSocketBuffer)
	}
	return lc, nil
}

// maxShmBacklog is the most frames a shared-memory link keeps while its
// ring is full; more are lost, as on a NIC whose transmit queue
// overflows. The engine starts no new work past maxPortBacklog, so only
// responses, ACKs and guest L2 frames come this far.
const maxShmBacklog = 4096

// shmWriter is the sending side of a shared-memory link, for the
// engine's port and the guest's L2 frames alike. It never makes a
// caller wait: frames go into the ring's free slots (published at
// flush, with one wake-up of the switch), and what the ring cannot take
// now is kept, in order, for a drain goroutine that waits for room.
// While it drains, new frames go behind the kept ones. mu makes the
// callers and the drain goroutine the ring's one sender at a time.
type shmWriter struct {
	c *shmport.Conn

	mu       sync.Mutex
	kept     [][]byte // in order; the drain goroutine sends the first
	free     [][]byte // spare buffers of rdmaMaxFrame bytes
	draining bool
	ready    func() // the engine's TxReady, called as the backlog shrinks
	lost     *atomic.Uint64
}

// send queues frame, or keeps a copy of it; ready, when not nil, is
// the function to call as kept frames leave.
func (w *shmWriter) send(frame []byte, ready func()) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ready != nil {
		w.ready = ready
	}
	if !w.draining {
		ok, err := w.c.TryQueue(frame)
		if err != nil || ok {
			return err
		}
		// The ring is full (TryQueue published what it held): wait
		// for room on another goroutine.
		w.draining = true
		go w.drain()
	}
	if len(w.kept) >= maxShmBacklog {
		w.lost.Add(1)
		return errShmBacklog
	}
	var b []byte
	if n := len(w.free); n > 0 && len(frame) <= rdmaMaxFrame {
		b, w.free = w.free[n-1], w.free[:n-1]
	} else {
		b = make([]byte, max(len(frame), rdmaMaxFrame))
	}
	w.kept = append(w.kept, b[:copy(b, frame)])
	return nil
}

var errShmBacklog = errors.New("device: fabric ring backlog full")

// flush publishes what send queued, waking the switch once if it
// sleeps. While the drain goroutine sends, it does nothing: that
// goroutine publishes as it goes.
func (w *shmWriter) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.draining {
		return nil
	}
	return w.c.Flush()
}

// backlog is how many frames are kept.
func (w *shmWriter) backlog() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.kept)
}

// drain sends the kept frames a batch at a time, waiting for room and
// waking the switch once per batch, until none is left or the rings
// fail (what is kept is then lost, as on a failed link).
func (w *shmWriter) drain() {
	batch := make([][]byte, 0, txBatch)
	for {
		w.mu.Lock()
		if len(w.kept) == 0 {
			w.draining, w.kept = false, nil // let the backing array go
			ready := w.ready
			w.mu.Unlock()
			if ready != nil {
				ready()
			}
			return
		}
		batch = append(batch[:0], w.kept[:min(len(w.kept), txBatch)]...)
		w.mu.Unlock()
		// The only sender while draining; frames stay kept (and
		// counted in the backlog) until they are in the ring.
		dropped, err := w.c.SendBatch(batch)
		w.mu.Lock()
		clear(w.kept[:len(batch)])
		w.kept = w.kept[len(batch):]
		for _, f := range batch {
			if cap(f) == rdmaMaxFrame && len(w.free) < txBatch {
				w.free = append(w.free, f[:rdmaMaxFrame])
			}
		}
		clear(batch)
		lost := uint64(dropped) // empty or too big for a slot
		if err != nil {
			lost = uint64(len(batch) + len(w.kept))
			w.kept = nil
		}
		w.lost.Add(lost)
		ready := w.ready
		w.mu.Unlock()
		if ready != nil && err == nil {
			// Room again: the engine may start new work below its
			// backlog limit while the rest goes.
			ready()
		}
	}
}

// relink is the fabric rx goroutine's answer to a failed read: the link
// goes down, the port is dialled until it answers, the link comes back
// up. It returns false when the vNIC is closing.
func (v *VNIC) relink(err error) bool {
	l := v.fabric
	if l.ctx.Err() != nil {
		return false
	}
	l.downs.Add(1)
	v.dropLink(err)
	backoff := linkRedialMin
	for {
		ctx, cancel := context.WithTimeout(l.ctx, linkHelloTimeout)
		c, err := l.dial(ctx)
		cancel()
		if err == nil {
			return v.linkRestored(c)
		}
		v.log.Debug("fabric port redial", "port", l.path, "err", err)
		select {
		case <-l.ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, linkRedialMax)
	}
}

// linkRestored makes c the vNIC's fabric connection and brings the port
// up for the guest.
func (v *VNIC) linkRestored(c *linkConn) bool {
	l := v.fabric
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closing {
		c.close()
		return false
	}
	old := l.conn.Swap(c)
	old.close()
	if l.ctx.Err() != nil { // Close ran between the check and the swap
		c.close()
		return false
	}
	v.linkLost.Store(false)
	v.log.Info("fabric port connection restored", "port", l.path)
	if v.sess != nil {
		v.sess.portUp()
	}
	return true
}

// portUp sets LINK_UP again after the link came back; on Ethernet it
// posts PORT_ACTIVE to a live guest, on InfiniBand the engine's port
// state does (see SetLinkUp). The mirror of portDown, with the same eqMu
// ordering. Idempotent.
func (s *session) portUp() {
	if s.v.cfg.ib() {
		// An InfiniBand port comes back in Initialize, for its subnet
		// manager to activate (or Active, with a static LID): the
		// engine's PORT_ACTIVE follows, as in portDown.
		s.setStatus(DevLinkUp, 0)
		s.dev.SetLinkUp(true)
		return
	}
	s.eqMu.Lock()
	st := s.setStatus(DevLinkUp, 0)
	post := st&DevLinkUp == 0 && st&DevLive != 0 &&
		(!s.v.cfg.ib() || s.dev.QueryPort().State == rdma.PortActive)
	if post {
		s.postEventLocked(EvPortActive, 1, 0)
	}
	s.eqMu.Unlock()
	if post {
		s.raise(IRQCtrl)
	}
}
