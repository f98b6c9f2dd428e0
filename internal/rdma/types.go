package rdma

import (
	"strconv"
	"strings"
)

//go:generate go tool stringer -type=QPType,WROpcode,WCOpcode,AsyncEventType -linecomment -output zstring.go

// The enumerations below use the numeric values of libibverbs
// (infiniband/verbs.h, rdma-core v44) so that the device backend can copy
// guest ring entries into them without translation tables.

// Access is a set of memory-region and QP access rights (enum
// ibv_access_flags).
type Access uint32

// Access rights.
const (
	AccessLocalWrite   Access = 1 << 0 // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite  Access = 1 << 1 // IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead   Access = 1 << 2 // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic Access = 1 << 3 // IBV_ACCESS_REMOTE_ATOMIC
	AccessMWBind       Access = 1 << 4 // IBV_ACCESS_MW_BIND
	AccessZeroBased    Access = 1 << 5 // IBV_ACCESS_ZERO_BASED
	AccessOnDemand     Access = 1 << 6 // IBV_ACCESS_ON_DEMAND
	AccessHugeTLB      Access = 1 << 7 // IBV_ACCESS_HUGETLB
	AccessRelaxedOrder Access = 1 << 20
)

// accessKnown are the bits RegMR accepts (others are EINVAL in rxe).
const accessKnown = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead |
	AccessRemoteAtomic | AccessMWBind | AccessRelaxedOrder

// String lists the set bits, e.g. "LocalWrite|RemoteRead".
func (a Access) String() string {
	return flagString(uint64(a), []string{
		0: "LocalWrite", 1: "RemoteWrite", 2: "RemoteRead", 3: "RemoteAtomic",
		4: "MWBind", 5: "ZeroBased", 6: "OnDemand", 7: "HugeTLB", 20: "RelaxedOrdering",
	})
}

// QPState is a queue pair state (enum ibv_qp_state; IBA Vol 1 10.3).
type QPState uint32

// QP states.
const (
	QPStateReset   QPState = iota // IBV_QPS_RESET
	QPStateInit                   // IBV_QPS_INIT
	QPStateRTR                    // IBV_QPS_RTR
	QPStateRTS                    // IBV_QPS_RTS
	QPStateSQD                    // IBV_QPS_SQD
	QPStateSQE                    // IBV_QPS_SQE
	QPStateErr                    // IBV_QPS_ERR
	QPStateUnknown                // IBV_QPS_UNKNOWN
)

func (s QPState) String() string {
	switch s {
	case QPStateReset:
		return "RESET"
	case QPStateInit:
		return "INIT"
	case QPStateRTR:
		return "RTR"
	case QPStateRTS:
		return "RTS"
	case QPStateSQD:
		return "SQD"
	case QPStateSQE:
		return "SQE"
	case QPStateErr:
		return "ERR"
	}
	return "UNKNOWN(" + strconv.Itoa(int(s)) + ")"
}

// QPType is a transport service type (enum ibv_qp_type).
type QPType uint32

// QP types (the kernel's enum ib_qp_type, which libibverbs' shares from RC
// on). CreateQP accepts RC, UC, UD, the XRC initiator and target, and the
// special QPs SMI (QP0, on an InfiniBand port) and GSI (QP1). The line
// comments are the texts String returns (stringer -linecomment), the
// constants' names in the kernel without IB_QPT_ (or IBV_QPT_).
const (
	// QPTypeSMI is QP0, the subnet management interface (InfiniBand
	// only).
	QPTypeSMI QPType = 0 // SMI
	// QPTypeGSI is QP1, the general services interface.
	QPTypeGSI QPType = 1 // GSI
	QPTypeRC  QPType = 2 // RC
	QPTypeUC  QPType = 3 // UC
	QPTypeUD  QPType = 4 // UD
	// QPTypeRawPacket sends and receives whole Ethernet frames
	// (IB_QPT_RAW_PACKET, IBV_QPT_RAW_PACKET; Ethernet ports only):
	// raw.go.
	QPTypeRawPacket QPType = 8 // RAW_PACKET
	// QPTypeXRCIni is the sending side of XRC (IB_QPT_XRC_INI,
	// IBV_QPT_XRC_SEND): a send queue only.
	QPTypeXRCIni QPType = 9 // XRC_INI
	// QPTypeXRCTgt is the receiving side of XRC (IB_QPT_XRC_TGT,
	// IBV_QPT_XRC_RECV): no queues, CQs or PD of its own.
	QPTypeXRCTgt QPType = 10 // XRC_TGT
)

