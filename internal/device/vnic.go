// Package device is the HiNIC device backend: it turns the RDMA engine
// (internal/rdma) into a PCI NIC that a stock QEMU guest drives through
// the ivshmem-doorbell device.
//
// Per vNIC it owns: the ivshmem server socket QEMU connects to (the shared
// memory that becomes BAR2, doorbell and interrupt eventfds), the guest's
// RAM file mapped for DMA with GPA translation and bounds checks, the BAR2
// ABI of kernel/hicain_abi.h (device header and handshake, admin queue,
// event queue, L2 rings), the binding of guest work queues and CQ rings to
// rdma QPs and CQs, and the fabric port connection (UNIX SOCK_SEQPACKET
// with the port hello of docs/fabric-wire.md).
//
// device imports rdma and proto. It must not import internal/fabric: the
// two meet only at the socket wire format.
package device

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/PacketFive/hinic/internal/ctlsock"
	"github.com/PacketFive/hinic/internal/ivshmem"
	"github.com/PacketFive/hinic/internal/mmsg"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/shmport"
	"github.com/PacketFive/hinic/internal/unixsock"
)

// Defaults of VNICConfig.
const (
	DefaultShmSize = BAR2Min
	DefaultVectors = 8
	DefaultMTU     = 1024
	// DefaultIBMTU is the MTU of an InfiniBand vNIC: no netdev bounds
	// it, and OpenSM's default IPoIB broadcast group (MTU 2048) admits
	// only ports that can carry its MTU.
	DefaultIBMTU = 4096
	maxFrame     = L2MaxFrame // HiSwitch default port MaxFrame
	// MaxNetdevMTU is the largest MTU of the guest's netdev (the
	// header's max_mtu): a 9000-byte jumbo frame, which fits L2MaxFrame
	// with its Ethernet and VLAN headers and leaves room for the largest
	// RoCE MTU, 4096, after the RoCEv2 headers (ib_core's iboe_get_mtu
	// needs a netdev MTU of at least 4192 for it).
	MaxNetdevMTU = 9000
	// rxBatch is the most frames the fabric rx loop reads at once;
	// txBatch the most the engine's port gathers for one sendmmsg, in
	// buffers of rdmaMaxFrame bytes (the engine's largest frame: a
	// 4096-byte MTU and its headers).
	rxBatch      = 64
	txBatch      = 64
	rdmaMaxFrame = 4096 + 256
	// nicSocketBuffer is the socket buffer asked for at the backend's
	// end of the fabric port, each way: room for a burst of the
	// engine's window, so the engine's writes and the switch's do not
	// stall on a full buffer first.
	nicSocketBuffer = 4 << 20
)

// VNICConfig describes one emulated NIC.
type VNICConfig struct {
	Name       string // display name, e.g. "vm-a/hicain0"
	Socket     string // ivshmem server socket (QEMU -chardev socket,path=)
	RAMPath    string // memory-backend-file mem-path (share=on)
	RAMSize    uint64 // bytes; equal to QEMU's -m
	Machine    Machine
	ShmSize    uint64 // BAR2 size, a power of two >= 1 MiB; 0 = 1 MiB
	Vectors    int    // ivshmem-doorbell vectors=N; 0 = 8, at least 3
	FabricPort string // HiSwitch port socket; "" leaves the link down
	// FabricTransport is how frames cross the fabric port: "shm" (the
	// default) offers the switch a shared-memory ring pair in the port
	// hello and falls back to the socket when the switch declines it
	// (link.go); "socket" sends one SOCK_SEQPACKET message per frame.
	FabricTransport string
	MAC             [6]byte
	IPv4            []netip.Addr
	NodeGUID        uint64
	PortGUID        uint64
	LinkLayer       string // "eth" (RoCEv2, the default) or "ib" (native InfiniBand: LIDs from a subnet manager)
	MTU             int    // path MTU limit in bytes; 0 = 1024
	// MemBudget is the host memory the guest's verbs objects may hold
	// (MR page lists, QP, SRQ and CQ rings, AHs); past it, creating one
	// gets ENOMEM. 0 = DefaultMemBudget.
	MemBudget uint64
	// TrustPause lets the guest's PAUSE and PFC frames reach the
	// switch; without it the backend drops them (they pause every
	// class, or the named ones, of the port's egress for everyone).
	TrustPause bool
	// AllowedIPs, when not empty, are the only IPv4 and IPv6 addresses
	// the guest may use, pinned by the host as a cloud's port security
	// pins a port's fixed IPs: SET_ADDR with any other is refused
	// (EACCES), and an L2 TX frame whose IPv4, ARP or IPv6 source is
	// another is dropped (addrpin.go). The vNIC's IPv6 link-local
	// address (fe80:: with the EUI-64 of MAC) is always allowed. Empty:
	// any address, as before port security. Prefixes with host bits
	// set are masked; IPv4-mapped IPv6 ones are the IPv4 ones.
	AllowedIPs []netip.Prefix
}

