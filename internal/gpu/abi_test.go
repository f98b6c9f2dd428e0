package gpu

import (
	"regexp"
	"testing"

	"github.com/PacketFive/hinic/internal/testutil"
)

// abiStructs maps each Go mirror to its C struct in kernel/higpu_abi.h.
var abiStructs = []testutil.CStruct{
	{C: "higpu_dev_hdr", V: DevHdr{}},
	{C: "higpu_sge", V: SGE{}},
	{C: "higpu_args_alloc", V: ArgsAlloc{}},
	{C: "higpu_args_free", V: ArgsFree{}},
	{C: "higpu_args_copy", V: ArgsCopy{}},
	{C: "higpu_args_memset", V: ArgsMemset{}},
	{C: "higpu_args_launch", V: ArgsLaunch{}},
	{C: "higpu_args_event", V: ArgsEvent{}},
	{C: "higpu_args_query", V: ArgsQuery{}},
	{C: "higpu_args_peer", V: ArgsPeer{}},
	{C: "higpu_cmd", V: Cmd{}},
	{C: "higpu_cpl", V: Cpl{}},
	{C: "higpu_dev_info", V: DevInfo{}},
	{C: "higpu_ctx_info", V: CtxInfo{}},
}

// abiConsts are the numeric constants compared with the header's macros
// and enumerators.
var abiConsts = map[string]int64{
	"HIGPU_MAGIC": Magic, "HIGPU_ABI_MAJOR": ABIMajor, "HIGPU_ABI_MINOR": ABIMinor,
	"HIGPU_VENDOR_ID": VendorID, "HIGPU_DEVICE_ID": DeviceID, "HIGPU_BAR2_SIZE": BAR2Size,
	"HIGPU_HDR_OFF": HdrOff, "HIGPU_MAX_GPUS": MaxGPUs, "HIGPU_NAME_LEN": NameLen,
	"HIGPU_VA_STRIDE": VAStride, "HIGPU_VA_BASE(0)": int64(VABase(0)), "HIGPU_VA_BASE(7)": int64(VABase(7)),
	"HIGPU_ALLOC_ALIGN": AllocAlgn,
	"HIGPU_DB_CTRL":     DBCtrl, "HIGPU_DB_CMD": DBCmd, "HIGPU_DB_CPL": DBCpl, "HIGPU_NUM_DB": NumDB,
	"HIGPU_IRQ_CTRL": IRQCtrl, "HIGPU_IRQ_CPL": IRQCpl, "HIGPU_NUM_IRQ": NumIRQ, "HIGPU_MIN_VECTORS": MinVectors,
	"HIGPU_DEV_READY": DevReady, "HIGPU_DEV_LIVE": DevLive, "HIGPU_DEV_FATAL": DevFatal,
	"HIGPU_DRV_OK": DrvOK, "HIGPU_DRV_MSIX_ON": DrvMSIXOn, "HIGPU_DRV_RESET": DrvReset,
	"HIGPU_FATAL_NONE": FatalNone, "HIGPU_FATAL_ABI": FatalABI, "HIGPU_FATAL_RING_CONFIG": FatalRingConfig,
	"HIGPU_FATAL_CMD_INDEX": FatalCmdIndex, "HIGPU_FATAL_CPL_INDEX": FatalCplIndex, "HIGPU_FATAL_RING_DMA": FatalRingDMA,
	"HIGPU_CAP_COPY_SG": CapCopySG, "HIGPU_CAP_KERNELS": CapKernels, "HIGPU_CAP_EVENT_WAIT": CapEventWait, "HIGPU_CAP_PEER": CapPeer,
	"HIGPU_RING_MIN": RingMin, "HIGPU_RING_MAX": RingMax, "HIGPU_RING_ALIGN": RingAlign,
	"HIGPU_OP_NOP": OpNop, "HIGPU_OP_CTX_CREATE": OpCtxCreate, "HIGPU_OP_CTX_DESTROY": OpCtxDestroy,
	"HIGPU_OP_MEM_ALLOC": OpMemAlloc, "HIGPU_OP_MEM_FREE": OpMemFree, "HIGPU_OP_COPY_H2D": OpCopyH2D,
	"HIGPU_OP_COPY_D2H": OpCopyD2H, "HIGPU_OP_COPY_D2D": OpCopyD2D, "HIGPU_OP_MEMSET": OpMemset,
	"HIGPU_OP_LAUNCH": OpLaunch, "HIGPU_OP_EVENT_RECORD": OpEventRecord, "HIGPU_OP_EVENT_WAIT": OpEventWait,
	"HIGPU_OP_QUERY": OpQuery, "HIGPU_OP_PEER_ACCESS": OpPeerAccess, "HIGPU_OP_COPY_PEER": OpCopyPeer, "HIGPU_OP_MAX": OpMax,
	"HIGPU_CMD_F_NO_IRQ": CmdFNoIRQ, "HIGPU_ARGS_SIZE": ArgsSize,
	"HIGPU_KERNEL_FILL": KernelFill, "HIGPU_KERNEL_REDUCE": KernelReduce,
	"HIGPU_DT_F32": DTF32, "HIGPU_DT_F16": DTF16, "HIGPU_DT_BF16": DTBF16, "HIGPU_DT_I32": DTI32, "HIGPU_DT_I64": DTI64,
	"HIGPU_RED_SUM": RedSum, "HIGPU_RED_MIN": RedMin, "HIGPU_RED_MAX": RedMax,
	"HIGPU_QUERY_DEVICE": QueryDevice, "HIGPU_QUERY_CTX": QueryCtx, "HIGPU_QUERY_F_CLEAR_ERR": QueryFClearErr,
	"HIGPU_ST_OK": StOK, "HIGPU_ST_ENOENT": StENOENT, "HIGPU_ST_ENOMEM": StENOMEM, "HIGPU_ST_EACCES": StEACCES,
	"HIGPU_ST_EFAULT": StEFAULT, "HIGPU_ST_EINVAL": StEINVAL, "HIGPU_ST_ENOSPC": StENOSPC,
	"HIGPU_ST_EOPNOTSUPP": StEOPNOTSUPP, "HIGPU_ST_ECANCELED": StECANCELED,
	"HIGPU_ST_EPERM": StEPERM, "HIGPU_ST_EEXIST": StEEXIST, "HIGPU_ST_EHOSTUNREACH": StEHOSTUNREACH,
}

// TestABIGenerated fails when zabi.go is not what go generate makes of
// kernel/higpu_abi.h now.
func TestABIGenerated(t *testing.T) {
	testutil.CheckGodefs(t, "types_abi.go", "zabi.go")
}

// TestABINames fails on a HIGPU_ macro or enumerator of the header that
// the mirror does not map.
func TestABINames(t *testing.T) {
	testutil.CheckCNames(t, "higpu_abi.h", regexp.MustCompile(`^HIGPU_`), "types_abi.go", abiConsts)
}

// TestABILayout fails when kernel/higpu_abi.h and this package's mirror
// drift (testutil.CheckCABI compiles the header and compares every
// offset, size and constant).
func TestABILayout(t *testing.T) {
	testutil.CheckCABI(t, "higpu_abi.h", abiStructs, abiConsts)
}
