// Package rack is the embedded rack: one HiSwitch fabric and N emulated
// hosts in one process, with no VMs. Each host is an RDMA engine
// (internal/rdma) with its own simulated host memory, attached to a fabric
// port over a real UNIX SOCK_SEQPACKET connection opened by the port hello,
// exactly as the device backend attaches a guest's NIC. The rack serves the
// embedded e2e gate (`hinic verify e2e --embedded`), `hinic bench rdma` and
// the README demo.
//
// rack imports fabric and rdma, which never import each other: they meet
// here only through the socket.
package rack

import (
	"context"
	"errors"
	"fmt"
	"github.com/PacketFive/hinic/internal/ibsm"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/shmport"
)

// Defaults.
const (
	DefaultHosts   = 2
	DefaultMTU     = 4096
	DefaultMemSize = 64 << 20
	// maxFrame is the largest frame a host port sends: a 4096-byte IB MTU
	// plus RoCEv2 headers (Ethernet 18, IPv6 40, UDP 8, BTH and extensions
	// 12+28, ICRC 4), rounded up.
	maxFrame = 4096 + 256
)

// Config describes a rack.
type Config struct {
	Hosts   int    // emulated hosts, at least 1; default 2
	MTU     int    // path MTU of every engine: 256..4096; default 4096
	MemSize int    // bytes of simulated memory per host; default 64 MiB
	RunDir  string // fabric socket directory; "" makes a temporary one removed by Close
	Pcap    string // when set, the fabric writes one capture per port here
	// Raw attaches hosts to the fabric without an engine: their Conn is
	// free for raw frames (the raw ceiling of `hinic bench rdma`).
	Raw bool
	// Faults are injected into the frames every host sends, at its
	// fabric port (docs/fabric.md). Faults.Seed makes the injection
	// repeatable: port N draws from PCG(Seed, N).
	Faults fabric.FaultsConfig
	// LinkLayer is LinkEthernet (RoCEv2; also when empty) or LinkIB:
	// native InfiniBand ports on the switch and the hosts, brought up by
	// the rack's subnet manager (package ibsm) running on host1's QP0 and
	// QP1, which gives host1 LID 1, the switch LID 2 and the other hosts
	// 3, 4, ...
	LinkLayer string
	// Port is how hosts reach their fabric ports: PortSocket (also when
	// empty; SOCK_SEQPACKET) or PortShm (a shared-memory ring pair set
	// up by the hello, docs/fabric-wire.md).
	Port   string
	Logger *slog.Logger // nil discards
	// HostBase numbers the hosts from HostBase+1 (name, MAC, IP, GUID),
	// so that racks joined by a link have distinct hosts.
	HostBase int
	// Uplinks are more ports of the rack's switch, after the hosts'
	// (a vxlan link to a rack on another host, for example).
	Uplinks []fabric.PortConfig
	// DialTunnel opens the sockets of vxlan uplinks (fabric.Config).
	DialTunnel func(d *net.Dialer, network, address string) (net.Conn, error)
}

// Port kinds of Config.Port.
const (
	PortSocket = "socket"
	PortShm    = "shm"
)

// Host is one emulated host: its NIC engine, memory and addresses.
type Host struct {
	Name   string
	Index  int // 0-based
	Device *rdma.Device
	Memory *rdma.HostMemory
	MAC    [6]byte
	IP     netip.Addr
	// Conn is the host's connection to its fabric port. In a Raw rack the
	// caller reads and writes it; otherwise the rack does. It is the
	// first connection: after RestartFabric the host's engine uses the
	// one it dialled again, which these fields do not follow.
	Conn *net.UnixConn
	// Shm is the host's ring pair when Config.Port is PortShm: the
	// frames go through it and Conn carries none.
	Shm *shmport.Conn

	// The port the host dials and its hello, kept for the redial; link
	// is the attachment in use (relink.go), links counts attachments
	// (written under the rack's mu).
	portPath string
	hello    *proto.HelloFields
	link     atomic.Pointer[hostLink]
	links    atomic.Uint64

	allocMu sync.Mutex
	next    uint64 // bump allocator over Memory

	// mcastLIDs are the MLIDs of the InfiniBand multicast groups the
	// rack's fabric forwards (set at bring-up).
	mcastLIDs map[[16]byte]uint16
}