func (c *VNICConfig) resolve() error {
	if c.Socket == "" || c.RAMPath == "" {
		return errors.New("socket and RAM file are required")
	}
	if c.RAMSize == 0 {
		return errors.New("RAM size is required")
	}
	if c.Machine == "" {
		c.Machine = MachineQ35
	}
	if _, err := BelowFourG(c.Machine, c.RAMSize); err != nil {
		return err
	}
	if c.ShmSize == 0 {
		c.ShmSize = DefaultShmSize
	}
	if c.ShmSize < BAR2Min || c.ShmSize&(c.ShmSize-1) != 0 {
		return fmt.Errorf("shared memory %d bytes: want a power of two of at least 1 MiB", c.ShmSize)
	}
	if c.Vectors == 0 {
		c.Vectors = DefaultVectors
	}
	if c.MemBudget == 0 {
		c.MemBudget = DefaultMemBudget
	}
	if c.MemBudget > 1<<62 {
		return fmt.Errorf("memory budget %d bytes: too large", c.MemBudget)
	}
	if c.Vectors < 3 || c.Vectors > 256 {
		return fmt.Errorf("%d vectors: want 3 to 256", c.Vectors)
	}
	switch c.FabricTransport {
	case "":
		c.FabricTransport = TransportShm
	case TransportShm, TransportSocket:
	default:
		return fmt.Errorf("fabric transport %q: want %s or %s", c.FabricTransport, TransportShm, TransportSocket)
	}
	switch c.LinkLayer {
	case "", "eth", "ethernet":
		c.LinkLayer = "eth"
	case "ib", "infiniband":
		c.LinkLayer = "ib"
	default:
		return fmt.Errorf("link layer %q: want eth or ib", c.LinkLayer)
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
		if c.LinkLayer == "ib" {
			c.MTU = DefaultIBMTU
		}
	}
	if c.MAC == ([6]byte{}) {
		return errors.New("MAC is required")
	}
	if c.NodeGUID == 0 {
		c.NodeGUID = eui64(c.MAC)
	}
	if c.PortGUID == 0 {
		c.PortGUID = c.NodeGUID
	}
	if c.Name == "" {
		c.Name = c.Socket
	}
	pinned := make([]netip.Prefix, 0, len(c.AllowedIPs)) // not the caller's array
	for i, p := range c.AllowedIPs {
		if !p.IsValid() {
			return fmt.Errorf("allowed address %d: %w", i, ErrAllowedIP)
		}
		pinned = append(pinned, unmapPrefix(p))
	}
	c.AllowedIPs = pinned
	if pins := newAddrPins(c); pins != nil {
		for _, a := range c.IPv4 {
			if !pins.allows(a) {
				return fmt.Errorf("IPv4 address %v is not among the allowed addresses %v", a, c.AllowedIPs)
			}
		}
	}
	return nil
}

// eui64 derives a GUID from a MAC as Linux's addrconf_addr_eui48 does.
func eui64(m [6]byte) uint64 {
	b := [8]byte{m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]}
	var g uint64
	for _, x := range b {
		g = g<<8 | uint64(x)
	}
	return g
}

