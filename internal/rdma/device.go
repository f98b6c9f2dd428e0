package rdma

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/PacketFive/hinic/internal/clock"
	"github.com/PacketFive/hinic/internal/ibagent"
)

// Defaults for the DeviceConfig limits left at zero.
const (
	DefaultMaxQP         = 1024
	DefaultMaxCQ         = 1024
	DefaultMaxMR         = 4096
	DefaultMaxPD         = 1024
	DefaultMaxQPWR       = 16384
	DefaultMaxCQE        = 1 << 20
	DefaultMaxSGE        = 32 // rxe's max_sge
	DefaultMaxInline     = 256
	DefaultMaxQPRDAtomic = 128 // outstanding READs and atomics per QP, both directions, as rxe
	DefaultMaxSRQ        = 1024
	DefaultMaxSRQWR      = 16384
	DefaultMaxMcastGrp   = 256
	DefaultMaxMcastQP    = 64 // QPs attached to one group
	DefaultMaxFlow       = 1024
	DefaultMTU           = 1024
	DefaultRxQueueLen    = 4096
	DefaultRxWait        = time.Millisecond
	DefaultVendorID      = 0x1ED5 // HiNIC's virtual PCI vendor (ARCHITECTURE.md)
	DefaultVendorPartID  = 0xCA10
)

// Fixed properties of the emulated device.
const (
	// MaxMsgSize is the largest message (max_msg_sz), as rxe in 6.12.
	MaxMsgSize = 1 << 31
	// MaxUnackedPSNs and MaxUnackedBytes bound what a requester has in
	// flight (READs count their response PSNs): 1024 PSNs, and at most
	// MaxUnackedBytes of packets at the path MTU, so the window is 1024
	// PSNs at MTU 512, 512 at 1024, 256 at 2048 and 128 at 4096. rxe's
	// RXE_MAX_UNACKED_PSNS of 128 held two 64 KiB messages at MTU 1024
	// and left the requester idle for most of each round trip. The byte
	// bound keeps one QP's burst within half of what a HiSwitch egress
	// queue holds (1 MiB per class by default): with a 1 MiB window, a
	// receiver that fell behind for a moment had the last frames of a
	// window tail-dropped (256 frames of 4 KiB are more than 1 MiB with
	// their headers), which only the ACK timeout or a probe recovers.
	MaxUnackedPSNs  = 1024
	MaxUnackedBytes = 1 << 19
	// ackReqInterval: the requester sets AckReq at least every this many
	// packets of a long message so the window keeps moving and a lost
	// packet is found long before the ACK timeout.
	ackReqInterval = 32
	// maxFrameSize is the largest frame the engine builds or accepts:
	// Ethernet + IPv6 + UDP + BTH + RETH + ImmDt + 4096 payload + pad + ICRC
	// with room to spare (a VLAN tag, odd padding).
	maxFrameSize = 4096 + 256
	// pkeyDefault is the only P_Key of the table (full member).
	pkeyDefault = 0xFFFF
	// firstQPN is the first QP number handed out; 0 and 1 are QP0/QP1
	// and rxe starts its RC/UD numbers at 0x11.
	firstQPN = 0x11
)

