package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/PacketFive/hinic/internal/ctlsock"
	"github.com/PacketFive/hinic/internal/guestmem"
	"github.com/PacketFive/hinic/internal/ivshmem"
	"github.com/PacketFive/hinic/internal/unixsock"
)

// Defaults of GPUConfig.
const (
	DefaultName        = "HiGPU"
	DefaultMemSize     = 1 << 30
	DefaultVectors     = 4 // HIGPU_MIN_VECTORS and room
	DefaultMaxContexts = 64
	DefaultMaxAllocs   = 4096
	DefaultMaxInflight = 1024
	DefaultMaxStreams  = 16
	DefaultMaxEvents   = 256
	DefaultMaxSGE      = 256
	// MaxMemSize bounds the device memory of one GPU: the VA stride.
	MaxMemSize = VAStride
	// limitCap bounds every count limit a configuration may ask for, so
	// that the per-context tables stay small.
	limitCap = 1 << 16
)

// GPUConfig describes one emulated GPU, an ivshmem-doorbell function of
// one guest.
type GPUConfig struct {
	ID      int    // gpu_id 0..7: names the device address range
	Name    string // the header's name (at most 31 bytes), default "HiGPU"
	Socket  string // ivshmem server socket (QEMU -chardev socket,path=)
	RAMPath string // the guest's memory-backend-file mem-path (share=on)
	RAMSize uint64 // bytes; equal to QEMU's -m
	Machine guestmem.Machine
	// MemPath is the host file that holds device memory (created when
	// missing, sized to MemSize); "" keeps it in an anonymous memfd.
	MemPath string
	MemSize uint64 // device memory bytes, a multiple of 4 KiB
	Vectors int    // ivshmem vectors=N, at least HIGPU_MIN_VECTORS
	// Budgets of the guest (the header's limits); 0 = the default.
	MemBudget   uint64 // device memory the guest may hold; 0 = MemSize
	MaxContexts int
	MaxAllocs   int
	MaxInflight int
	MaxStreams  int
	MaxEvents   int
	MaxSGE      int
	// Budgets of one context; 0 = the guest's.
	CtxMemBudget uint64
	CtxMaxAllocs int
	// HiLink is the HiLink switch port (hinic link serve's
	// hilink-port<N>.sock) the GPU opens for peer access; "" for none.
	HiLink string
	// LinkName is the port's name in `hinic link status`; default
	// the GPU's socket file name.
	LinkName string
	// MaxPeerOps bounds the guest's peer operations in flight
	// (1..MaxPeerOps, default DefaultMaxPeerOps).
	MaxPeerOps int
	// PeerTimeout fails a peer operation whose answer stops coming for
	// that long; default DefaultPeerTimeout.
	PeerTimeout time.Duration
}