// VNIC is one emulated NIC: its ivshmem listener, guest RAM, fabric port
// and the session of the guest currently connected. Safe for concurrent
// use.
type VNIC struct {
	cfg  VNICConfig
	pins *addrPins // nil: every address is allowed
	ram  *GuestRAM
	log  *slog.Logger
	ln   *net.UnixListener

	fabric   *fabricLink // nil when no fabric port is configured
	linkLost atomic.Bool // the fabric connection is down (redialling, link.go)

	mu      sync.RWMutex // guards sess, nextID, closing
	sess    *session
	nextID  int
	closing bool

	stats vnicStats
	wg    sync.WaitGroup
}

type vnicStats struct {
	sessions    atomic.Uint64
	rejected    atomic.Uint64
	doorbells   atomic.Uint64
	interrupts  atomic.Uint64
	adminCmds   atomic.Uint64
	adminErrors atomic.Uint64
	l2Tx        atomic.Uint64
	l2Rx        atomic.Uint64
	l2RxDropped atomic.Uint64
	// L2 TX frames dropped: a source other than the vNIC's MAC; MAC
	// Control (PAUSE, PFC) from a vNIC that does not trust them.
	l2TxSpoofed    atomic.Uint64
	l2TxMACControl atomic.Uint64
	// L2 TX frames dropped for an IPv4, ARP or IPv6 source the host did
	// not pin; SET_ADDR commands refused for the same reason.
	l2TxIPSpoofed  atomic.Uint64
	setAddrRefused atomic.Uint64
	roceRx         atomic.Uint64
	wqeErrors      atomic.Uint64
	fatal          atomic.Uint64
	cqOverflows    atomic.Uint64
	eventsLost     atomic.Uint64
	lastFatal      atomic.Uint32
	// Receive rings fetched because the engine ran short while the
	// guest posted without doorbells (recvnotify.go); each is also a
	// doorbell the device rang itself.
	recvFetches atomic.Uint64
	// Receive rings fetched on the engine's goroutine because a message
	// found the engine's queue empty (refillRQ): each a message taken
	// that would have had an RNR NAK or been lost.
	recvRefills atomic.Uint64
}

// Config is a device backend process: one or more vNICs.
type Config struct {
	VNICs  []VNICConfig
	Logger *slog.Logger // nil discards
	// Control is the control socket `hinic device status` reads; "" for
	// none.
	Control string
}

// Server runs vNICs. Safe for concurrent use.
type Server struct {
	vnics   []*VNIC
	log     *slog.Logger
	control *ctlsock.Server
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
}

// Start opens every vNIC's RAM file, listens on its ivshmem socket
// (QEMU must find it listening), attaches it to its fabric port and
// serves until Close.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(cfg.VNICs) == 0 {
		return nil, errors.New("device: no vNIC configured")
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s := &Server{log: log, cancel: cancel}
	for i := range cfg.VNICs {
		v, err := startVNIC(ctx, runCtx, cfg.VNICs[i], log)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("device: vNIC %d: %w", i, err)
		}
		s.vnics = append(s.vnics, v)
	}
	if cfg.Control != "" {
		ctl, err := ctlsock.Listen(cfg.Control, "device", s.Status)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.control = ctl
	}
	return s, nil
}

// VNICs returns the server's vNICs.
func (s *Server) VNICs() []*VNIC { return s.vnics }

// Close stops every vNIC: guests see their connection close. Idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.cancel()
		if s.control != nil {
			s.control.Close()
		}
		for _, v := range s.vnics {
			v.close()
		}
		s.wg.Wait()
	})
	return nil
}