// MTU is an IB path MTU code (enum ibv_mtu): 1 = 256 bytes ... 5 = 4096.
type MTU uint32

// MTU codes.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, or 0 for an invalid code.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

func (m MTU) String() string {
	if b := m.Bytes(); b != 0 {
		return strconv.Itoa(b)
	}
	return "MTU(" + strconv.Itoa(int(m)) + ")"
}

// MTUFromBytes returns the code of an MTU given in bytes (256...4096).
func MTUFromBytes(n int) (MTU, bool) {
	for m := MTU256; m <= MTU4096; m++ {
		if m.Bytes() == n {
			return m, true
		}
	}
	return 0, false
}

// WROpcode is a send work request opcode (enum ibv_wr_opcode).
type WROpcode uint32

// Send work request opcodes. SEND_WITH_INV, LOCAL_INV and BIND_MW are RC
// only (memory windows, mw.go). The line comments are the texts String
// returns (stringer -linecomment): libibverbs' names without IBV_WR_.
const (
	WRRDMAWrite         WROpcode = 0 // RDMA_WRITE
	WRRDMAWriteWithImm  WROpcode = 1 // RDMA_WRITE_WITH_IMM
	WRSend              WROpcode = 2 // SEND
	WRSendWithImm       WROpcode = 3 // SEND_WITH_IMM
	WRRDMARead          WROpcode = 4 // RDMA_READ
	WRAtomicCmpAndSwp   WROpcode = 5 // ATOMIC_CMP_AND_SWP
	WRAtomicFetchAndAdd WROpcode = 6 // ATOMIC_FETCH_AND_ADD
	WRLocalInv          WROpcode = 7 // LOCAL_INV
	WRBindMW            WROpcode = 8 // BIND_MW
	WRSendWithInv       WROpcode = 9 // SEND_WITH_INV
	// WRAtomicWrite is RDMA ATOMIC WRITE (IBA 1.5): 8 bytes of local data
	// (one SGE or inline; with no SGE, CompareAdd in memory byte order)
	// written at once to an 8-byte-aligned remote address. RC only.
	WRAtomicWrite WROpcode = 15 // ATOMIC_WRITE
)

// SendFlags modify a send work request (enum ibv_send_flags).
type SendFlags uint32

// Send flags.
const (
	SendFence     SendFlags = 1 << 0 // IBV_SEND_FENCE
	SendSignaled  SendFlags = 1 << 1 // IBV_SEND_SIGNALED
	SendSolicited SendFlags = 1 << 2 // IBV_SEND_SOLICITED
	SendInline    SendFlags = 1 << 3 // IBV_SEND_INLINE
)

func (f SendFlags) String() string {
	return flagString(uint64(f), []string{"Fence", "Signaled", "Solicited", "Inline"})
}

// WCStatus is a work completion status (enum ibv_wc_status).
type WCStatus uint32

