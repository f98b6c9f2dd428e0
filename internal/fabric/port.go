package fabric

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
)

// PeerInfo describes what is connected to a port.
type PeerInfo struct {
	Name     string `json:"name,omitempty"`
	Role     string `json:"role,omitempty"` // "nic", "switch" or "qemu"
	MAC      string `json:"mac,omitempty"`
	PortNum  int    `json:"port_num,omitempty"`
	PortGUID uint64 `json:"port_guid,omitempty"`
	NodeGUID uint64 `json:"node_guid,omitempty"`
	MaxFrame int    `json:"max_frame,omitempty"`
}

// port is one switch port. cfg, mac and idx never change; the session
// fields are guarded by mu; counters and the accounting are atomic.
type port struct {
	sw  *Switch
	idx int
	cfg portSettings
	mac [6]byte

	ctr portCounters
	eg  egress

	// PFC ingress accounting: bytes this port's peer has buffered in the
	// switch, per traffic class (charged at enqueue, uncharged when the
	// frame leaves or is dropped).
	acct [NumTC]atomic.Int64
	// xoff[tc] says an XOFF is in force towards the peer; changed only
	// with eg.mu held, read atomically on the fast path.
	xoff   [NumTC]atomic.Bool
	xoffAt [NumTC]time.Time // guarded by eg.mu
	pfc    bool             // this port sends PFC frames

	up    atomic.Bool
	abort atomic.Bool // the current session is ending
	// lone says the frame being forwarded came alone in its read (rx
	// goroutine only): only such a frame is cut through (egress.enqueue),
	// so a stream keeps the rx and tx goroutines of its hop working in
	// parallel while a lone frame (a ping-pong, an ACK) is spared the tx
	// goroutine's wake-up.
	lone bool

	faults *faultState // owned by the rx goroutine
	cap    *capture

	linked bool    // joined to another switch of this process
	tun    *tunnel // kind vxlan: the UDP side

	mu       sync.Mutex
	ln       net.Listener
	sess     *session
	peer     PeerInfo
	since    time.Time
	sessions int
}

func newPort(sw *Switch, idx int, cfg portSettings, bufSize int) *port {
	p := &port{sw: sw, idx: idx, cfg: cfg}
	p.mac = sw.cfg.baseMAC
	// base + port number, carried into the upper bytes.
	v := uint64(p.mac[0])<<40 | uint64(p.mac[1])<<32 | uint64(p.mac[2])<<24 |
		uint64(p.mac[3])<<16 | uint64(p.mac[4])<<8 | uint64(p.mac[5])
	v += uint64(cfg.num)
	for i := range p.mac {
		p.mac[i] = byte(v >> (40 - 8*i))
	}
	p.eg.init(&sw.cfg, cfg.num, bufSize)
	p.pfc = cfg.link == LinkEthernet && (cfg.kind == KindSeqpacket || cfg.kind == KindVXLAN)
	if cfg.faults.enabled() {
		p.faults = newFaultState(cfg.faults, cfg.num)
	}
	if cfg.kind == KindVXLAN {
		p.tun = newTunnel(p)
	}
	return p
}

// pauseDuration converts pause quanta into time at the port's speed
// (IEEE 802.3 31B: one quantum is 512 bit times).
func (p *port) pauseDuration(quanta uint16) time.Duration {
	bits := float64(quanta) * proto.PauseQuantumBits
	return time.Duration(bits / float64(p.cfg.speed) * 1e9)
}

// charge accounts size bytes of class tc to this ingress port and sends
// XOFF when a lossless class crosses the threshold, or refreshes an XOFF
// in force that is half-way to expiry (the peer keeps sending, so its
// pause has run out or it ignores PFC).
func (p *port) charge(tc uint8, size int64, now time.Time) {
	v := p.acct[tc].Add(size)
	if !p.pfc || !p.sw.cfg.lossless[tc] || v < p.sw.cfg.xoff {
		return
	}
	p.setXOFF(tc, true, now)
}

// blocked is called before the rx goroutine waits for space in a full
// lossless queue: the peer is paused whatever the class's accounting.
func (p *port) blocked(tc uint8, now time.Time) {
	if p.pfc {
		p.setXOFF(tc, true, now)
	}
}

// uncharge releases size bytes and sends XON when an XOFF is in force
// and the class has drained to the XON threshold.
func (p *port) uncharge(tc uint8, size int64) {
	v := p.acct[tc].Add(-size)
	if v <= p.sw.cfg.xon && p.xoff[tc].Load() {
		p.setXOFF(tc, false, time.Time{})
	}
}

// setXOFF changes the PFC state towards the peer for class tc and queues
// the PFC frame that announces it. The state and the frame change under
// eg.mu, so frames leave in the order of the changes.
func (p *port) setXOFF(tc uint8, on bool, now time.Time) {
	sw := p.sw
	e := &p.eg
	e.mu.Lock()
	if on {
		if p.xoff[tc].Load() {
			half := p.pauseDuration(sw.cfg.quanta) / 2
			if now.Sub(p.xoffAt[tc]) < half {
				e.mu.Unlock()
				return
			}
		}
		p.xoffAt[tc] = now
	} else if !p.xoff[tc].Load() {
		e.mu.Unlock()
		return
	}
	p.xoff[tc].Store(on)
	e.mu.Unlock()

	var pf proto.PFCFields
	for prio, c := range sw.cfg.pcpToTC {
		if c == tc {
			pf.Enable |= 1 << prio
			if on {
				pf.Time[prio] = sw.cfg.quanta
			}
		}
	}
	f := sw.pool.get()
	f.tc = tc // counted by class when sent; f.in < 0 keeps it out of the accounting
	n, err := proto.BuildPFC(f.buf, p.mac, &pf)
	if err != nil || !e.enqueueCtrl(withLen(f, n)) {
		sw.pool.put(f)
	}
}

func withLen(f *frame, n int) *frame {
	f.buf = f.buf[:n]
	return f
}

// onMACControl obeys a PFC or PAUSE frame from the peer: it stops
// dequeuing the classes it names to this port for the time given, or
// resumes them (time 0).
func (p *port) onMACControl(mc proto.MACControl, now time.Time) {
	switch {
	case mc.IsPFC():
		p.ctr.pfcRx.Add(1)
		en := mc.PFCEnable()
		// Priorities map to classes; group the requests by time so that
		// a frame with one time for all does one pause call.
		var classes uint8
		for prio := range proto.PFCPriorities {
			if en&(1<<prio) == 0 {
				continue
			}
			tc := p.sw.cfg.pcpToTC[prio]
			classes |= 1 << tc
			p.eg.pause(1<<tc, p.pauseDuration(mc.PFCTime(prio)), now)
		}
		for tc := range NumTC {
			if classes&(1<<tc) != 0 {
				p.ctr.pfcRxClass[tc].Add(1)
			}
		}
	case mc.IsPause():
		p.ctr.pauseRx.Add(1)
		p.eg.pause(0xFF, p.pauseDuration(mc.PauseTime()), now)
	}
}

// isUp reports whether a peer is connected.
func (p *port) isUp() bool { return p.up.Load() }