func startVNIC(ctx, runCtx context.Context, cfg VNICConfig, log *slog.Logger) (*VNIC, error) {
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	ram, err := OpenGuestRAM(cfg.RAMPath, cfg.RAMSize, cfg.Machine)
	if err != nil {
		return nil, err
	}
	v := &VNIC{cfg: cfg, pins: newAddrPins(&cfg), ram: ram, log: log.With("vnic", cfg.Name), nextID: 1}
	// QEMU connects as the backend's user or a member of its group.
	ln, err := unixsock.Listen("unix", cfg.Socket, 0o660)
	if err != nil {
		ram.Close()
		return nil, fmt.Errorf("device: vNIC %s: %w", cfg.Name, err)
	}
	v.ln = ln
	if cfg.FabricPort != "" {
		hello := &proto.HelloFields{
			Version: proto.HelloVersion, LinkLayer: proto.HelloLinkEthernet, Role: proto.HelloRoleNIC,
			MaxFrame: maxFrame, MAC: cfg.MAC, PortNum: 1, PortGUID: cfg.PortGUID, NodeGUID: cfg.NodeGUID,
			Name: cfg.Name,
		}
		if cfg.ib() {
			hello.LinkLayer, hello.MAC = proto.HelloLinkInfiniBand, [6]byte{}
		}
		l, err := newFabricLink(ctx, cfg.FabricPort, hello, cfg.FabricTransport == TransportShm)
		if err != nil {
			ln.Close()
			ram.Close()
			return nil, err
		}
		v.fabric = l
		v.wg.Add(1)
		go v.receive()
	}
	v.wg.Add(1)
	go v.accept(runCtx)
	return v, nil
}

func (v *VNIC) close() {
	v.mu.Lock()
	v.closing = true
	v.mu.Unlock()
	v.ln.Close()
	if v.fabric != nil {
		v.fabric.Close()
	}
	v.endSession(nil)
	v.wg.Wait()
	v.ram.Close()
}

// Config returns the vNIC's resolved configuration.
func (v *VNIC) Config() VNICConfig { return v.cfg }

// RAM returns the vNIC's guest RAM mapping.
func (v *VNIC) RAM() *GuestRAM { return v.ram }

// accept serves ivshmem connections: one guest at a time (a second QEMU
// on the same socket is refused by closing its connection before setup,
// which makes it fail at start).
func (v *VNIC) accept(ctx context.Context) {
	defer v.wg.Done()
	for {
		c, err := v.ln.AcceptUnix()
		if err != nil {
			return
		}
		v.mu.Lock()
		busy := v.sess != nil
		id := v.nextID
		if !busy {
			v.nextID = ivshmem.NextPeerID(v.nextID)
		}
		v.mu.Unlock()
		if busy || ctx.Err() != nil {
			v.stats.rejected.Add(1)
			v.log.Warn("refusing a second guest", "socket", v.cfg.Socket)
			c.Close()
			continue
		}
		s, err := newSession(v, c, id)
		if err != nil {
			v.log.Error("guest setup failed", "err", err)
			c.Close()
			continue
		}
		v.mu.Lock()
		if v.closing {
			v.mu.Unlock()
			s.release()
			return
		}
		v.sess = s
		if !v.linkUp() {
			s.portDown() // the link dropped after the header was built
		} else {
			s.portUp() // or came back (link.go)
		}
		v.mu.Unlock()
		v.stats.sessions.Add(1)
		v.log.Info("guest connected", "peer", id)
		s.start()
		v.wg.Add(1)
		go v.watch(s)
	}
}

// watch waits for the guest to disconnect (QEMU exits; the server
// channel is one-way, so any read returns only at EOF) and ends the
// session.
func (v *VNIC) watch(s *session) {
	defer v.wg.Done()
	ivshmem.WaitHangup(s.conn)
	v.endSession(s)
}

// endSession tears down the guest session s (or the current one when s
// is nil). Nothing the guest set up survives; the RAM mapping and the
// fabric port stay for the next guest.
func (v *VNIC) endSession(s *session) {
	v.mu.Lock()
	if s == nil {
		s = v.sess
	}
	if s == nil || v.sess != s {
		v.mu.Unlock()
		return
	}
	v.sess = nil
	v.mu.Unlock()
	v.log.Info("guest disconnected", "peer", s.peerID)
	s.close()
}

