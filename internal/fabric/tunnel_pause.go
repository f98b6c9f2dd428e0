package fabric

// The tunnel's flow control (tunnel.go, "Lossless classes"): the
// backlog in the UDP socket pauses the peer, and an IB peer's pause
// holds the relay.

import (
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/PacketFive/hinic/internal/proto"
)

// waitPeer holds txRelay while the IB peer's XOFF is in force, until
// its XON or its lapse; false when the switch is closing.
func (t *tunnel) waitPeer() bool {
	sw := t.p.sw
	for {
		until := t.peerStop.Load()
		if until == 0 {
			return true
		}
		d := time.Duration(until - sw.nanotime(sw.clock.Now()))
		if d <= 0 {
			t.peerStop.CompareAndSwap(until, 0)
			return true
		}
		tm := time.NewTimer(d)
		select {
		case <-t.resume:
		case <-tm.C:
		case <-sw.ctx.Done():
			tm.Stop()
			return false
		}
		tm.Stop()
	}
}

// meminfo reads SO_MEMINFO: the bytes waiting in the receive queue and
// the datagrams the socket dropped.
func (t *tunnel) meminfo() (rmem int, drops uint64, ok bool) {
	rc, err := t.conn.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var mi [unix.SK_MEMINFO_VARS]uint32
	var serr syscall.Errno
	_ = rc.Control(func(fd uintptr) {
		l := uint32(unsafe.Sizeof(mi))
		_, _, serr = unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
			uintptr(unsafe.Pointer(&mi[0])), uintptr(unsafe.Pointer(&l)), 0)
	})
	if serr != 0 {
		return 0, 0, false
	}
	return int(mi[unix.SK_MEMINFO_RMEM_ALLOC]), uint64(mi[unix.SK_MEMINFO_DROPS]), true
}

// checkBacklog pauses the peer when the socket's backlog passes pauseAt
// and starts the refresh timer, which renews the pause while the
// backlog lasts and lifts it below half of pauseAt.
func (t *tunnel) checkBacklog() {
	if t.paused.Load() {
		return // the timer owns it
	}
	rmem, _, ok := t.meminfo()
	if !ok || rmem < t.pauseAt {
		return
	}
	t.pmu.Lock()
	defer t.pmu.Unlock()
	if t.paused.Load() {
		return
	}
	t.paused.Store(true)
	t.pausePeer(true)
	t.pauseT = time.AfterFunc(tunnelRefresh, t.refresh)
}

func (t *tunnel) refresh() {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	if t.p.sw.closing.Load() {
		return
	}
	rmem, _, ok := t.meminfo()
	if ok && rmem >= t.pauseAt/2 {
		t.pausePeer(true)
		t.pauseT = time.AfterFunc(tunnelRefresh, t.refresh)
		return
	}
	t.pausePeer(false)
	t.paused.Store(false)
}

// pausePeer sends the peer an XOFF (on) or an XON: an IB-over-UDP
// datagram on IB; on Ethernet a PFC frame of every priority through the
// port's control queue (sent ahead of data, never paused). The XON
// leaves alone the classes the port's own accounting holds paused.
func (t *tunnel) pausePeer(on bool) {
	if t.link.Load() == nil {
		return
	}
	t.pausesTx.Add(1)
	if t.ib {
		var b [proto.TunnelHeaderSize]byte
		typ := uint8(proto.IBUDPXON)
		if on {
			typ = proto.IBUDPXOFF
		}
		proto.PutIBUDP(b[:], typ, t.cfg.vni)
		if _, err := t.conn.Write(b[:]); err != nil {
			t.txErrs.Add(1)
		}
		return
	}
	p, sw := t.p, t.p.sw
	var pf proto.PFCFields
	for prio, tc := range sw.cfg.pcpToTC {
		if !on && p.xoff[tc].Load() {
			continue
		}
		pf.Enable |= 1 << prio
		if on {
			pf.Time[prio] = sw.cfg.quanta
		}
	}
	if pf.Enable == 0 {
		return
	}
	f := sw.pool.get()
	f.tc = 0
	n, err := proto.BuildPFC(f.buf, p.mac, &pf)
	if err != nil || !p.eg.enqueueCtrl(withLen(f, n)) {
		sw.pool.put(f)
	}
}