// DeviceConfig describes an emulated RDMA NIC with one port: RoCEv2 on
// Ethernet (the default) or native InfiniBand.
type DeviceConfig struct {
	Name     string // the ibdev name, e.g. "hinic0"
	NodeGUID uint64 // required for InfiniBand
	PortGUID uint64 // InfiniBand: NodeGUID+1 when zero
	// LinkLayer is LinkLayerEthernet (RoCEv2; also when zero) or
	// LinkLayerInfiniBand (LRH/GRH/BTH ... ICRC/VCRC packets addressed by
	// LID, with the port's SMA and PMA; see ib.go).
	LinkLayer LinkLayer
	// LID, when not zero, gives an InfiniBand port this LID and makes it
	// Active at once (static addressing, no subnet manager); SMLID is then
	// the SM LID it reports. Zero: the port waits in Init for an SM.
	LID, SMLID uint16
	// Description is the InfiniBand NodeDescription; default Name.
	Description string
	// MAC is the Ethernet port's MAC (RoCEv2; unused on InfiniBand); GID 0
	// is derived from it.
	MAC [6]byte
	// IPv4 addresses of the netdev. GID index 0 is the link-local
	// fe80::/64 GID built from the MAC (EUI-64, as Linux does for RoCE);
	// index 1+i is the RoCEv2 GID ::ffff:IPv4[i] (perftest -x 1 picks the
	// first address).
	IPv4 []netip.Addr
	// IPv6 addresses (global or ULA), added to the GID table after the
	// IPv4 ones. Optional.
	IPv6 []netip.Addr
	// MTU is the active path-MTU limit: 256, 512, 1024, 2048 or 4096
	// bytes, or the IB MTU codes 1-5. Zero means DefaultMTU.
	MTU    int
	Memory Memory      // the DMA space (required)
	Clock  clock.Clock // nil means clock.System()

	// Limits; zero means the Default* value.
	MaxQP, MaxCQ, MaxMR, MaxPD, MaxQPWR, MaxCQE, MaxSGE, MaxInline, MaxQPRDAtomic int
	// MaxMW bounds the memory windows (AllocMW); zero means DefaultMaxMW.
	MaxMW int
	// SRQ and multicast limits; zero means the Default* value (MaxSRQSGE:
	// MaxSGE).
	MaxSRQ, MaxSRQWR, MaxSRQSGE, MaxMcastGrp, MaxMcastQPAttach int
	// MaxXRCD is the XRC domains; zero means DefaultMaxXRCD.
	MaxXRCD int

	// Identity reported by QueryDevice; zero means the defaults.
	VendorID, VendorPartID, HWVer uint32
	FWVersion                     string

	// RawTxFilter, when set, sees each frame a raw packet QP sends to
	// the port (not those a flow of this device loops back) and drops
	// it, counted as RawTxFiltered, when it returns false: the device
	// backend applies its vNIC's source checks there, as to its
	// netdev's frames. Called by the engine's runner; it must not block
	// or keep frame.
	RawTxFilter func(frame []byte) bool

	// MaxFlow bounds the flows (CreateFlow) of the device. Zero means
	// DefaultMaxFlow.
	MaxFlow int

	// RxQueueLen bounds the frames waiting for the engine. Zero means
	// DefaultRxQueueLen.
	RxQueueLen int
	// RxWait is how long Deliver waits for room in a full receive queue
	// before it drops the frame (counted in RxDropped). The wait pushes
	// back on the sender (the fabric's socket, an in-memory wire) the way
	// link-level flow control would; it is bounded so that two devices
	// whose engines both block in Port.Send cannot deadlock. Zero means
	// DefaultRxWait; negative means never wait.
	RxWait time.Duration
	// DCQCN turns on the reaction point (rate control of the QPs that
	// receive CNPs); nil leaves it off. Zero fields take the defaults
	// (see DCQCNConfig).
	DCQCN *DCQCNConfig
	// CNPInterval is the notification point's minimum time between two
	// CNPs to the same QP. Zero means DefaultCNPInterval; negative, a CNP
	// for every CE-marked packet.
	CNPInterval time.Duration
}

// DeviceAttr is what QueryDevice reports (struct ibv_device_attr).
type DeviceAttr struct {
	FWVer                 string
	NodeGUID              uint64
	SysImageGUID          uint64
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 int
	MaxQPWR               int
	DeviceCapFlags        uint32
	MaxSGE                int
	MaxSGERd              int
	MaxCQ                 int
	MaxCQE                int
	MaxMR                 int
	MaxMW                 int
	MaxPD                 int
	MaxQPRdAtom           int
	MaxQPInitRdAtom       int
	MaxResRdAtom          int
	AtomicCap             int // AtomicCapHCA: atomic with respect to this device's operations
	MaxPKeys              int
	LocalCAAckDelay       uint8
	PhysPortCnt           int
	MaxInlineData         int // not in ibv_device_attr; the SQ inline limit
	MaxMsgSize            uint64
	MaxSRQ                int
	MaxSRQWR              int
	MaxSRQSGE             int
	MaxMcastGrp           int
	MaxMcastQPAttach      int
	MaxTotalMcastQPAttach int
	MaxAH                 int
	TM                    TMCaps
}

