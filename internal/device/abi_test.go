package device

import (
	"regexp"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/testutil"
)

// abiStructs maps each Go mirror to its C struct in kernel/hicain_abi.h.
var abiStructs = []testutil.CStruct{
	{C: "hicain_dev_hdr", V: DevHdr{}},
	{C: "hicain_ah_attr", V: AHAttr{}},
	{C: "hicain_qp_attr", V: QPAttr{}},
	{C: "hicain_cmd_reg_mr", V: CmdRegMRArgs{}},
	{C: "hicain_cmd_create_cq", V: CmdCreateCQArgs{}},
	{C: "hicain_cmd_create_qp", V: CmdCreateQPArgs{}},
	{C: "hicain_cmd_modify_qp", V: CmdModifyQPArgs{}},
	{C: "hicain_cmd_create_ah", V: CmdCreateAHArgs{}},
	{C: "hicain_cmd_set_addr", V: CmdSetAddrArgs{}},
	{C: "hicain_cmd_create_srq", V: CmdCreateSRQArgs{}},
	{C: "hicain_cmd_modify_srq", V: CmdModifySRQArgs{}},
	{C: "hicain_srq_attr", V: SRQAttr{}},
	{C: "hicain_cmd_mcast", V: CmdMcastArgs{}},
	{C: "hicain_cmd_mad_ifc", V: CmdMADIfcArgs{}},
	{C: "hicain_cmd_port_cap", V: CmdPortCapArgs{}},
	{C: "hicain_cmd_alloc_mw", V: CmdAllocMWArgs{}},
	{C: "hicain_cmd_create_flow", V: CmdCreateFlowArgs{}},
	{C: "hicain_cmd_set_rss", V: CmdSetRSSArgs{}},
	{C: "hicain_admin_cmd", V: AdminCmd{}},
	{C: "hicain_admin_cqe", V: AdminCQE{}},
	{C: "hicain_device_attr", V: DeviceAttr{}},
	{C: "hicain_port_attr", V: PortAttr{}},
	{C: "hicain_port_counters", V: PortCounters{}},
	{C: "hicain_eqe", V: EQE{}},
	{C: "hicain_l2_desc", V: L2Desc{}},
	{C: "hicain_wq_dbrec", V: WQDBRec{}},
	{C: "hicain_cq_dbrec", V: CQDBRec{}},
	{C: "hicain_sge", V: SGE{}},
	{C: "hicain_send_wqe", V: SendWQE{}},
	{C: "hicain_wqe_av", V: WQEAV{}},
	{C: "hicain_recv_wqe", V: RecvWQE{}},
	{C: "hicain_cqe", V: CQE{}},
	{C: "hicain_cqe", V: CQETM{}},
	{C: "hicain_tm_op_wqe", V: TMOpWQE{}},
	{C: "hicain_tm_dbrec", V: TMDBRec{}},
}

