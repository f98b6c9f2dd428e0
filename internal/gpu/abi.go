package gpu

// This file mirrors kernel/higpu_abi.h, the one source of truth of the
// HiGPU device ABI. TestABILayout compiles a C program against the header
// and compares every offset, size and constant below with it. Field tags
// name the C field; struct names are in abiStructs (abi_test.go).
//
// The structures are read and written as raw little-endian memory (x86-64
// and arm64 hosts).

// ABI constants (see the header for their meaning).
const (
	Magic     = 0x55504748
	ABIMajor  = 1
	ABIMinor  = 1
	VendorID  = 0x1ED5
	DeviceID  = 0x6A10
	BAR2Size  = 0x10000
	HdrOff    = 0
	MaxGPUs   = 8
	NameLen   = 32
	VAStride  = 0x10000000000
	AllocAlgn = 256

	DBCtrl = 0
	DBCmd  = 1
	DBCpl  = 2
	NumDB  = 3

	IRQCtrl    = 0
	IRQCpl     = 1
	NumIRQ     = 2
	MinVectors = 2

	DevReady = 0x1
	DevLive  = 0x2
	DevFatal = 0x4

	DrvOK     = 0x1
	DrvMSIXOn = 0x2
	DrvReset  = 0x4

	FatalNone       = 0
	FatalABI        = 1
	FatalRingConfig = 2
	FatalCmdIndex   = 3
	FatalCplIndex   = 4
	FatalRingDMA    = 5

	CapCopySG    = 0x1
	CapKernels   = 0x2
	CapEventWait = 0x4
	CapPeer      = 0x8

	RingMin   = 8
	RingMax   = 4096
	RingAlign = 64

	CmdFNoIRQ = 0x1

	ArgsSize = 48

	QueryDevice    = 1
	QueryCtx       = 2
	QueryFClearErr = 0x1
)

// VABase is the first device address of GPU id (HIGPU_VA_BASE).
func VABase(id int) uint64 { return VAStride * (uint64(id) + 1) }

// Opcodes (enum higpu_op).
const (
	OpNop = iota + 1
	OpCtxCreate
	OpCtxDestroy
	OpMemAlloc
	OpMemFree
	OpCopyH2D
	OpCopyD2H
	OpCopyD2D
	OpMemset
	OpLaunch
	OpEventRecord
	OpEventWait
	OpQuery
	OpPeerAccess
	OpCopyPeer
	OpMax
)

// Built-in kernels, element types and reduction operators.
const (
	KernelFill   = 1
	KernelReduce = 2

	DTF32  = 1
	DTF16  = 2
	DTBF16 = 3
	DTI32  = 4
	DTI64  = 5

	RedSum = 1
	RedMin = 2
	RedMax = 3
)

// Completion status: 0 or a positive Linux errno.
const (
	StOK           = 0
	StEPERM        = 1
	StENOENT       = 2
	StENOMEM       = 12
	StEACCES       = 13
	StEFAULT       = 14
	StEEXIST       = 17
	StEINVAL       = 22
	StENOSPC       = 28
	StEOPNOTSUPP   = 95
	StEHOSTUNREACH = 113
	StECANCELED    = 125
)

// DevHdr is struct higpu_dev_hdr, at BAR2 offset 0.
type DevHdr struct {
	Magic      uint32        `c:"magic"`
	ABIMajor   uint16        `c:"abi_major"`
	ABIMinor   uint16        `c:"abi_minor"`
	VendorID   uint16        `c:"vendor_id"`
	DeviceID   uint16        `c:"device_id"`
	BARSize    uint32        `c:"bar_size"`
	GPUID      uint8         `c:"gpu_id"`
	HiLinkPort uint8         `c:"hilink_ports"`
	Rsvd0      uint16        `c:"rsvd0"`
	NumVectors uint32        `c:"num_vectors"`
	Caps       uint32        `c:"caps"`
	AllocAlign uint32        `c:"alloc_align"`
	MemSize    uint64        `c:"mem_size"`
	VABase     uint64        `c:"va_base"`
	Name       [NameLen]byte `c:"name"`

	MemBudget   uint64    `c:"mem_budget"`
	MaxContexts uint32    `c:"max_contexts"`
	MaxAllocs   uint32    `c:"max_allocs"`
	MaxInflight uint32    `c:"max_inflight"`
	MaxStreams  uint32    `c:"max_streams"`
	MaxEvents   uint32    `c:"max_events"`
	MaxSGE      uint32    `c:"max_sge"`
	RingMin     uint32    `c:"ring_min"`
	RingMax     uint32    `c:"ring_max"`
	Rsvd1       [2]uint32 `c:"rsvd1"`

	DevStatus    uint32    `c:"dev_status"`
	DriverStatus uint32    `c:"driver_status"`
	FatalCode    uint32    `c:"fatal_code"`
	ResetCount   uint32    `c:"reset_count"`
	DriverABI    uint32    `c:"driver_abi"`
	Rsvd2        [3]uint32 `c:"rsvd2"`

	CmdRingGPA uint64    `c:"cmd_ring_gpa"`
	CplRingGPA uint64    `c:"cpl_ring_gpa"`
	CmdEntries uint32    `c:"cmd_entries"`
	CplEntries uint32    `c:"cpl_entries"`
	Rsvd3      [2]uint32 `c:"rsvd3"`

	CmdProd uint32    `c:"cmd_prod"`
	CmdCons uint32    `c:"cmd_cons"`
	CplProd uint32    `c:"cpl_prod"`
	CplCons uint32    `c:"cpl_cons"`
	Rsvd4   [4]uint32 `c:"rsvd4"`

	Doorbells  uint64 `c:"doorbells"`
	Interrupts uint64 `c:"interrupts"`
	Commands   uint64 `c:"commands"`
	Errors     uint64 `c:"errors"`
	BytesH2D   uint64 `c:"bytes_h2d"`
	BytesD2H   uint64 `c:"bytes_d2h"`
	BytesD2D   uint64 `c:"bytes_d2d"`
	Kernels    uint64 `c:"kernels"`
	BusyNS     uint64 `c:"busy_ns"`
	MemUsed    uint64 `c:"mem_used"`
	Contexts   uint32 `c:"contexts"`
	Allocs     uint32 `c:"allocs"`
	Rsvd5      uint64 `c:"rsvd5"`
}