// TMCaps are the tag-matching limits (struct ibv_tm_caps).
type TMCaps struct {
	MaxRndvHdrSize, MaxNumTags, Flags, MaxOps, MaxSGE int
}

// Device capability flags reported in DeviceAttr.DeviceCapFlags (enum
// ibv_device_cap_flags).
const (
	DeviceCurrQPStateMod  = 1 << 7  // IBV_DEVICE_CURR_QP_STATE_MOD
	DeviceSysImageGUID    = 1 << 11 // IBV_DEVICE_SYS_IMAGE_GUID
	DeviceRCRNRNAKGen     = 1 << 12 // IBV_DEVICE_RC_RNR_NAK_GEN
	DeviceSRQResize       = 1 << 13 // IBV_DEVICE_SRQ_RESIZE
	DeviceMemWindow       = 1 << 17 // IBV_DEVICE_MEM_WINDOW
	DeviceMemWindowType2A = 1 << 23 // IBV_DEVICE_MEM_WINDOW_TYPE_2A: type 2 windows bound to a QP
	DeviceMemWindowType2B = 1 << 24 // IBV_DEVICE_MEM_WINDOW_TYPE_2B: type 2 windows, remote invalidation
	DeviceXRC             = 1 << 20 // IBV_DEVICE_XRC
)

// PortAttr is what QueryPort reports (struct ibv_port_attr).
type PortAttr struct {
	State         PortState
	MaxMTU        MTU
	ActiveMTU     MTU
	GIDTableLen   int
	PortCapFlags  uint32
	MaxMsgSize    uint64
	BadPKeyCntr   uint32
	QKeyViolCntr  uint32
	PKeyTableLen  int
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     LinkLayer
}

// Device is one emulated RoCEv2 NIC: a GID table, resource tables and the
// transport engine.
//
// Ownership: the verbs methods (AllocPD, RegMR, CreateCQ, CreateQP, Post*,
// Poll, Modify, Query*, Counters, Deliver, Close) are safe for concurrent use
// from any goroutine. All transport state (PSNs, retransmission, responder
// state, the QP table) is owned by the device's engine goroutine; other
// goroutines reach it only through the engine's bounded queues (see
// engine.go).
type Device struct {
	cfg DeviceConfig
	// pmaSrc is the port's counters as its PMA shows them (both link
	// layers: from the wire on InfiniBand, LocalPerfMgt from the host).
	pmaSrc    *ibagent.CAPMA
	port      Port
	flushPort FlushPort      // port, when it batches its sends; else nil
	backlog   BackloggedPort // port, when it keeps what its peer cannot take; else nil
	mem       Memory
	clock     clock.Clock
	activeMTU MTU

	// addrs is the GID table and the IPv4 addresses behind it (the
	// destination check), replaced whole by SetIPv4: readers take one
	// snapshot per use.
	addrs  atomic.Pointer[addrTable]
	maxQPN int

	ctr counters

	// Resource tables, guarded by mu (control path only).
	mu      sync.Mutex
	nextQPN uint32
	qpnUsed map[uint32]bool
	nPD     int
	nCQ     int
	nQP     int
	nSRQ    int
	pdID    uint32
	srqID   uint32
	nXRCD   int
	xrcdID  uint32

	// Memory-region key table: slot index = key >> 8, slot 0 unused.
	// mrMu orders its writers; the engine reads mrTab on every DMA
	// lookup without a lock.
	mrMu    sync.Mutex
	mrTab   ptrTable[MR]
	mrFree  []uint32
	mrKeyGn []uint8 // the key byte each slot last had (insertMR); one per slot
	nMR     int
	// Memory-window table, under mrMu as well (mw.go): slot index =
	// (key &^ mwKeyBit) >> 8.
	mwTab   ptrTable[MW]
	mwFree  []uint32
	mwKeyGn []uint8 // one per slot
	nMW     int

	// The engine: see engine.go.
	eng engine

	// flows is the steering table of the raw packet QPs (raw.go):
	// replaced whole under mu, read lock-free by the engine and by
	// DeliverRaw's callers.
	flows  atomic.Pointer[flowTable]
	flowID uint64 // the last flow's id (under mu)

	async chan AsyncEvent // see AsyncEvents

	port1 ibPort // InfiniBand port state (ib.go)

	closeOnce sync.Once
	closed    atomic.Bool
}