func (c *GPUConfig) resolve() error {
	if c.ID < 0 || c.ID >= MaxGPUs {
		return fmt.Errorf("gpu_id %d: want 0..%d", c.ID, MaxGPUs-1)
	}
	if c.Socket == "" || c.RAMPath == "" || c.RAMSize == 0 {
		return errors.New("socket, RAM file and RAM size are required")
	}
	if c.Machine == "" {
		c.Machine = guestmem.MachineQ35
	}
	if _, err := guestmem.BelowFourG(c.Machine, c.RAMSize); err != nil {
		return err
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if len(c.Name) >= NameLen {
		return fmt.Errorf("name %q: at most %d bytes", c.Name, NameLen-1)
	}
	if c.MemSize == 0 {
		c.MemSize = DefaultMemSize
	}
	if c.MemSize%4096 != 0 || c.MemSize > MaxMemSize {
		return fmt.Errorf("device memory %d bytes: want a multiple of 4 KiB up to 1 TiB", c.MemSize)
	}
	if c.Vectors == 0 {
		c.Vectors = DefaultVectors
	}
	if c.Vectors < MinVectors || c.Vectors > 256 {
		return fmt.Errorf("%d vectors: want %d to 256", c.Vectors, MinVectors)
	}
	if c.MemBudget == 0 || c.MemBudget > c.MemSize {
		c.MemBudget = c.MemSize
	}
	for _, l := range []struct {
		p    *int
		def  int
		name string
	}{
		{&c.MaxContexts, DefaultMaxContexts, "max contexts"}, {&c.MaxAllocs, DefaultMaxAllocs, "max allocs"},
		{&c.MaxInflight, DefaultMaxInflight, "max inflight"}, {&c.MaxStreams, DefaultMaxStreams, "max streams"},
		{&c.MaxEvents, DefaultMaxEvents, "max events"}, {&c.MaxSGE, DefaultMaxSGE, "max sge"},
	} {
		if *l.p == 0 {
			*l.p = l.def
		}
		if *l.p < 1 || *l.p > limitCap {
			return fmt.Errorf("%s %d: want 1 to %d", l.name, *l.p, limitCap)
		}
	}
	if c.MaxContexts > 0xfffe {
		c.MaxContexts = 0xfffe // ctx ids are 16 bits, 0 is none
	}
	if c.CtxMemBudget == 0 || c.CtxMemBudget > c.MemBudget {
		c.CtxMemBudget = c.MemBudget
	}
	if c.CtxMaxAllocs == 0 || c.CtxMaxAllocs > c.MaxAllocs {
		c.CtxMaxAllocs = c.MaxAllocs
	}
	if c.MaxPeerOps == 0 {
		c.MaxPeerOps = DefaultMaxPeerOps
	}
	if c.MaxPeerOps < 1 || c.MaxPeerOps > MaxPeerOps {
		return fmt.Errorf("max peer ops %d: want 1 to %d", c.MaxPeerOps, MaxPeerOps)
	}
	if c.PeerTimeout <= 0 {
		c.PeerTimeout = DefaultPeerTimeout
	}
	if c.LinkName == "" {
		c.LinkName = filepath.Base(c.Socket)
	}
	return nil
}

// Config is a GPU backend process: one or more GPUs.
type Config struct {
	GPUs   []GPUConfig
	Logger *slog.Logger // nil discards
	// Control is the socket `hinic gpu status` reads; "" for none.
	Control string
}

// Server runs GPUs. Safe for concurrent use.
type Server struct {
	gpus    []*GPU
	rams    map[string]*guestmem.RAM // by RAM path: a guest's GPUs share its RAM
	log     *slog.Logger
	control *ctlsock.Server
	wg      sync.WaitGroup
	once    sync.Once
	started time.Time
}

// Start maps every GPU's guest RAM and device memory, listens on its
// ivshmem socket (QEMU must find it listening) and serves until Close.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(cfg.GPUs) == 0 {
		return nil, errors.New("gpu: no GPU configured")
	}
	s := &Server{log: log, rams: map[string]*guestmem.RAM{}, started: time.Now()}
	seen := map[string]bool{}
	for i := range cfg.GPUs {
		c := cfg.GPUs[i]
		if err := c.resolve(); err != nil {
			s.Close()
			return nil, fmt.Errorf("gpu: GPU %d: %w", i, err)
		}
		key := fmt.Sprintf("%s#%d", c.RAMPath, c.ID)
		if seen[key] || seen[c.Socket] {
			s.Close()
			return nil, fmt.Errorf("gpu: GPU %d: gpu_id %d of %s or socket %s given twice", i, c.ID, c.RAMPath, c.Socket)
		}
		seen[key], seen[c.Socket] = true, true
		ram := s.rams[c.RAMPath]
		if ram == nil {
			r, err := guestmem.Open(c.RAMPath, c.RAMSize, c.Machine)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("gpu: GPU %d: %w", i, err)
			}
			ram, s.rams[c.RAMPath] = r, r
		} else if below, _ := guestmem.BelowFourG(c.Machine, c.RAMSize); ram.RAMSize() != c.RAMSize || ram.Below4G() != below {
			s.Close()
			return nil, fmt.Errorf("gpu: GPU %d: RAM %s given with two sizes or machine types", i, c.RAMPath)
		}
		g, err := startGPU(c, ram, log)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("gpu: GPU %d: %w", i, err)
		}
		s.gpus = append(s.gpus, g)
	}
	if cfg.Control != "" {
		ctl, err := ctlsock.Listen(cfg.Control, "gpu", s.Status)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.control = ctl
	}
	return s, nil
}

// GPUs returns the server's GPUs.
func (s *Server) GPUs() []*GPU { return s.gpus }

// Close stops every GPU: guests see their connection close. Idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		if s.control != nil {
			s.control.Close()
		}
		for _, g := range s.gpus {
			g.close()
		}
		s.wg.Wait()
		for _, r := range s.rams {
			r.Close()
		}
	})
	return nil
}

// GPU is one emulated GPU: its ivshmem listener, device memory and the
// session of the guest connected now. Safe for concurrent use.
type GPU struct {
	cfg    GPUConfig
	ram    *guestmem.RAM
	devMem []byte // device memory, mapped shared from the memory file
	log    *slog.Logger
	ln     *net.UnixListener

	link *link // the HiLink port; nil without one

	mu      sync.Mutex // guards sess, nextID, closing
	sess    *session
	nextID  int
	closing bool

	stats gpuStats
	wg    sync.WaitGroup
}