// Alloc reserves n bytes of the host's memory, 4 KiB aligned, and returns
// their address. Free gives the most recent allocations back (a stack).
func (h *Host) Alloc(n uint64) (uint64, error) {
	h.allocMu.Lock()
	defer h.allocMu.Unlock()
	addr := (h.next + 4095) &^ 4095
	if addr+n > h.Memory.Size() {
		return 0, fmt.Errorf("rack: %s: out of memory (%d bytes asked, %d left)", h.Name, n, h.Memory.Size()-addr)
	}
	h.next = addr + n
	return addr, nil
}

// Available is how many bytes Alloc can still reserve (less up to 4 KiB
// of alignment).
func (h *Host) Available() uint64 {
	h.allocMu.Lock()
	defer h.allocMu.Unlock()
	return h.Memory.Size() - min(h.Memory.Size(), (h.next+4095)&^4095)
}

// Free returns [addr, addr+n) to the allocator when it is the most recent
// allocation; anything else stays reserved until the rack closes.
func (h *Host) Free(addr, n uint64) {
	h.allocMu.Lock()
	defer h.allocMu.Unlock()
	if addr+n == h.next {
		h.next = addr
	}
}

// GIDIndex is the GID table index of the host's RoCEv2 IPv4 GID
// (::ffff:a.b.c.d), as perftest's -x 1 and ibv_rc_pingpong's -g 1 use.
const GIDIndex = 1

// Rack is a running embedded rack.
type Rack struct {
	Fabric *fabric.Fabric
	Hosts  []*Host
	// SM is the subnet manager's view of an InfiniBand rack after its
	// sweep (nodes, ports, LIDs, routes); nil on Ethernet.
	SM      *ibsm.SM
	madPort *madPort

	cfg    Config
	runDir string
	// mu orders a host's redial with Close: no link is stored once the
	// rack is closed. It also guards Fabric while RestartFabric swaps it.
	mu     sync.Mutex
	closed bool
	// relinked is closed and replaced whenever a host attaches again.
	relinked chan struct{}

	tmpDir    string
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// hostMAC and hostIP number hosts from 1: 02:48:4e:00:00:01, 10.42.0.1.
func hostMAC(i int) [6]byte   { return [6]byte{0x02, 0x48, 0x4e, 0x00, byte(i >> 8), byte(i)} }
func hostIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 42, byte(i >> 8), byte(i)}) }

// Start builds the fabric, attaches every host and returns the rack. Close
// it when done.
func Start(ctx context.Context, cfg Config) (*Rack, error) {
	if cfg.Hosts == 0 {
		cfg.Hosts = DefaultHosts
	}
	if cfg.Hosts < 1 || cfg.HostBase < 0 || cfg.HostBase+cfg.Hosts > 250 {
		return nil, fmt.Errorf("rack: hosts %d to %d: want 1 to 250", cfg.HostBase+1, cfg.HostBase+cfg.Hosts)
	}
	if cfg.MTU == 0 {
		cfg.MTU = DefaultMTU
	}
	if cfg.MemSize == 0 {
		cfg.MemSize = DefaultMemSize
	}
	switch cfg.LinkLayer {
	case "", LinkEthernet:
		cfg.LinkLayer = LinkEthernet
	case LinkIB:
		if cfg.Raw {
			return nil, fmt.Errorf("rack: a raw rack is Ethernet only")
		}
	default:
		return nil, fmt.Errorf("rack: link layer %q: want %q or %q", cfg.LinkLayer, LinkEthernet, LinkIB)
	}
	switch cfg.Port {
	case "":
		cfg.Port = PortSocket
	case PortSocket, PortShm:
	default:
		return nil, fmt.Errorf("rack: port kind %q: want %q or %q", cfg.Port, PortSocket, PortShm)
	}
	r := &Rack{relinked: make(chan struct{})}
	runDir := cfg.RunDir
	if runDir == "" {
		d, err := os.MkdirTemp("", "hinic-rack-")
		if err != nil {
			return nil, fmt.Errorf("rack: %w", err)
		}
		r.tmpDir, runDir = d, d
	}
	r.cfg, r.runDir = cfg, runDir
	fab, err := r.newFabric()
	if err != nil {
		r.removeTmp()
		return nil, err
	}
	r.Fabric = fab
	sw := fab.Switches()[0]
	for i := range cfg.Hosts {
		h, err := r.attach(ctx, sw, i, cfg)
		if err != nil {
			_ = r.Close()
			return nil, err
		}
		r.Hosts = append(r.Hosts, h)
	}
	if cfg.LinkLayer == LinkIB {
		if err := r.bringUpIB(ctx, r.Hosts[0]); err != nil {
			_ = r.Close()
			return nil, err
		}
	}
	return r, nil
}