// NewDevice creates a device whose frames leave through port and starts its
// engine goroutine. Close stops it.
func NewDevice(cfg DeviceConfig, port Port) (*Device, error) {
	if port == nil {
		return nil, fmt.Errorf("rdma: new device %q: nil port: %w", cfg.Name, ErrInvalid)
	}
	if cfg.Memory == nil {
		return nil, fmt.Errorf("rdma: new device %q: DeviceConfig.Memory is required: %w", cfg.Name, ErrInvalid)
	}
	if cfg.LinkLayer == LinkLayerUnspecified {
		cfg.LinkLayer = LinkLayerEthernet
	}
	if cfg.LinkLayer != LinkLayerEthernet && cfg.LinkLayer != LinkLayerInfiniBand {
		return nil, fmt.Errorf("rdma: new device %q: link layer %d: %w", cfg.Name, cfg.LinkLayer, ErrInvalid)
	}
	if cfg.LinkLayer == LinkLayerEthernet && (cfg.MAC == ([6]byte{}) || cfg.MAC[0]&1 != 0) {
		return nil, fmt.Errorf("rdma: new device %q: DeviceConfig.MAC must be a unicast address: %w", cfg.Name, ErrInvalid)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System()
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.MaxQP, DefaultMaxQP)
	def(&cfg.MaxCQ, DefaultMaxCQ)
	def(&cfg.MaxMR, DefaultMaxMR)
	def(&cfg.MaxMW, DefaultMaxMW)
	def(&cfg.MaxPD, DefaultMaxPD)
	def(&cfg.MaxQPWR, DefaultMaxQPWR)
	def(&cfg.MaxCQE, DefaultMaxCQE)
	def(&cfg.MaxSGE, DefaultMaxSGE)
	def(&cfg.MaxInline, DefaultMaxInline)
	def(&cfg.MaxQPRDAtomic, DefaultMaxQPRDAtomic)
	def(&cfg.MaxSRQ, DefaultMaxSRQ)
	def(&cfg.MaxXRCD, DefaultMaxXRCD)
	def(&cfg.MaxFlow, DefaultMaxFlow)
	def(&cfg.MaxSRQWR, DefaultMaxSRQWR)
	def(&cfg.MaxSRQSGE, cfg.MaxSGE)
	def(&cfg.MaxMcastGrp, DefaultMaxMcastGrp)
	def(&cfg.MaxMcastQPAttach, DefaultMaxMcastQP)
	def(&cfg.RxQueueLen, DefaultRxQueueLen)
	def(&cfg.MTU, DefaultMTU)
	if cfg.RxWait == 0 {
		cfg.RxWait = DefaultRxWait
	}
	if cfg.CNPInterval == 0 {
		cfg.CNPInterval = DefaultCNPInterval
	}
	if cfg.DCQCN != nil {
		c := *cfg.DCQCN
		c.defaults()
		cfg.DCQCN = &c
	}
	if cfg.MaxMR >= 1<<23 || cfg.MaxMW >= 1<<23 {
		// Bit 31 of a key tells a window's from a region's (mw.go).
		return nil, fmt.Errorf("rdma: new device %q: MaxMR %d or MaxMW %d exceeds the 23-bit key index: %w",
			cfg.Name, cfg.MaxMR, cfg.MaxMW, ErrInvalid)
	}
	if cfg.MaxQPRDAtomic > 255 {
		cfg.MaxQPRDAtomic = 255
	}
	if cfg.VendorID == 0 {
		cfg.VendorID = DefaultVendorID
	}
	if cfg.VendorPartID == 0 {
		cfg.VendorPartID = DefaultVendorPartID
	}
	if cfg.FWVersion == "" {
		cfg.FWVersion = "1.0.0"
	}
	mtu, ok := MTUFromBytes(cfg.MTU)
	if !ok && cfg.MTU >= int(MTU256) && cfg.MTU <= int(MTU4096) {
		mtu, ok = MTU(cfg.MTU), true
	}
	if !ok {
		return nil, fmt.Errorf("rdma: new device %q: MTU %d is not 256, 512, 1024, 2048, 4096 or an IB MTU code 1-5: %w", cfg.Name, cfg.MTU, ErrInvalid)
	}
	d := &Device{
		cfg:       cfg,
		port:      port,
		mem:       cfg.Memory,
		clock:     cfg.Clock,
		activeMTU: mtu,
		nextQPN:   firstQPN,
		qpnUsed:   make(map[uint32]bool),
		mrKeyGn:   make([]uint8, 1, 64), // slot 0 unused
		async:     make(chan AsyncEvent, asyncQueueLen),
	}
	d.flushPort, _ = port.(FlushPort)
	d.backlog, _ = port.(BackloggedPort)
	d.pmaSrc = ibagent.NewCAPMA(d.pmaTotals)
	t, err := newAddrTable(cfg.MAC, cfg.IPv4, cfg.IPv6)
	if err != nil {
		return nil, fmt.Errorf("rdma: new device %q: %w", cfg.Name, err)
	}
	d.addrs.Store(t)
	if d.ib() {
		if len(cfg.IPv4) > 0 || len(cfg.IPv6) > 0 {
			return nil, fmt.Errorf("rdma: new device %q: IP addresses make RoCE GIDs; an InfiniBand port has none: %w", cfg.Name, ErrInvalid)
		}
		if err := d.initIB(); err != nil {
			return nil, err
		}
	}
	d.eng.init(d)
	go d.eng.run()
	return d, nil
}