// receive is the fabric rx loop: RoCEv2 frames to this NIC's MAC go to
// the engine (as a RoCE NIC steers them to its transport), every other
// frame to the guest's L2 RX ring, where the netdev filters as usual. It
// takes a batch at a time (recvmmsg into fixed buffers on a socket; on
// rings, the frames where they lie) and hands the engine's frames of a
// batch over in one DeliverBatch, so that the engine coalesces its ACKs
// over them.
func (v *VNIC) receive() {
	defer v.wg.Done()
	roce, raw := make([][]byte, 0, rxBatch), make([][]byte, 0, rxBatch)
	for {
		// The connection of the moment: relink replaces it.
		c := v.fabric.conn.Load()
		var err error
		if c.shm != nil {
			err = v.receiveShm(c, roce, raw)
		} else {
			err = v.receiveSocket(c, roce, raw)
		}
		if !v.relink(err) {
			return
		}
	}
}

// receiveSocket reads the frames of a socket connection, a batch per
// recvmmsg into fixed buffers, until it fails, and returns why.
func (v *VNIC) receiveSocket(c *linkConn, roce, raw [][]byte) error {
	bio, err := mmsg.New(c.uc, rxBatch)
	if err != nil {
		return err
	}
	bufs, frames := make([][]byte, rxBatch), make([][]byte, 0, rxBatch)
	sizes, trunc := make([]int, rxBatch), make([]bool, rxBatch)
	for i := range bufs {
		// One byte over the largest frame, so a longer one shows: the
		// engine and the L2 ring both drop it.
		bufs[i] = make([]byte, maxFrame+1)
	}
	for {
		n, err := bio.ReadBatch(bufs, sizes, trunc)
		if err != nil {
			return err
		}
		frames = frames[:0]
		for i := range n {
			frames = append(frames, bufs[i][:min(sizes[i], len(bufs[i]))])
		}
		// The engine handles the batch on this goroutine: no wake-up
		// between the frame and its CQE.
		if dev := v.deliver(frames, roce, raw); dev != nil {
			dev.RunInline(true)
		}
	}
}

// receiveShm takes the frames of a ring pair until it fails, and
// returns why. The socket carries nothing once the rings are up; its
// end is how the backend learns that the switch went away, so a watcher
// reads it and shuts the rings down, which wakes Recv (and a drain
// waiting for room). The frames are steered where they lie: the engine
// and the L2 ring copy what they keep before the slots go back.
func (v *VNIC) receiveShm(c *linkConn, roce, raw [][]byte) error {
	watched := make(chan struct{})
	var why error
	go func() {
		defer close(watched)
		var b [64]byte
		for {
			if _, err := c.uc.Read(b[:]); err != nil {
				why = err
				break
			}
		}
		c.shm.Shutdown()
	}()
	var dev *rdma.Device
	steer := func(frames [][]byte) { dev = v.deliver(frames, roce, raw) }
	var err error
	for {
		// Recv calls steer only when it returns no error; the engine
		// runs the batch once the slots are back.
		dev = nil
		var bad int
		if _, bad, err = c.shm.Recv(rxBatch, steer); err != nil {
			break
		}
		v.fabric.rxBad.Add(uint64(bad))
		if dev != nil {
			dev.RunInline(true)
		}
	}
	c.uc.Close()
	<-watched
	if why != nil && !errors.Is(why, net.ErrClosed) {
		return why
	}
	if errors.Is(err, shmport.ErrCorrupt) {
		return fmt.Errorf("fabric ring: %w", err)
	}
	return io.EOF
}