// Work completion statuses.
const (
	WCSuccess          WCStatus = 0  // IBV_WC_SUCCESS
	WCLocLenErr        WCStatus = 1  // IBV_WC_LOC_LEN_ERR
	WCLocQPOpErr       WCStatus = 2  // IBV_WC_LOC_QP_OP_ERR
	WCLocEECOpErr      WCStatus = 3  // IBV_WC_LOC_EEC_OP_ERR
	WCLocProtErr       WCStatus = 4  // IBV_WC_LOC_PROT_ERR
	WCWRFlushErr       WCStatus = 5  // IBV_WC_WR_FLUSH_ERR
	WCMWBindErr        WCStatus = 6  // IBV_WC_MW_BIND_ERR
	WCBadRespErr       WCStatus = 7  // IBV_WC_BAD_RESP_ERR
	WCLocAccessErr     WCStatus = 8  // IBV_WC_LOC_ACCESS_ERR
	WCRemInvReqErr     WCStatus = 9  // IBV_WC_REM_INV_REQ_ERR
	WCRemAccessErr     WCStatus = 10 // IBV_WC_REM_ACCESS_ERR
	WCRemOpErr         WCStatus = 11 // IBV_WC_REM_OP_ERR
	WCRetryExcErr      WCStatus = 12 // IBV_WC_RETRY_EXC_ERR
	WCRNRRetryExcErr   WCStatus = 13 // IBV_WC_RNR_RETRY_EXC_ERR
	WCLocRDDViolErr    WCStatus = 14 // IBV_WC_LOC_RDD_VIOL_ERR
	WCRemInvRDReqErr   WCStatus = 15 // IBV_WC_REM_INV_RD_REQ_ERR
	WCRemAbortErr      WCStatus = 16 // IBV_WC_REM_ABORT_ERR
	WCInvEECNErr       WCStatus = 17 // IBV_WC_INV_EECN_ERR
	WCInvEECStateErr   WCStatus = 18 // IBV_WC_INV_EEC_STATE_ERR
	WCFatalErr         WCStatus = 19 // IBV_WC_FATAL_ERR
	WCRespTimeoutErr   WCStatus = 20 // IBV_WC_RESP_TIMEOUT_ERR
	WCGeneralErr       WCStatus = 21 // IBV_WC_GENERAL_ERR
	WCTMErr            WCStatus = 22 // IBV_WC_TM_ERR
	WCTMRndvIncomplete WCStatus = 23 // IBV_WC_TM_RNDV_INCOMPLETE
)

// wcStatusStrings are ibv_wc_status_str's texts.
var wcStatusStrings = [...]string{
	"success", "local length error", "local QP operation error",
	"local EE context operation error", "local protection error",
	"Work Request Flushed Error", "memory management operation error",
	"bad response error", "local access error", "remote invalid request error",
	"remote access error", "remote operation error", "transport retry counter exceeded",
	"RNR retry counter exceeded", "local RDD violation error",
	"remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error",
	"general error", "TM error", "TM software rendezvous",
}

// String returns the text ibv_wc_status_str gives for s.
func (s WCStatus) String() string {
	if int(s) < len(wcStatusStrings) {
		return wcStatusStrings[s]
	}
	return "unknown"
}

// WCOpcode is the operation of a work completion (enum ibv_wc_opcode).
type WCOpcode uint32

// Work completion opcodes (the tag-matching ones are in tm.go). The line
// comments are the texts String returns (stringer -linecomment):
// libibverbs' names without IBV_WC_.
const (
	WCSend            WCOpcode = 0   // SEND
	WCRDMAWrite       WCOpcode = 1   // RDMA_WRITE
	WCRDMARead        WCOpcode = 2   // RDMA_READ
	WCCompSwap        WCOpcode = 3   // COMP_SWAP
	WCFetchAdd        WCOpcode = 4   // FETCH_ADD
	WCBindMW          WCOpcode = 5   // BIND_MW
	WCLocalInv        WCOpcode = 6   // LOCAL_INV
	WCTSO             WCOpcode = 7   // TSO
	WCAtomicWrite     WCOpcode = 9   // ATOMIC_WRITE
	WCRecv            WCOpcode = 128 // RECV
	WCRecvRDMAWithImm WCOpcode = 129 // RECV_RDMA_WITH_IMM
)

// WCFlags are work completion flags (enum ibv_wc_flags).
type WCFlags uint32

// Work completion flags.
const (
	WCGRH      WCFlags = 1 << 0 // IBV_WC_GRH
	WCWithImm  WCFlags = 1 << 1 // IBV_WC_WITH_IMM
	WCIPCsumOK WCFlags = 1 << 2 // IBV_WC_IP_CSUM_OK
	WCWithInv  WCFlags = 1 << 3 // IBV_WC_WITH_INV
)

func (f WCFlags) String() string {
	return flagString(uint64(f), []string{"GRH", "WithImm", "IPCsumOK", "WithInv"})
}

// QPAttrMask selects the QPAttr fields Modify applies (enum
// ibv_qp_attr_mask).
type QPAttrMask uint32