// linkLocalGID is fe80::/64 with the modified EUI-64 interface ID of mac
// (RFC 4291 appendix A), the default GID Linux gives a RoCE port.
func linkLocalGID(mac [6]byte) [16]byte {
	var g [16]byte
	g[0], g[1] = 0xfe, 0x80
	g[8] = mac[0] ^ 0x02
	g[9], g[10] = mac[1], mac[2]
	g[11], g[12] = 0xff, 0xfe
	g[13], g[14], g[15] = mac[3], mac[4], mac[5]
	return g
}

// Name returns the configured device name.
func (d *Device) Name() string { return d.cfg.Name }

// Close stops the engine: every QP is moved to the error state (its posted
// work completes with WRFlushErr), timers are stopped and the engine
// goroutine is joined. Later verbs calls return ErrClosed; Deliver drops.
// Close is idempotent and always returns nil.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		close(d.eng.quit)
		<-d.eng.done
	})
	return nil
}

// Atomic capabilities (ibv_atomic_cap).
const (
	AtomicCapNone = 0 // IBV_ATOMIC_NONE
	AtomicCapHCA  = 1 // IBV_ATOMIC_HCA: atomic with respect to this device's operations
	AtomicCapGlob = 2 // IBV_ATOMIC_GLOB: also with respect to the host CPUs
)