// gpuStats are the GPU's counters over every session.
type gpuStats struct {
	sessions, rejected, doorbells, interrupts atomic.Uint64
	commands, errors, kernels, fatal, resets  atomic.Uint64
	bytesH2D, bytesD2H, bytesD2D, busyNS      atomic.Uint64
	canceled                                  atomic.Uint64
	lastFatal                                 atomic.Uint32
}

func startGPU(c GPUConfig, ram *guestmem.RAM, log *slog.Logger) (*GPU, error) {
	mem, err := mapDeviceMemory(c.MemPath, c.MemSize)
	if err != nil {
		return nil, err
	}
	g := &GPU{cfg: c, ram: ram, devMem: mem, log: log.With("gpu", c.ID, "socket", c.Socket), nextID: 1}
	if c.HiLink != "" {
		if g.link, err = openLink(g); err != nil {
			unix.Munmap(mem)
			return nil, fmt.Errorf("HiLink port: %w", err)
		}
	}
	ln, err := unixsock.Listen("unix", c.Socket, 0o660)
	if err != nil {
		if g.link != nil {
			g.link.close()
		}
		unix.Munmap(mem)
		return nil, fmt.Errorf("ivshmem socket: %w", err)
	}
	g.ln = ln
	g.wg.Add(1)
	go g.accept()
	return g, nil
}

// mapDeviceMemory maps size bytes of device memory: the file at path
// (created mode 0600 when missing, extended when shorter; it stays
// sparse until used) or an anonymous memfd. The file holds what the
// guest copied to the GPU, as private as its RAM: it is opened like the
// RAM file (guestmem.OpenPrivate), a symbolic link refused and a mode
// open to others narrowed to 0600.
func mapDeviceMemory(path string, size uint64) ([]byte, error) {
	var fd int
	if path == "" {
		var err error
		if fd, err = unix.MemfdCreate("higpu-mem", unix.MFD_CLOEXEC); err != nil {
			return nil, fmt.Errorf("device memory: memfd: %w", err)
		}
		defer unix.Close(fd)
	} else {
		f, err := guestmem.OpenPrivate(path)
		if err != nil {
			return nil, fmt.Errorf("device memory: %w", err)
		}
		defer f.Close()
		fd = int(f.Fd())
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("device memory %s: %w", path, err)
	}
	if uint64(st.Size) < size {
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			return nil, fmt.Errorf("device memory %s: size: %w", path, err)
		}
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("device memory %s: map: %w", path, err)
	}
	return mem, nil
}

// Config returns the GPU's resolved configuration.
func (g *GPU) Config() GPUConfig { return g.cfg }

func (g *GPU) close() {
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
	g.ln.Close()
	g.endSession(nil)
	g.wg.Wait()
	if g.link != nil {
		g.link.close()
	}
	unix.Munmap(g.devMem)
}

// accept serves ivshmem connections, one guest at a time: a second QEMU
// on the socket is refused (its connection closed before the setup).
func (g *GPU) accept() {
	defer g.wg.Done()
	for {
		c, err := g.ln.AcceptUnix()
		if err != nil {
			return
		}
		g.mu.Lock()
		busy := g.sess != nil || g.closing
		id := g.nextID
		if !busy {
			g.nextID = ivshmem.NextPeerID(g.nextID)
		}
		g.mu.Unlock()
		if busy {
			g.stats.rejected.Add(1)
			g.log.Warn("refusing a second guest")
			c.Close()
			continue
		}
		s, err := newSession(g, c, id)
		if err != nil {
			g.log.Error("guest setup failed", "err", err)
			c.Close()
			continue
		}
		g.mu.Lock()
		if g.closing {
			g.mu.Unlock()
			s.release()
			return
		}
		g.sess = s
		g.mu.Unlock()
		g.stats.sessions.Add(1)
		g.log.Info("guest connected", "peer", id)
		s.start()
		g.wg.Add(1)
		go g.watch(s)
	}
}

// watch ends the session when the guest disconnects (the server channel
// is one-way: a read returns only at EOF).
func (g *GPU) watch(s *session) {
	defer g.wg.Done()
	ivshmem.WaitHangup(s.conn)
	g.endSession(s)
}

// endSession tears down session s (the current one when nil): nothing
// the guest set up survives, as after a process of the guest died.
func (g *GPU) endSession(s *session) {
	g.mu.Lock()
	if s == nil {
		s = g.sess
	}
	if s == nil || g.sess != s {
		g.mu.Unlock()
		return
	}
	g.sess = nil
	g.mu.Unlock()
	g.log.Info("guest disconnected", "peer", s.peerID)
	s.close()
}