// deliver steers a batch of frames from the fabric (fabric rx
// goroutine); roce and raw are scratch for the engine's share (RoCE
// frames, and frames a flow of a raw packet QP takes). It returns the
// engine device it handed frames to, in a HoldKick: the caller runs them
// with RunInline once it holds no lock.
func (v *VNIC) deliver(frames [][]byte, roce, raw [][]byte) *rdma.Device {
	roce, raw = roce[:0], raw[:0]
	v.mu.RLock()
	defer v.mu.RUnlock()
	s := v.sess
	if s == nil {
		return nil
	}
	dev := s.rxDev.Load()
	for _, frame := range frames {
		if len(frame) == 0 {
			continue
		}
		if v.cfg.ib() {
			// An InfiniBand port carries only IB packets: all of
			// them are the engine's (its SMA and PMA included).
			v.stats.roceRx.Add(1)
			roce = append(roce, frame)
		} else if isRoCEv2(frame) && s.forEngine(frame) {
			v.stats.roceRx.Add(1)
			s.portCtr.Load().mcastRx.Add(groupFrame(frame))
			roce = append(roce, frame)
		} else if dev.Steers(frame) {
			// A flow of a raw packet QP takes it from the netdev
			// (ABI 1.16).
			raw = append(raw, frame)
		} else {
			s.l2Receive(frame)
		}
	}
	if len(roce) == 0 && len(raw) == 0 {
		return nil
	}
	dev.HoldKick()
	dev.DeliverBatch(roce)
	for _, f := range raw {
		if !dev.DeliverRaw(f) { // its flow went meanwhile
			s.l2Receive(f)
		}
	}
	clear(roce)
	clear(raw)
	return dev
}

// ib reports whether the vNIC's port is native InfiniBand.
func (c *VNICConfig) ib() bool { return c.LinkLayer == "ib" }

// linkUp reports whether the vNIC has a working fabric connection.
func (v *VNIC) linkUp() bool { return v.fabric != nil && !v.linkLost.Load() }

// dropLink marks the link down after the fabric connection failed (the
// switch went away) and tells the guest: LINK_UP cleared, PORT_ERR, port
// state DOWN. The link stays down until the redial (relink) succeeds.
func (v *VNIC) dropLink(err error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closing {
		return
	}
	v.linkLost.Store(true)
	v.log.Warn("fabric port connection lost; redialling", "port", v.cfg.FabricPort, "err", err)
	if v.sess != nil {
		v.sess.portDown()
	}
}

// isRoCEv2 reports whether frame is Ethernet (optionally one VLAN tag) /
// IPv4 or IPv6 / UDP to port 4791.
func isRoCEv2(f []byte) bool {
	if len(f) < 14 {
		return false
	}
	et := uint16(f[12])<<8 | uint16(f[13])
	p := f[14:]
	if et == 0x8100 {
		if len(f) < 18 {
			return false
		}
		et = uint16(f[16])<<8 | uint16(f[17])
		p = f[18:]
	}
	var udp []byte
	switch et {
	case 0x0800:
		if len(p) < 20 || p[9] != 17 {
			return false
		}
		ihl := int(p[0]&0xf) * 4
		if ihl < 20 || len(p) < ihl+8 {
			return false
		}
		udp = p[ihl:]
	case 0x86dd:
		if len(p) < 48 || p[6] != 17 {
			return false
		}
		udp = p[40:]
	default:
		return false
	}
	return uint16(udp[2])<<8|uint16(udp[3]) == 4791
}

// fabricPort is the engine's Port on the link's connection of the
// moment; frames gathered for a connection that was replaced meanwhile
// are lost, as any frame sent on a failed link is.
//
// Over a socket, one frame per SEQPACKET message, gathered over a round
// of the engine's work and sent with one sendmmsg (an rdma.FlushPort).
// Over rings, each frame is copied into the next free slot, and the
// round's frames are published at Flush with at most one wake-up of the
// switch.
//
// It never makes the engine wait (an rdma.BackloggedPort): what the
// socket or the ring cannot take now is kept, in order, and a drain
// goroutine sends it, waiting for room, while the engine goes on taking
// frames; it then tells the engine (Device.TxReady). The engine sends no
// new requests while the port holds a backlog. Waiting in the engine
// would stop the goroutine that reads the link too, and on a lossless
// fabric two backends waiting so close a cycle through the switch.
type fabricPort struct {
	link *fabricLink // nil without a fabric port
	ctr  *portCounters
	ib   bool // IB packets: no MAC to tell multicast by
	// ready is the engine's TxReady, set once the device exists.
	ready func()

	mu       sync.Mutex   // the engine's runner and the drain goroutine
	wc       *linkConn    // the connection w writes to
	w        *mmsg.Writer // in no-wait mode; nil on rings
	draining bool         // a drain goroutine sends w's oldest frames
}