// QueryDevice returns the device attributes.
func (d *Device) QueryDevice() DeviceAttr {
	c := &d.cfg
	return DeviceAttr{
		FWVer:        c.FWVersion,
		NodeGUID:     c.NodeGUID,
		SysImageGUID: c.NodeGUID,
		MaxMRSize:    1 << 40,
		PageSizeCap:  0xFFFFF000, // 4 KiB and larger powers of two
		VendorID:     c.VendorID,
		VendorPartID: c.VendorPartID,
		HWVer:        c.HWVer,
		MaxQP:        c.MaxQP,
		MaxQPWR:      c.MaxQPWR,
		DeviceCapFlags: DeviceCurrQPStateMod | DeviceSysImageGUID | DeviceRCRNRNAKGen | DeviceSRQResize |
			DeviceMemWindow | DeviceMemWindowType2A | DeviceMemWindowType2B | DeviceXRC,
		MaxSGE:                c.MaxSGE,
		MaxSGERd:              c.MaxSGE,
		MaxCQ:                 c.MaxCQ,
		MaxCQE:                c.MaxCQE,
		MaxMR:                 c.MaxMR,
		MaxMW:                 c.MaxMW,
		MaxPD:                 c.MaxPD,
		MaxQPRdAtom:           c.MaxQPRDAtomic,
		MaxQPInitRdAtom:       c.MaxQPRDAtomic,
		MaxResRdAtom:          c.MaxQPRDAtomic * c.MaxQP,
		MaxPKeys:              1,
		AtomicCap:             AtomicCapHCA,
		LocalCAAckDelay:       15,
		PhysPortCnt:           1,
		MaxInlineData:         c.MaxInline,
		MaxMsgSize:            MaxMsgSize,
		MaxSRQ:                c.MaxSRQ,
		MaxSRQWR:              c.MaxSRQWR,
		MaxSRQSGE:             c.MaxSRQSGE,
		MaxMcastGrp:           c.MaxMcastGrp,
		MaxMcastQPAttach:      c.MaxMcastQPAttach,
		MaxTotalMcastQPAttach: c.MaxMcastGrp * c.MaxMcastQPAttach,
		MaxAH:                 1 << 20,
		TM: TMCaps{MaxRndvHdrSize: TMMaxRndvHdr, MaxNumTags: TMMaxNumTags, Flags: TMCapRC,
			MaxOps: TMMaxOps, MaxSGE: TMMaxSGE},
	}
}

// ibGIDTableLen is the GID table an InfiniBand port reports. Entry 0 is
// the port GID (subnet prefix and port GUID); the others are empty (the
// zero GID, which ib_core leaves out of its cache, so they read as
// ENODATA through ibv_query_gid_ex), as on a ConnectX port to which no
// subnet manager assigned alias GUIDs. The SMA's GUIDCap stays 1: no
// alias GUID can be set.
const ibGIDTableLen = 8

// QueryPort returns the attributes of port 1, the only port.
func (d *Device) QueryPort() PortAttr {
	if d.ib() {
		pi := d.portInfo()
		return PortAttr{
			State:         PortState(pi.PortState),
			MaxMTU:        MTU4096,
			ActiveMTU:     d.activeMTU,
			GIDTableLen:   ibGIDTableLen,
			PortCapFlags:  pi.CapabilityMask,
			MaxMsgSize:    MaxMsgSize,
			QKeyViolCntr:  uint32(d.ctr.qkeyViolations.Load()),
			PKeyTableLen:  ibPartitionCap,
			LID:           pi.LID,
			SMLID:         pi.MasterSMLID,
			LMC:           pi.LMC,
			MaxVLNum:      uint8(opVLCount(pi.VLCap)),
			SMSL:          pi.MasterSMSL,
			SubnetTimeout: pi.SubnetTimeOut,
			ActiveWidth:   2,  // 4X
			ActiveSpeed:   32, // EDR: 4X EDR reads as 100 Gb/s
			PhysState:     pi.PortPhysicalState,
			LinkLayer:     LinkLayerInfiniBand,
		}
	}
	return PortAttr{
		State:        PortActive,
		MaxMTU:       MTU4096,
		ActiveMTU:    d.activeMTU,
		GIDTableLen:  len(d.gidTable()),
		PortCapFlags: 1 << 16, // IB_PORT_CM_SUP, as rxe
		MaxMsgSize:   MaxMsgSize,
		PKeyTableLen: 1,
		MaxVLNum:     1,
		ActiveWidth:  2,  // 4X
		ActiveSpeed:  32, // EDR: 4X EDR reads as 100 Gb/s
		PhysState:    5,  // LinkUp
		LinkLayer:    LinkLayerEthernet,
	}
}

