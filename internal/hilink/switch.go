package hilink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/PacketFive/hinic/internal/ctlsock"
	"github.com/PacketFive/hinic/internal/hilink/wire"
	"github.com/PacketFive/hinic/internal/pcapfile"
	"github.com/PacketFive/hinic/internal/unixsock"
)

// helloTimeout bounds the wait for a peer's hello (and Dial's for the
// answer); a variable so that a test can shorten it.
var helloTimeout = 5 * time.Second

const (
	// socketMode is the mode of port and control sockets.
	socketMode = 0o660
	// maxHandshakes bounds the connections waiting for their hello.
	maxHandshakes = 64
	// socketBuffer is asked for as SO_SNDBUF and SO_RCVBUF of every port
	// connection, both ends: a UNIX datagram larger than the send
	// buffer fails (EMSGSIZE), and the kernel's default (wmem_default,
	// 208 KiB) is below wire.MaxMaxFrame. The kernel caps it at
	// wmem_max and doubles it (at least 416 KiB by default).
	socketBuffer = 1 << 20
)

// ErrClosed is returned by Start on a closed or started switch.
var ErrClosed = errors.New("hilink: switch closed")

// Switch is one HiLink switch. Safe for concurrent use.
type Switch struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	ports  []*port
	pool   sync.Pool // *frame with MaxFrame-byte buffers
	hsSem  chan struct{}
	start  time.Time

	mu      sync.RWMutex // guards routes, started, closed, ctl
	routes  map[uint16]*session
	started bool
	closed  bool
	ctl     *ctlsock.Server

	wg sync.WaitGroup
}

// New returns a switch of cfg, not yet listening.
func New(cfg Config) (*Switch, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	sw := &Switch{cfg: cfg, ctx: ctx, cancel: cancel, routes: map[uint16]*session{},
		hsSem: make(chan struct{}, maxHandshakes), start: time.Now()}
	sw.pool.New = func() any { return &frame{buf: make([]byte, cfg.MaxFrame)} }
	for i := range cfg.Ports {
		sw.ports = append(sw.ports, &port{sw: sw, num: i, path: PortPath(cfg.RunDir, i)})
	}
	return sw, nil
}

// Config returns the switch's configuration with defaults filled in.
func (sw *Switch) Config() Config { return sw.cfg }

// ControlSocket returns the control socket's path.
func (sw *Switch) ControlSocket() string { return filepath.Join(sw.cfg.RunDir, ControlSocketName) }

// Start creates the run directory (mode 0770), listens on every port
// socket, then on the control socket: when that exists, every port
// listens. On error what was opened is closed again.
func (sw *Switch) Start() error {
	sw.mu.Lock()
	if sw.closed || sw.started {
		sw.mu.Unlock()
		return ErrClosed
	}
	sw.started = true
	sw.mu.Unlock()
	if err := os.MkdirAll(sw.cfg.RunDir, 0o770); err != nil {
		return fmt.Errorf("hilink: run dir: %w", err)
	}
	if err := sw.openCaptures(); err != nil {
		sw.Close()
		return err
	}
	for _, p := range sw.ports {
		ln, err := unixsock.Listen("unixpacket", p.path, socketMode)
		if err != nil {
			sw.Close()
			return fmt.Errorf("hilink: port %d: %w", p.num, err)
		}
		p.ln = ln
		sw.wg.Add(1)
		go p.acceptLoop()
	}
	ctl, err := ctlsock.Listen(sw.ControlSocket(), "hilink", sw.Status)
	if err != nil {
		sw.Close()
		return err
	}
	sw.mu.Lock()
	sw.ctl = ctl
	sw.mu.Unlock()
	return nil
}

// Close stops the switch: the control socket and every listener close
// (their files are removed), every session ends and the goroutines are
// joined. It is idempotent.
func (sw *Switch) Close() error {
	sw.mu.Lock()
	if sw.closed {
		sw.mu.Unlock()
		return nil
	}
	sw.closed = true
	ctl := sw.ctl
	sw.mu.Unlock()
	if ctl != nil {
		ctl.Close()
	}
	sw.cancel()
	for _, p := range sw.ports {
		if p.ln != nil {
			p.ln.Close()
		}
		if s := p.session(); s != nil {
			s.end()
		}
	}
	sw.wg.Wait()
	for _, p := range sw.ports {
		p.cap.Close()
	}
	return nil
}

// openCaptures opens every port's capture if Config.Pcap is set, and
// flushes them every second until Close.
func (sw *Switch) openCaptures() error {
	if sw.cfg.Pcap == "" {
		return nil
	}
	if err := os.MkdirAll(sw.cfg.Pcap, 0o700); err != nil {
		return fmt.Errorf("hilink: pcap dir: %w", err)
	}
	for _, p := range sw.ports {
		path := filepath.Join(sw.cfg.Pcap, "hilink-port"+strconv.Itoa(p.num)+".pcap")
		c, err := pcapfile.Create(path, layers.LinkType(LinkTypeHiLink), wire.MaxMaxFrame, sw.cfg.PcapMax)
		if err != nil {
			return fmt.Errorf("hilink: %w", err)
		}
		p.cap = c
	}
	sw.wg.Add(1)
	go func() {
		defer sw.wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-sw.ctx.Done():
				return
			case <-t.C:
				for _, p := range sw.ports {
					p.cap.Flush()
				}
			}
		}
	}()
	return nil
}

// route returns the session behind GPU id g, or nil.
func (sw *Switch) route(g uint16) *session {
	sw.mu.RLock()
	s := sw.routes[g]
	sw.mu.RUnlock()
	return s
}

func (sw *Switch) getFrame() *frame { return sw.pool.Get().(*frame) }

func (sw *Switch) putFrame(f *frame) {
	f.src = nil
	sw.pool.Put(f)
}

// port is one switch port: its listener, its current session and its
// counters, which outlive sessions.
type port struct {
	sw   *Switch
	num  int
	path string
	ln   *net.UnixListener // set before acceptLoop starts, then read-only
	cap  *pcapfile.File    // nil without Config.Pcap; set in Start

	mu   sync.Mutex // guards sess
	sess *session

	c counters
}

func (p *port) session() *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sess
}

func (p *port) acceptLoop() {
	sw := p.sw
	defer sw.wg.Done()
	unixsock.Accept(p.ln, unixsock.Handshakes{Ctx: sw.ctx, WG: &sw.wg, Sem: sw.hsSem, Rejected: func() { p.c.rejected.Add(1) }},
		p.handshake)
}