func newFabricPort(l *fabricLink, ctr *portCounters, ib bool) *fabricPort {
	return &fabricPort{link: l, ctr: ctr, ib: ib, ready: func() {}}
}

// current returns the link's connection of the moment, making a socket
// writer when the connection changed (a redial), or nil; p.mu is held.
func (p *fabricPort) current() *linkConn {
	if p.link == nil {
		return nil
	}
	if c := p.link.conn.Load(); c != p.wc {
		p.wc, p.w, p.draining = c, nil, false // a drain of the old one ends on its error
		if c.shm == nil {
			if bio, err := mmsg.New(c.uc, txBatch); err == nil {
				p.w = mmsg.NewWriter(bio, rdmaMaxFrame)
				p.w.SetNoWait(true)
			}
		}
	}
	return p.wc
}

func (p *fabricPort) Send(frame []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.current()
	switch {
	case c == nil || (c.tx == nil && p.w == nil):
		return errors.New("device: link down")
	case c.tx != nil:
		if err := c.tx.send(frame, p.ready); err != nil {
			return err
		}
	case p.draining:
		p.w.Gather(frame) // after the frames the drain sends
	default:
		if err := p.w.Send(frame); err != nil {
			return err
		}
	}
	if !p.ib {
		p.ctr.mcastTx.Add(groupFrame(frame))
	}
	return nil
}

func (p *fabricPort) Flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.current()
	if c != nil && c.tx != nil {
		return c.tx.flush()
	}
	w := p.w
	if w == nil || p.draining {
		return nil
	}
	err := w.Flush()
	if err == nil && w.Pending() > 0 {
		p.draining = true
		go p.drain(w)
	}
	return err
}

// Backlog is rdma.BackloggedPort's: frames kept for the connection of
// the moment that the socket or the ring has not taken yet.
func (p *fabricPort) Backlog() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wc != nil && p.wc.tx != nil {
		return p.wc.tx.backlog()
	}
	if p.w == nil {
		return 0
	}
	return p.w.Pending()
}

// drain sends w's frames, waiting for room, until none is left, telling
// the engine after each batch. An error loses what is kept, as a failed link does.
func (p *fabricPort) drain(w *mmsg.Writer) {
	batch := make([][]byte, txBatch)
	for {
		p.mu.Lock()
		n := w.Head(batch)
		if n == 0 || p.w != w {
			if p.w == w {
				p.draining = false
			}
			ready := p.ready
			p.mu.Unlock()
			ready()
			return
		}
		p.mu.Unlock()
		err := w.Conn().WriteBatch(batch[:n])
		clear(batch[:n])
		p.mu.Lock()
		if err != nil {
			n = w.Pending()
		}
		w.Sent(n)
		ready := p.ready
		p.mu.Unlock()
		// Room again: the engine may start new work below its backlog
		// limit while the rest goes, so the socket never runs dry.
		ready()
	}
}

// portCounters are what the port sees of the engine's frames beyond the
// engine's own counters (QUERY_COUNTERS): RoCE frames to a group MAC,
// sent (the engine's goroutine) and received (the fabric rx goroutine);
// an InfiniBand port counts none. One per engine device, so they restart
// with the engine's counters. Safe for concurrent use.
type portCounters struct {
	mcastTx, mcastRx atomic.Uint64
}

// groupFrame is 1 for a frame to an Ethernet group address (the I/G bit
// of the destination MAC, IEEE 802 clause 8.2), else 0.
func groupFrame(frame []byte) uint64 {
	if len(frame) >= 6 && frame[0]&1 != 0 {
		return 1
	}
	return 0
}
