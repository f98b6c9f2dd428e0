package device

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
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

// fabricLink is the vNIC's connection to its switch port. Read is for
// the fabric rx goroutine alone, which also replaces the connection
// (redial); Write is safe from any goroutine and goes to the connection
// of the moment (a frame written to one that just failed is lost). Close
// is idempotent.
type fabricLink struct {
	path  string
	hello *proto.HelloFields
	conn  atomic.Pointer[net.UnixConn]
	downs atomic.Uint64 // link up -> down transitions (LinkDownedCounter)

	// ctx ends at Close: it stops a redial in progress.
	ctx    context.Context
	cancel context.CancelFunc
}

func newFabricLink(path string, hello *proto.HelloFields, c *net.UnixConn) *fabricLink {
	l := &fabricLink{path: path, hello: hello}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.conn.Store(c)
	return l
}

func (l *fabricLink) Read(b []byte) (int, error)  { return l.conn.Load().Read(b) }
func (l *fabricLink) Write(b []byte) (int, error) { return l.conn.Load().Write(b) }

// Close closes the connection and stops a redial in progress.
func (l *fabricLink) Close() error {
	l.cancel()
	return l.conn.Load().Close()
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
		c, err := dialPort(ctx, l.path, l.hello)
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
func (v *VNIC) linkRestored(c *net.UnixConn) bool {
	l := v.fabric
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closing {
		c.Close()
		return false
	}
	old := l.conn.Swap(c)
	old.Close()
	if l.ctx.Err() != nil { // Close ran between the check and the swap
		c.Close()
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