func (r *Rack) attach(ctx context.Context, sw *fabric.Switch, i int, cfg Config) (*Host, error) {
	n := cfg.HostBase + i + 1
	h := &Host{Name: fmt.Sprintf("host%d", n), Index: i, MAC: hostMAC(n), IP: hostIP(n),
		Memory: rdma.NewHostMemory(cfg.MemSize)}
	guid := uint64(0x0248_4eff_fe00_0000) | uint64(n)<<8
	ib := cfg.LinkLayer == LinkIB
	hello := &proto.HelloFields{
		Version: proto.HelloVersion, LinkLayer: proto.HelloLinkEthernet, Role: proto.HelloRoleNIC,
		MaxFrame: maxFrame, MAC: h.MAC, PortNum: 1, PortGUID: guid, NodeGUID: guid, Name: h.Name + "/hinic0",
	}
	if ib {
		hello.LinkLayer, hello.MAC, hello.PortGUID = proto.HelloLinkInfiniBand, [6]byte{}, guid+1
	}
	h.hello, h.portPath = hello, sw.SocketPath(i+1)
	l, err := h.dial(ctx, cfg.Port == PortShm)
	if err != nil {
		return nil, err
	}
	h.link.Store(l)
	h.links.Add(1)
	h.Conn, h.Shm = l.conn, l.shm
	if cfg.Raw {
		return h, nil
	}
	dc := rdma.DeviceConfig{
		Name: "hinic0", NodeGUID: guid, PortGUID: guid, MAC: h.MAC,
		IPv4: []netip.Addr{h.IP}, MTU: cfg.MTU, Memory: h.Memory,
	}
	if ib {
		dc = rdma.DeviceConfig{Name: "hicain0", LinkLayer: rdma.LinkLayerInfiniBand, NodeGUID: guid, PortGUID: guid + 1,
			Description: h.Name + " hicain0", MTU: cfg.MTU, Memory: h.Memory}
	}
	dev, err := rdma.NewDevice(dc, linkPort{h})
	if err != nil {
		l.close()
		return nil, fmt.Errorf("rack: %s: %w", h.Name, err)
	}
	h.Device = dev
	r.wg.Add(1)
	go r.receive(h)
	return h, nil
}

// Close stops the hosts and the fabric and removes a temporary run
// directory. It is idempotent.
func (r *Rack) Close() error {
	r.closeOnce.Do(func() {
		var errs []error
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		for _, h := range r.Hosts {
			if l := h.link.Load(); l != nil {
				errs = append(errs, l.shutdown())
			}
		}
		r.wg.Wait()
		if r.madPort != nil {
			r.madPort.close()
		}
		for _, h := range r.Hosts {
			if h.Device != nil {
				errs = append(errs, h.Device.Close())
			}
			if l := h.link.Load(); l != nil {
				l.close() // rx and the engine have stopped
			}
		}
		if r.Fabric != nil {
			errs = append(errs, r.Fabric.Close())
		}
		r.removeTmp()
		r.closeErr = errors.Join(errs...)
	})
	return r.closeErr
}

func (r *Rack) removeTmp() {
	if r.tmpDir != "" {
		_ = os.RemoveAll(r.tmpDir)
	}
}

func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// SendRaw sends one frame from a Raw rack's host, through its rings or
// its socket.
func (h *Host) SendRaw(frame []byte) error {
	if h.Shm != nil {
		return h.Shm.Send(frame)
	}
	_, err := h.Conn.Write(frame)
	return err
}

// RecvRaw waits up to timeout for the next frame to a Raw rack's host
// and copies it into buf, returning its length. It is for one goroutine
// at a time.
func (h *Host) RecvRaw(buf []byte, timeout time.Duration) (int, error) {
	if h.Shm == nil {
		if err := h.Conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			return 0, err
		}
		return h.Conn.Read(buf)
	}
	// The rings have no deadline: a Raw rack's frames are expected.
	n := 0
	_, _, err := h.Shm.Recv(1, func(fs [][]byte) { n = copy(buf, fs[0]) })
	return n, err
}