// QueryGID returns GID table entry index; on an InfiniBand port the
// entries after the port GID are empty (zero).
func (d *Device) QueryGID(index int) ([16]byte, error) {
	gids := d.gidTable()
	if d.ib() && index >= len(gids) && index < ibGIDTableLen {
		return [16]byte{}, nil
	}
	if index < 0 || index >= len(gids) {
		return [16]byte{}, fmt.Errorf("rdma: query GID %d: table has %d entries: %w", index, len(gids), ErrInvalid)
	}
	return gids[index], nil
}

// QueryGIDType returns the type of GID table entry index: RoCEv2 on an
// Ethernet port, IB on an InfiniBand one.
func (d *Device) QueryGIDType(index int) (GIDType, error) {
	if d.ib() {
		if index < 0 || index >= ibGIDTableLen {
			return 0, fmt.Errorf("rdma: query GID type %d: table has %d entries: %w", index, ibGIDTableLen, ErrInvalid)
		}
		return GIDTypeIB, nil
	}
	if n := len(d.gidTable()); index < 0 || index >= n {
		return 0, fmt.Errorf("rdma: query GID type %d: table has %d entries: %w", index, n, ErrInvalid)
	}
	return GIDTypeRoCEv2, nil
}

// QueryPKey returns P_Key table entry index (one entry, 0xFFFF).
func (d *Device) QueryPKey(index int) (uint16, error) {
	if d.ib() {
		if index < 0 || index >= ibPartitionCap {
			return 0, fmt.Errorf("rdma: query P_Key %d: table has %d entries: %w", index, ibPartitionCap, ErrInvalid)
		}
		p := &d.port1
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.pkeys[index], nil
	}
	if index != 0 {
		return 0, fmt.Errorf("rdma: query P_Key %d: table has 1 entry: %w", index, ErrInvalid)
	}
	return pkeyDefault, nil
}

// Counters returns a snapshot of the device counters.
func (d *Device) Counters() Counters { return d.ctr.snapshot() }

// gidIndex returns the index of gid in our table, or -1.
func (d *Device) gidIndex(gid [16]byte) int {
	for i, g := range d.gidTable() {
		if g == gid {
			return i
		}
	}
	return -1
}

// PD is a protection domain. Safe for concurrent use.
type PD struct {
	dev    *Device
	handle uint32
	refs   atomic.Int32 // MRs and QPs that use it
	dead   atomic.Bool
}

// Handle returns a number that identifies the PD on its device.
func (pd *PD) Handle() uint32 { return pd.handle }

// AllocPD allocates a protection domain.
func (d *Device) AllocPD() (*PD, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.nPD >= d.cfg.MaxPD {
		return nil, fmt.Errorf("rdma: alloc PD: %d PDs allocated (MaxPD): %w", d.nPD, ErrNoResources)
	}
	d.nPD++
	d.pdID++
	return &PD{dev: d, handle: d.pdID}, nil
}

// Dealloc frees the PD. It fails with ErrBusy while MRs or QPs use it.
func (pd *PD) Dealloc() error {
	d := pd.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if pd.dead.Load() {
		return fmt.Errorf("rdma: dealloc PD %d: already deallocated: %w", pd.handle, ErrInvalid)
	}
	if n := pd.refs.Load(); n > 0 {
		return fmt.Errorf("rdma: dealloc PD %d: %d MRs/QPs still use it: %w", pd.handle, n, ErrBusy)
	}
	pd.dead.Store(true)
	d.nPD--
	return nil
}