// SGE is struct higpu_sge.
type SGE struct {
	GPA uint64 `c:"gpa"`
	Len uint64 `c:"len"`
}

// ArgsAlloc is struct higpu_args_alloc.
type ArgsAlloc struct {
	Size  uint64 `c:"size"`
	Align uint64 `c:"align"`
}

// ArgsFree is struct higpu_args_free.
type ArgsFree struct {
	Addr uint64 `c:"addr"`
}

// ArgsCopy is struct higpu_args_copy.
type ArgsCopy struct {
	Dst     uint64 `c:"dst"`
	Src     uint64 `c:"src"`
	Len     uint64 `c:"len"`
	SGCount uint32 `c:"sg_count"`
	Rsvd    uint32 `c:"rsvd"`
}

// ArgsMemset is struct higpu_args_memset.
type ArgsMemset struct {
	Dst   uint64  `c:"dst"`
	Len   uint64  `c:"len"`
	Value uint8   `c:"value"`
	Rsvd  [7]byte `c:"rsvd"`
}

// ArgsLaunch is struct higpu_args_launch.
type ArgsLaunch struct {
	Kernel uint16 `c:"kernel"`
	DType  uint8  `c:"dtype"`
	Op     uint8  `c:"op"`
	Rsvd   uint32 `c:"rsvd"`
	Count  uint64 `c:"count"`
	Dst    uint64 `c:"dst"`
	Src0   uint64 `c:"src0"`
	Src1   uint64 `c:"src1"`
	Value  uint64 `c:"value"`
}

// ArgsEvent is struct higpu_args_event.
type ArgsEvent struct {
	EventID uint32 `c:"event_id"`
	Rsvd    uint32 `c:"rsvd"`
	Count   uint64 `c:"count"`
}

// ArgsQuery is struct higpu_args_query.
type ArgsQuery struct {
	What    uint32 `c:"what"`
	Flags   uint32 `c:"flags"`
	RespGPA uint64 `c:"resp_gpa"`
	RespLen uint32 `c:"resp_len"`
	Rsvd    uint32 `c:"rsvd"`
}

// ArgsPeer is struct higpu_args_peer.
type ArgsPeer struct {
	PeerID uint16  `c:"peer_id"`
	Enable uint8   `c:"enable"`
	Rsvd   [5]byte `c:"rsvd"`
}

// Cmd is struct higpu_cmd; Args holds one of the Args* structures.
type Cmd struct {
	Opcode   uint16         `c:"opcode"`
	Flags    uint16         `c:"flags"`
	CtxID    uint16         `c:"ctx_id"`
	StreamID uint16         `c:"stream_id"`
	Tag      uint64         `c:"tag"`
	Args     [ArgsSize]byte `c:"args"`
}

// Cpl is struct higpu_cpl.
type Cpl struct {
	Tag         uint64 `c:"tag"`
	Opcode      uint16 `c:"opcode"`
	CtxID       uint16 `c:"ctx_id"`
	StreamID    uint16 `c:"stream_id"`
	Status      uint16 `c:"status"`
	Result      uint64 `c:"result"`
	TimestampNS uint64 `c:"timestamp_ns"`
}

// DevInfo is struct higpu_dev_info (HIGPU_QUERY_DEVICE).
type DevInfo struct {
	MemSize        uint64    `c:"mem_size"`
	MemUsed        uint64    `c:"mem_used"`
	MemFreeLargest uint64    `c:"mem_free_largest"`
	BusyNS         uint64    `c:"busy_ns"`
	ClockNS        uint64    `c:"clock_ns"`
	Commands       uint64    `c:"commands"`
	Kernels        uint64    `c:"kernels"`
	Contexts       uint32    `c:"contexts"`
	Allocs         uint32    `c:"allocs"`
	Inflight       uint32    `c:"inflight"`
	Rsvd           [3]uint32 `c:"rsvd"`
}

// CtxInfo is struct higpu_ctx_info (HIGPU_QUERY_CTX).
type CtxInfo struct {
	MemUsed   uint64    `c:"mem_used"`
	Allocs    uint32    `c:"allocs"`
	Inflight  uint32    `c:"inflight"`
	Errors    uint64    `c:"errors"`
	ErrTag    uint64    `c:"err_tag"`
	ErrOpcode uint16    `c:"err_opcode"`
	ErrStream uint16    `c:"err_stream"`
	ErrStatus uint16    `c:"err_status"`
	Rsvd      uint16    `c:"rsvd"`
	Rsvd1     [2]uint32 `c:"rsvd1"`
}
