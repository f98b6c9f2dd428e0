//go:build ignore

// The input of zabi.go: `go generate` (mkgodefs) runs cgo -godefs on it.
// TestABIGenerated fails when zabi.go is not what it makes of the
// header now; TestABINames when the header has a HIGPU_ name that is
// neither here nor in abiConsts (abi_test.go).

package gpu

/*
#include "../../kernel/higpu_abi.h"
*/
import "C"

//godefs:name hilink_ports HiLinkPort

type DevHdr C.struct_higpu_dev_hdr
type SGE C.struct_higpu_sge
type ArgsAlloc C.struct_higpu_args_alloc
type ArgsFree C.struct_higpu_args_free
type ArgsCopy C.struct_higpu_args_copy
type ArgsMemset C.struct_higpu_args_memset
type ArgsLaunch C.struct_higpu_args_launch
type ArgsEvent C.struct_higpu_args_event
type ArgsQuery C.struct_higpu_args_query
type ArgsPeer C.struct_higpu_args_peer
type Cmd C.struct_higpu_cmd
type Cpl C.struct_higpu_cpl
type DevInfo C.struct_higpu_dev_info
type CtxInfo C.struct_higpu_ctx_info

const (
	Magic           = C.HIGPU_MAGIC
	ABIMajor        = C.HIGPU_ABI_MAJOR
	ABIMinor        = C.HIGPU_ABI_MINOR
	VendorID        = C.HIGPU_VENDOR_ID
	DeviceID        = C.HIGPU_DEVICE_ID
	BAR2Size        = C.HIGPU_BAR2_SIZE
	HdrOff          = C.HIGPU_HDR_OFF
	MaxGPUs         = C.HIGPU_MAX_GPUS
	NameLen         = C.HIGPU_NAME_LEN
	VAStride        = C.HIGPU_VA_STRIDE
	AllocAlgn       = C.HIGPU_ALLOC_ALIGN
	DBCtrl          = C.HIGPU_DB_CTRL
	DBCmd           = C.HIGPU_DB_CMD
	DBCpl           = C.HIGPU_DB_CPL
	NumDB           = C.HIGPU_NUM_DB
	IRQCtrl         = C.HIGPU_IRQ_CTRL
	IRQCpl          = C.HIGPU_IRQ_CPL
	NumIRQ          = C.HIGPU_NUM_IRQ
	MinVectors      = C.HIGPU_MIN_VECTORS
	DevReady        = C.HIGPU_DEV_READY
	DevLive         = C.HIGPU_DEV_LIVE
	DevFatal        = C.HIGPU_DEV_FATAL
	DrvOK           = C.HIGPU_DRV_OK
	DrvMSIXOn       = C.HIGPU_DRV_MSIX_ON
	DrvReset        = C.HIGPU_DRV_RESET
	FatalNone       = C.HIGPU_FATAL_NONE
	FatalABI        = C.HIGPU_FATAL_ABI
	FatalRingConfig = C.HIGPU_FATAL_RING_CONFIG
	FatalCmdIndex   = C.HIGPU_FATAL_CMD_INDEX
	FatalCplIndex   = C.HIGPU_FATAL_CPL_INDEX
	FatalRingDMA    = C.HIGPU_FATAL_RING_DMA
	CapCopySG       = C.HIGPU_CAP_COPY_SG
	CapKernels      = C.HIGPU_CAP_KERNELS
	CapEventWait    = C.HIGPU_CAP_EVENT_WAIT
	CapPeer         = C.HIGPU_CAP_PEER
	RingMin         = C.HIGPU_RING_MIN
	RingMax         = C.HIGPU_RING_MAX
	RingAlign       = C.HIGPU_RING_ALIGN
	CmdFNoIRQ       = C.HIGPU_CMD_F_NO_IRQ
	KernelFill      = C.HIGPU_KERNEL_FILL
	KernelReduce    = C.HIGPU_KERNEL_REDUCE
	DTF32           = C.HIGPU_DT_F32
	DTF16           = C.HIGPU_DT_F16
	DTBF16          = C.HIGPU_DT_BF16
	DTI32           = C.HIGPU_DT_I32
	DTI64           = C.HIGPU_DT_I64
	RedSum          = C.HIGPU_RED_SUM
	RedMin          = C.HIGPU_RED_MIN
	RedMax          = C.HIGPU_RED_MAX
	QueryDevice     = C.HIGPU_QUERY_DEVICE
	QueryCtx        = C.HIGPU_QUERY_CTX
	QueryFClearErr  = C.HIGPU_QUERY_F_CLEAR_ERR
	ArgsSize        = C.HIGPU_ARGS_SIZE
	StOK            = C.HIGPU_ST_OK
	StEPERM         = C.HIGPU_ST_EPERM
	StENOENT        = C.HIGPU_ST_ENOENT
	StENOMEM        = C.HIGPU_ST_ENOMEM
	StEACCES        = C.HIGPU_ST_EACCES
	StEFAULT        = C.HIGPU_ST_EFAULT
	StEEXIST        = C.HIGPU_ST_EEXIST
	StEINVAL        = C.HIGPU_ST_EINVAL
	StENOSPC        = C.HIGPU_ST_ENOSPC
	StEOPNOTSUPP    = C.HIGPU_ST_EOPNOTSUPP
	StEHOSTUNREACH  = C.HIGPU_ST_EHOSTUNREACH
	StECANCELED     = C.HIGPU_ST_ECANCELED
	OpNop           = C.HIGPU_OP_NOP
	OpCtxCreate     = C.HIGPU_OP_CTX_CREATE
	OpCtxDestroy    = C.HIGPU_OP_CTX_DESTROY
	OpMemAlloc      = C.HIGPU_OP_MEM_ALLOC
	OpMemFree       = C.HIGPU_OP_MEM_FREE
	OpCopyH2D       = C.HIGPU_OP_COPY_H2D
	OpCopyD2H       = C.HIGPU_OP_COPY_D2H
	OpCopyD2D       = C.HIGPU_OP_COPY_D2D
	OpMemset        = C.HIGPU_OP_MEMSET
	OpLaunch        = C.HIGPU_OP_LAUNCH
	OpEventRecord   = C.HIGPU_OP_EVENT_RECORD
	OpEventWait     = C.HIGPU_OP_EVENT_WAIT
	OpQuery         = C.HIGPU_OP_QUERY
	OpPeerAccess    = C.HIGPU_OP_PEER_ACCESS
	OpCopyPeer      = C.HIGPU_OP_COPY_PEER
	OpMax           = C.HIGPU_OP_MAX
)