// abiConsts are the numeric constants compared with the header's macros
// and enumerators.
var abiConsts = map[string]int64{
	"HICAIN_SL_ROCE_IPV4": rdma.SLRoCEIPv4, "HICAIN_SL_ROCE_IPV6": rdma.SLRoCEIPv6,
	"HICAIN_MAGIC": Magic, "HICAIN_ABI_MAJOR": ABIMajor, "HICAIN_ABI_MINOR": ABIMinor,
	"HICAIN_VENDOR_ID": VendorID, "HICAIN_DEVICE_ID": DeviceID, "HICAIN_BAR2_MIN_SIZE": BAR2Min,
	"HICAIN_ADMIN_SQ_OFF": AdminSQOff, "HICAIN_ADMIN_SQ_ENTRIES": AdminSQEntries,
	"HICAIN_ADMIN_CQ_OFF": AdminCQOff, "HICAIN_ADMIN_CQ_ENTRIES": AdminCQEntries,
	"HICAIN_EQ_OFF": EQOff, "HICAIN_EQ_ENTRIES": EQEntries,
	"HICAIN_L2_TX_OFF": L2TxOff, "HICAIN_L2_TX_ENTRIES": L2TxEntries,
	"HICAIN_L2_RX_OFF": L2RxOff, "HICAIN_L2_RX_ENTRIES": L2RxEntries, "HICAIN_L2_MAX_FRAME": L2MaxFrame,
	"HICAIN_DB_CTRL": DBCtrl, "HICAIN_DB_QP": DBQP, "HICAIN_DB_L2": DBL2, "HICAIN_DB_CQ": DBCQ, "HICAIN_NUM_DB": NumDB,
	"HICAIN_IRQ_CTRL": IRQCtrl, "HICAIN_IRQ_L2": IRQL2, "HICAIN_IRQ_CQ_BASE": IRQCQBase,
	"HICAIN_DEV_READY": DevReady, "HICAIN_DEV_LIVE": DevLive, "HICAIN_DEV_FATAL": DevFatal, "HICAIN_DEV_LINK_UP": DevLinkUp,
	"HICAIN_HEARTBEAT_MS": HeartbeatMS, "HICAIN_HEARTBEAT_DEAD_MS": HeartbeatDeadMS,
	"HICAIN_DRV_OK": DrvOK, "HICAIN_DRV_MSIX_ON": DrvMSIXOn, "HICAIN_DRV_RESET": DrvReset,
	"HICAIN_FATAL_ADMIN_RING": FatalAdminRing, "HICAIN_FATAL_L2_RING": FatalL2Ring, "HICAIN_FATAL_ABI": FatalABI,
	"HICAIN_CAP_RC": CapRC, "HICAIN_CAP_UD": CapUD, "HICAIN_CAP_SRQ": CapSRQ, "HICAIN_CAP_ATOMIC": CapAtomic, "HICAIN_CAP_L2": CapL2, "HICAIN_CAP_XRC": CapXRC, "HICAIN_CAP_CQE_TS": CapCQETS, "HICAIN_CAP_TM": CapTM, "HICAIN_SRQT_TM": SRQTTM,
	"HICAIN_CQ_F_PAGED": CQFPaged, "HICAIN_CQ_PAGE_SIZE": CQPageSize, "HICAIN_CQ_MAX_PAGES": CQMaxPages,
	"HICAIN_LINK_ETHERNET": LinkEthernet, "HICAIN_LINK_INFINIBAND": LinkInfiniBand,
	"HICAIN_CMD_QUERY_DEVICE": CmdQueryDevice, "HICAIN_CMD_REG_MR": CmdRegMR, "HICAIN_CMD_CREATE_QP": CmdCreateQP,
	"HICAIN_CMD_MODIFY_QP": CmdModifyQP, "HICAIN_CMD_CREATE_AH": CmdCreateAH, "HICAIN_CMD_SET_ADDR": CmdSetAddr,
	"HICAIN_CMD_QUERY_COUNTERS": CmdQueryCounters, "HICAIN_CMD_MAX": CmdMax,
	"HICAIN_ST_ENOENT": StENOENT, "HICAIN_ST_EACCES": StEACCES, "HICAIN_ST_EFAULT": StEFAULT, "HICAIN_ST_EINVAL": StEINVAL, "HICAIN_ST_EOPNOTSUPP": StEOPNOTSUPP,
	"HICAIN_EV_QP_FATAL": EvQPFatal, "HICAIN_EV_DEVICE_FATAL": EvDeviceFatal,
	"HICAIN_CMD_CREATE_SRQ": CmdCreateSRQ, "HICAIN_CMD_MODIFY_SRQ": CmdModifySRQ, "HICAIN_CMD_QUERY_SRQ": CmdQuerySRQ,
	"HICAIN_CMD_DESTROY_SRQ": CmdDestroySRQ, "HICAIN_CMD_ATTACH_MCAST": CmdAttachMcast,
	"HICAIN_CMD_DETACH_MCAST": CmdDetachMcast, "HICAIN_CMD_RESIZE_CQ": CmdResizeCQ,
	"HICAIN_SRQ_MAX_WR": SRQMaxWR, "HICAIN_SRQ_LIMIT": SRQLimit, "HICAIN_DEVICE_ATTR_V1_0_SIZE": DeviceAttrV10Size,
	"HICAIN_EV_PORT_ACTIVE": EvPortActive, "HICAIN_EV_PORT_ERR": EvPortErr, "HICAIN_EV_CQ_ERR": EvCQErr,
	"HICAIN_EV_SRQ_LIMIT": EvSRQLimit, "HICAIN_EV_QP_LAST_WQE": EvQPLastWQE, "HICAIN_EV_SRQ_ERR": EvSRQErr,
	"HICAIN_QP_FATAL_SQ_INDEX": QPFatalSQIndex, "HICAIN_QP_FATAL_RQ_INDEX": QPFatalRQIndex,
	"HICAIN_QP_FATAL_WQE": QPFatalWQE, "HICAIN_QP_FATAL_RING": QPFatalRing,
	"HICAIN_QP_FATAL_TRANSPORT": QPFatalTransport, "HICAIN_CQ_ERR_OVERRUN": CQErrOverrun,
	"HICAIN_CQ_ARM_NEXT": CQArmNext, "HICAIN_CQ_ARM_SOLICITED": CQArmSolicited, "HICAIN_SEND_INLINE": SendInline,
	"HICAIN_SEND_AV": SendAV, "HICAIN_CMD_MAD_IFC": CmdMADIfc, "HICAIN_CMD_SET_PORT_CAP": CmdSetPortCap, "HICAIN_CMD_REREG_MR": CmdReregMR,
	"HICAIN_CMD_ALLOC_MW": CmdAllocMW, "HICAIN_CMD_DEALLOC_MW": CmdDeallocMW, "HICAIN_WR_LOCAL_INV": WRLocalInv,
	"HICAIN_WR_BIND_MW": WRBindMW, "HICAIN_WR_SEND_INV": WRSendInv,
	"HICAIN_WR_ATOMIC_WRITE": WRAtomicWrite, "HICAIN_WC_WITH_INV": WCWithInv,
	"HICAIN_CMD_ALLOC_XRCD": CmdAllocXRCD, "HICAIN_CMD_DEALLOC_XRCD": CmdDeallocXRCD, "HICAIN_SRQT_BASIC": SRQTBasic, "HICAIN_SRQT_XRC": SRQTXRC, "HICAIN_EV_LID_CHANGE": EvLIDChange,
	"HICAIN_EV_SM_CHANGE": EvSMChange, "HICAIN_EV_CLIENT_REREGISTER": EvClientReregister,
	"HICAIN_MAD_SIZE": MADSize, "HICAIN_MAD_IFC_REPLY": MADIfcReply,
	"HICAIN_CAP_RAW": CapRaw, "HICAIN_CMD_CREATE_FLOW": CmdCreateFlow, "HICAIN_CMD_DESTROY_FLOW": CmdDestroyFlow,
	"HICAIN_FLOW_ETH": FlowEth, "HICAIN_FLOW_IPV4": FlowIPv4, "HICAIN_FLOW_IPV6": FlowIPv6, "HICAIN_FLOW_TCP": FlowTCP,
	"HICAIN_FLOW_UDP": FlowUDP, "HICAIN_CMD_SET_RSS": CmdSetRSS, "HICAIN_RSS_KEY_LEN": RSSKeyLen,
	"HICAIN_RSS_MAX_TABLE": RSSMaxTable, "HICAIN_CMD_QUERY_CLOCK": CmdQueryClock,
}

