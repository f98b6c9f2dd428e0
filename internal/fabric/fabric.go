package fabric

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/PacketFive/hinic/internal/shmport"
)

// ControlSocketName is the control socket's file name in the run
// directory.
const ControlSocketName = "control.sock"

// Fabric is a set of switches served by one process, with the links
// between them and the control socket. Its methods are safe for
// concurrent use.
type Fabric struct {
	cfg      Config
	switches []*Switch
	byName   map[string]*Switch
	ctrl     *controlServer

	mu        sync.Mutex
	started   bool
	closed    bool
	closeOnce sync.Once
}

// New checks cfg and builds the switches; no socket is opened until
// Start.
func New(cfg Config) (*Fabric, error) {
	settings, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("fabric: config: %w", err)
	}
	f := &Fabric{cfg: cfg, byName: map[string]*Switch{}}
	for _, s := range settings {
		sw, err := newSwitch(s, &f.cfg)
		if err != nil {
			f.closeSwitches()
			return nil, err
		}
		f.switches = append(f.switches, sw)
		f.byName[sw.Name()] = sw
	}
	for _, l := range cfg.Links {
		if _, _, err := f.linkEnds(l); err != nil {
			f.closeSwitches()
			return nil, fmt.Errorf("fabric: config: link %s - %s: %w", l.A, l.B, err)
		}
	}
	return f, nil
}

func (f *Fabric) closeSwitches() {
	for _, sw := range f.switches {
		sw.close()
	}
}

// linkEnds resolves a link's two ports and marks them linked.
func (f *Fabric) linkEnds(l LinkConfig) (*port, *port, error) {
	var ends [2]*port
	for i, ref := range []string{l.A, l.B} {
		name, num, err := parsePortRef(ref)
		if err != nil {
			return nil, nil, err
		}
		sw := f.byName[name]
		if sw == nil {
			return nil, nil, fmt.Errorf("no switch %q", name)
		}
		if num < 1 || num > len(sw.ports) {
			return nil, nil, fmt.Errorf("%s has no port %d", name, num)
		}
		p := sw.ports[num-1]
		if p.linked {
			return nil, nil, fmt.Errorf("port %s is in two links", ref)
		}
		if p.cfg.kind != KindSeqpacket || p.cfg.dial != "" {
			return nil, nil, fmt.Errorf("port %s must be a plain seqpacket port", ref)
		}
		ends[i] = p
	}
	if ends[0] == ends[1] {
		return nil, nil, errors.New("a link needs two different ports")
	}
	if ends[0].cfg.link != ends[1].cfg.link {
		return nil, nil, errors.New("the two ports have different link layers")
	}
	ends[0].linked, ends[1].linked = true, true
	return ends[0], ends[1], nil
}

// Switches returns the switches in config order.
func (f *Fabric) Switches() []*Switch { return f.switches }

// Switch returns the switch called name, or nil.
func (f *Fabric) Switch(name string) *Switch { return f.byName[name] }

// RunDir returns the run directory.
func (f *Fabric) RunDir() string { return f.cfg.RunDir }

// ControlSocket returns the control socket's path.
func (f *Fabric) ControlSocket() string { return filepath.Join(f.cfg.RunDir, ControlSocketName) }

// Start creates the run directory, joins the in-process links, opens
// every port socket and the control socket. On error, what was opened is
// closed again.
func (f *Fabric) Start() error {
	f.mu.Lock()
	if f.closed || f.started {
		f.mu.Unlock()
		return ErrClosed
	}
	f.started = true
	f.mu.Unlock()
	if err := os.MkdirAll(f.cfg.RunDir, 0o770); err != nil {
		return fmt.Errorf("fabric: run dir: %w", err)
	}
	err := f.start()
	if err != nil {
		f.Close()
	}
	return err
}

func (f *Fabric) start() error {
	for _, l := range f.cfg.Links {
		a, b, err := f.linkPorts(l)
		if err != nil {
			return err
		}
		ca, cb, err := socketPair()
		if err != nil {
			return err
		}
		// The two ends share this process, so the frames take a ring
		// pair when the fabric allows it; the socket pair tells each
		// end the other is gone.
		var sa, sb *shmport.Conn
		if !f.cfg.NoShm {
			maxFrame := max(a.cfg.maxFrame, b.cfg.maxFrame)
			sa, sb, err = shmport.Pair(shmport.GeometryFor(DefaultShmEntries, maxFrame), a.sw.shmOpt)
			if err != nil {
				f.cfg.Logger.Info("link on sockets", "err", err)
				sa, sb = nil, nil
			}
		}
		pa := PeerInfo{Name: fmt.Sprintf("%s/port%d", b.sw.Name(), b.cfg.num), Role: "switch", MAC: macString(b.mac), PortNum: b.cfg.num, NodeGUID: b.sw.cfg.nodeGUID, PortGUID: b.sw.cfg.nodeGUID, MaxFrame: b.cfg.maxFrame}
		pb := PeerInfo{Name: fmt.Sprintf("%s/port%d", a.sw.Name(), a.cfg.num), Role: "switch", MAC: macString(a.mac), PortNum: a.cfg.num, NodeGUID: a.sw.cfg.nodeGUID, PortGUID: a.sw.cfg.nodeGUID, MaxFrame: a.cfg.maxFrame}
		if err := a.attachShm(ca, pa, false, sa); err != nil {
			ca.Close()
			cb.Close()
			if sb != nil {
				sb.Close()
			}
			return err
		}
		if err := b.attachShm(cb, pb, false, sb); err != nil {
			cb.Close()
			return err
		}
	}
	for _, sw := range f.switches {
		if err := sw.start(); err != nil {
			return err
		}
	}
	// The control socket comes last: once it exists, every port listens.
	ctrl, err := newControlServer(f)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.ctrl = ctrl
	f.mu.Unlock()
	ctrl.start()
	return nil
}

func (f *Fabric) linkPorts(l LinkConfig) (*port, *port, error) {
	var ends [2]*port
	for i, ref := range []string{l.A, l.B} {
		name, num, _ := parsePortRef(ref)
		ends[i] = f.byName[name].ports[num-1]
	}
	return ends[0], ends[1], nil
}

// Close stops every switch and the control server, unlinks the sockets
// and joins every goroutine. It is idempotent and safe to call at any
// time, started or not.
func (f *Fabric) Close() error {
	f.closeOnce.Do(func() {
		f.mu.Lock()
		f.closed = true
		ctrl := f.ctrl
		f.mu.Unlock()
		if ctrl != nil {
			ctrl.close()
		}
		f.closeSwitches()
	})
	return nil
}

// Serve starts the fabric, runs until ctx is cancelled, then closes it.
// A fabric shut down by its context returns nil.
func (f *Fabric) Serve(ctx context.Context) error {
	if err := f.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	return f.Close()
}

func macString(m [6]byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}