// QP attribute mask bits.
const (
	QPAttrState            QPAttrMask = 1 << 0  // IBV_QP_STATE
	QPAttrCurState         QPAttrMask = 1 << 1  // IBV_QP_CUR_STATE
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2  // IBV_QP_EN_SQD_ASYNC_NOTIFY
	QPAttrAccessFlags      QPAttrMask = 1 << 3  // IBV_QP_ACCESS_FLAGS
	QPAttrPKeyIndex        QPAttrMask = 1 << 4  // IBV_QP_PKEY_INDEX
	QPAttrPort             QPAttrMask = 1 << 5  // IBV_QP_PORT
	QPAttrQKey             QPAttrMask = 1 << 6  // IBV_QP_QKEY
	QPAttrAV               QPAttrMask = 1 << 7  // IBV_QP_AV
	QPAttrPathMTU          QPAttrMask = 1 << 8  // IBV_QP_PATH_MTU
	QPAttrTimeout          QPAttrMask = 1 << 9  // IBV_QP_TIMEOUT
	QPAttrRetryCnt         QPAttrMask = 1 << 10 // IBV_QP_RETRY_CNT
	QPAttrRNRRetry         QPAttrMask = 1 << 11 // IBV_QP_RNR_RETRY
	QPAttrRQPSN            QPAttrMask = 1 << 12 // IBV_QP_RQ_PSN
	QPAttrMaxQPRDAtomic    QPAttrMask = 1 << 13 // IBV_QP_MAX_QP_RD_ATOMIC
	QPAttrAltPath          QPAttrMask = 1 << 14 // IBV_QP_ALT_PATH
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15 // IBV_QP_MIN_RNR_TIMER
	QPAttrSQPSN            QPAttrMask = 1 << 16 // IBV_QP_SQ_PSN
	QPAttrMaxDestRDAtomic  QPAttrMask = 1 << 17 // IBV_QP_MAX_DEST_RD_ATOMIC
	QPAttrPathMigState     QPAttrMask = 1 << 18 // IBV_QP_PATH_MIG_STATE
	QPAttrCap              QPAttrMask = 1 << 19 // IBV_QP_CAP
	QPAttrDestQPN          QPAttrMask = 1 << 20 // IBV_QP_DEST_QPN
)

var qpAttrMaskNames = [...]string{
	"QPState", "CurState", "EnSQDAsyncNotify", "AccessFlags", "PKeyIndex",
	"Port", "QKey", "AV", "PathMTU", "Timeout", "RetryCnt", "RNRRetry",
	"RQPSN", "MaxQPRDAtomic", "AltPath", "MinRNRTimer", "SQPSN",
	"MaxDestRDAtomic", "PathMigState", "Cap", "DestQPN",
}

// String lists the set bits by attribute name, e.g. "AV|PathMTU".
func (m QPAttrMask) String() string { return flagString(uint64(m), qpAttrMaskNames[:]) }

// PortState is a port state (enum ibv_port_state).
type PortState uint32

// Port states.
const (
	PortNop         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

// LinkLayer is a port's link layer (IBV_LINK_LAYER_*).
type LinkLayer uint8

// Link layers.
const (
	LinkLayerUnspecified LinkLayer = 0
	LinkLayerInfiniBand  LinkLayer = 1
	LinkLayerEthernet    LinkLayer = 2
)

// GIDType is the type of a GID table entry (enum ibv_gid_type).
type GIDType uint32

// GID types.
const (
	GIDTypeIB     GIDType = 0
	GIDTypeRoCEv1 GIDType = 1
	GIDTypeRoCEv2 GIDType = 2
)

// flagString joins the names of the set bits of v; unnamed bits print as
// their hex value.
func flagString(v uint64, names []string) string {
	if v == 0 {
		return "0"
	}
	var b strings.Builder
	for i := 0; i < 64; i++ {
		if v&(1<<i) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		if i < len(names) && names[i] != "" {
			b.WriteString(names[i])
		} else {
			b.WriteString("0x" + strconv.FormatUint(1<<i, 16))
		}
	}
	return b.String()
}