// TestABIGenerated fails when zabi.go is not what go generate makes of
// kernel/hicain_abi.h now.
func TestABIGenerated(t *testing.T) {
	testutil.CheckGodefs(t, "types_abi.go", "zabi.go")
}

// TestABINames fails on a HICAIN_ macro or enumerator of the header that
// the mirror does not map.
func TestABINames(t *testing.T) {
	testutil.CheckCNames(t, "hicain_abi.h", regexp.MustCompile(`^HICAIN_`), "types_abi.go", abiConsts)
}

// TestABICasts: the device casts a send WQE's opcode and flags and
// CREATE_QP's qp_type to the engine's types, so their numbers must be
// the header's (the kernel's BUILD_BUG_ONs hold its side).
func TestABICasts(t *testing.T) {
	for _, c := range []struct {
		name      string
		dev, rdma uint32
	}{
		{"HICAIN_WR_RDMA_WRITE", WRRDMAWrite, uint32(rdma.WRRDMAWrite)},
		{"HICAIN_WR_RDMA_WRITE_IMM", WRRDMAWriteImm, uint32(rdma.WRRDMAWriteWithImm)},
		{"HICAIN_WR_SEND", WRSend, uint32(rdma.WRSend)},
		{"HICAIN_WR_SEND_IMM", WRSendImm, uint32(rdma.WRSendWithImm)},
		{"HICAIN_WR_RDMA_READ", WRRDMARead, uint32(rdma.WRRDMARead)},
		{"HICAIN_WR_ATOMIC_CMP_SWP", WRAtomicCmpSwp, uint32(rdma.WRAtomicCmpAndSwp)},
		{"HICAIN_WR_ATOMIC_FETCH_ADD", WRAtomicFetchAdd, uint32(rdma.WRAtomicFetchAndAdd)},
		{"HICAIN_WR_LOCAL_INV", WRLocalInv, uint32(rdma.WRLocalInv)},
		{"HICAIN_WR_BIND_MW", WRBindMW, uint32(rdma.WRBindMW)},
		{"HICAIN_WR_SEND_INV", WRSendInv, uint32(rdma.WRSendWithInv)},
		{"HICAIN_WR_ATOMIC_WRITE", WRAtomicWrite, uint32(rdma.WRAtomicWrite)},
		{"HICAIN_SEND_FENCE", SendFence, uint32(rdma.SendFence)},
		{"HICAIN_SEND_SIGNALED", SendSignaled, uint32(rdma.SendSignaled)},
		{"HICAIN_SEND_SOLICITED", SendSolicited, uint32(rdma.SendSolicited)},
		{"HICAIN_SEND_INLINE", SendInline, uint32(rdma.SendInline)},
		{"HICAIN_QPT_SMI", QPTSMI, uint32(rdma.QPTypeSMI)},
		{"HICAIN_QPT_GSI", QPTGSI, uint32(rdma.QPTypeGSI)},
		{"HICAIN_QPT_RC", QPTRC, uint32(rdma.QPTypeRC)},
		{"HICAIN_QPT_RAW_PACKET", QPTRawPacket, uint32(rdma.QPTypeRawPacket)},
		{"HICAIN_QPT_UC", QPTUC, uint32(rdma.QPTypeUC)},
		{"HICAIN_QPT_UD", QPTUD, uint32(rdma.QPTypeUD)},
		{"HICAIN_QPT_XRC_INI", QPTXRCIni, uint32(rdma.QPTypeXRCIni)},
		{"HICAIN_QPT_XRC_TGT", QPTXRCTgt, uint32(rdma.QPTypeXRCTgt)},
	} {
		if c.dev != c.rdma {
			t.Errorf("%s is %d, the engine's value %d", c.name, c.dev, c.rdma)
		}
	}
}

// TestABILayout fails when kernel/hicain_abi.h and the Go mirror drift
// (testutil.CheckCABI compiles the header and compares every offset, size
// and constant).
func TestABILayout(t *testing.T) {
	testutil.CheckCABI(t, "hicain_abi.h", abiStructs, abiConsts)
}
