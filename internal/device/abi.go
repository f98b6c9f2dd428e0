package device

// This file mirrors kernel/hicain_abi.h, the one source of truth of the
// device ABI. TestABILayout compiles a C program against the header and
// compares every offset and size below with it. Field tags name the C
// field; struct names are in abiStructs (abi_test.go).
//
// The structures are read and written as raw little-endian memory (x86-64
// and arm64 hosts), through asBytes.

import "unsafe"

// ABI constants (see the header for their meaning).
const (
	Magic          = 0x4e494348
	ABIMajor       = 1
	ABIMinor       = 15
	VendorID       = 0x1ED5
	DeviceID       = 0xCA10
	BAR2Min        = 0x100000
	HdrOff         = 0x0000
	AdminSQOff     = 0x1000
	AdminSQEntries = 32
	AdminCQOff     = 0x3000
	AdminCQEntries = 32
	EQOff          = 0x4000
	EQEntries      = 256
	L2TxOff        = 0x5000
	L2TxEntries    = 256
	L2RxOff        = 0x6000
	L2RxEntries    = 256
	L2MaxFrame     = 9216

	DBCtrl = 0
	DBQP   = 1
	DBL2   = 2
	DBCQ   = 3
	NumDB  = 4

	IRQCtrl   = 0
	IRQL2     = 1
	IRQCQBase = 2

	DevReady  = 0x1
	DevLive   = 0x2
	DevFatal  = 0x4
	DevLinkUp = 0x8

	// HeartbeatMS is how often the device bumps DevHdr.Heartbeat;
	// HeartbeatDeadMS how long a driver waits for a change before it
	// takes the backend for dead (ABI 1.14).
	HeartbeatMS     = 100
	HeartbeatDeadMS = 3000

	DrvOK     = 0x1
	DrvMSIXOn = 0x2
	DrvReset  = 0x4

	FatalNone      = 0
	FatalAdminRing = 1
	FatalL2Ring    = 2
	FatalABI       = 3

	CapRC     = 0x1
	CapUD     = 0x2
	CapSRQ    = 0x4
	CapAtomic = 0x8
	CapL2     = 0x10
	CapXRC    = 0x20  // ABI 1.11
	CapCQETS  = 0x40  // ABI 1.12: CQE.Timestamp
	CapTM     = 0x80  // ABI 1.13: tag-matching SRQs
	CapRaw    = 0x100 // ABI 1.15: raw packet QPs and flow steering

	LinkEthernet   = 2
	LinkInfiniBand = 1

	L2FlagErr = 0x1

	CQArmNext      = 1
	CQArmSolicited = 2

	// CQFPaged (ABI 1.9): a CQ's ring_gpa is a page table of
	// depth x 64 / CQPageSize page GPAs, at most CQMaxPages.
	CQFPaged   = 0x1
	CQPageSize = 4096
	CQMaxPages = 16384

	// Send WQE opcodes of ABI 1.10 (IBV_WR_*, RC only); a BIND_MW
	// WQE's fields are described in the header.
	WRLocalInv = 7
	WRBindMW   = 8
	WRSendInv  = 9
	// WRAtomicWrite (ABI 1.10) is RDMA ATOMIC WRITE; with no SGE and no
	// inline data its value is the WQE's compare_add.
	WRAtomicWrite = 15
	// WCWithInv is IBV_WC_WITH_INV: a receive's CQE of a SEND_WITH_INV.
	WCWithInv = 0x8

	SendInline = 0x8
	// SendAV (ABI 1.3): a WQEAV follows the send WQE header of a UD,
	// GSI or SMI QP, then the SGEs or inline data; the ah field is
	// ignored.
	SendAV = 0x8000

	// MODIFY_SRQ attr_mask bits (enum ib_srq_attr_mask).
	SRQMaxWR = 0x1
	SRQLimit = 0x2

	// MADSize is the size of a MAD_IFC MAD; MADIfcReply is the flag in
	// out[0] of its completion that says an answer was written.
	MADSize     = 256
	MADIfcReply = 0x1

	// DeviceAttrV10Size is the size of hicain_device_attr in ABI 1.0,
	// the least resp_len QUERY_DEVICE accepts.
	DeviceAttrV10Size = 120
)

// Admin opcodes (enum hicain_admin_op).
const (
	CmdQueryDevice = 1 + iota
	CmdQueryPort
	CmdQueryGID
	CmdQueryPKey
	CmdAllocPD
	CmdDeallocPD
	CmdRegMR
	CmdDeregMR
	CmdCreateCQ
	CmdDestroyCQ
	CmdResizeCQ
	CmdCreateQP
	CmdModifyQP
	CmdQueryQP
	CmdDestroyQP
	CmdCreateSRQ
	CmdModifySRQ
	CmdQuerySRQ
	CmdDestroySRQ
	CmdCreateAH
	CmdDestroyAH
	CmdAttachMcast
	CmdDetachMcast
	CmdSetAddr
	CmdQueryCounters
	CmdMADIfc
	CmdSetPortCap
	CmdReregMR     // ABI 1.8
	CmdAllocMW     // ABI 1.10
	CmdDeallocMW   // ABI 1.10
	CmdAllocXRCD   // ABI 1.11
	CmdDeallocXRCD // ABI 1.11
	CmdCreateFlow  // ABI 1.15
	CmdDestroyFlow // ABI 1.15
	CmdSetRSS      // ABI 1.15
	CmdMax
)

// Admin completion status: 0 or a Linux errno.
const (
	StOK         = 0
	StENOENT     = 2
	StENOMEM     = 12
	StEACCES     = 13
	StEFAULT     = 14
	StEBUSY      = 16
	StENODEV     = 19
	StEINVAL     = 22
	StEOPNOTSUPP = 95
)

// Event types (enum hicain_event_type).
const (
	EvPortActive = 1 + iota
	EvPortErr
	EvQPFatal
	EvCQErr
	EvSRQLimit
	EvDeviceFatal
	EvQPLastWQE
	EvSRQErr
	EvLIDChange
	EvSMChange
	EvClientReregister
)

// Event data (hicain_eqe.data): the reasons of EvQPFatal and EvSRQErr,
// and of EvCQErr.
const (
	QPFatalSQIndex   = 1 // SQ producer index out of range
	QPFatalRQIndex   = 2 // RQ or SRQ producer index out of range
	QPFatalWQE       = 3 // malformed WQE (SGE count, inline length)
	QPFatalRing      = 4 // ring or dbrec not readable
	QPFatalTransport = 5 // the transport moved the QP to ERR

	CQErrOverrun = 1 // a completion was lost
)

// DevHdr is struct hicain_dev_hdr, at BAR2 offset 0.
type DevHdr struct {
	Magic        uint32    `c:"magic"`
	ABIMajor     uint16    `c:"abi_major"`
	ABIMinor     uint16    `c:"abi_minor"`
	VendorID     uint16    `c:"vendor_id"`
	DeviceID     uint16    `c:"device_id"`
	BARSize      uint32    `c:"bar_size"`
	MAC          [6]byte   `c:"mac"`
	LinkLayer    uint8     `c:"link_layer"`
	PhysPortCnt  uint8     `c:"phys_port_cnt"`
	NodeGUID     uint64    `c:"node_guid"`
	PortGUID     uint64    `c:"port_guid"`
	Caps         uint32    `c:"caps"`
	MaxMTU       uint32    `c:"max_mtu"`
	NumVectors   uint32    `c:"num_vectors"`
	_            [3]uint32 `c:"rsvd0"`
	MaxQP        uint32    `c:"max_qp"`
	MaxCQ        uint32    `c:"max_cq"`
	MaxMR        uint32    `c:"max_mr"`
	MaxPD        uint32    `c:"max_pd"`
	MaxAH        uint32    `c:"max_ah"`
	MaxQPWR      uint32    `c:"max_qp_wr"`
	MaxCQE       uint32    `c:"max_cqe"`
	MaxSGE       uint32    `c:"max_sge"`
	MaxInline    uint32    `c:"max_inline"`
	MaxQPRdAtom  uint32    `c:"max_qp_rd_atom"`
	_            [6]uint32 `c:"rsvd1"`
	DevStatus    uint32    `c:"dev_status"`
	DriverStatus uint32    `c:"driver_status"`
	FatalCode    uint32    `c:"fatal_code"`
	ResetCount   uint32    `c:"reset_count"`
	DriverABI    uint32    `c:"driver_abi"`
	Heartbeat    uint32    `c:"heartbeat"`
	_            [2]uint32 `c:"rsvd2"`
	AdminSQProd  uint32    `c:"admin_sq_prod"`
	AdminSQCons  uint32    `c:"admin_sq_cons"`
	AdminCQProd  uint32    `c:"admin_cq_prod"`
	AdminCQCons  uint32    `c:"admin_cq_cons"`
	EQProd       uint32    `c:"eq_prod"`
	EQCons       uint32    `c:"eq_cons"`
	L2TxProd     uint32    `c:"l2_tx_prod"`
	L2TxCons     uint32    `c:"l2_tx_cons"`
	L2RxProd     uint32    `c:"l2_rx_prod"`
	L2RxCons     uint32    `c:"l2_rx_cons"`
	_            [6]uint32 `c:"rsvd3"`
	Doorbells    uint64    `c:"doorbells"`
	Interrupts   uint64    `c:"interrupts"`
	AdminCmds    uint64    `c:"admin_cmds"`
	_            uint64    `c:"rsvd4"`
}

// AHAttr is struct hicain_ah_attr.
type AHAttr struct {
	DGID         [16]byte `c:"dgid"`
	FlowLabel    uint32   `c:"flow_label"`
	SGIDIndex    uint8    `c:"sgid_index"`
	HopLimit     uint8    `c:"hop_limit"`
	TrafficClass uint8    `c:"traffic_class"`
	SL           uint8    `c:"sl"`
	DMAC         [6]byte  `c:"dmac"`
	DLID         uint16   `c:"dlid"`
	IsGlobal     uint8    `c:"is_global"`
	PortNum      uint8    `c:"port_num"`
	StaticRate   uint8    `c:"static_rate"`
	SrcPathBits  uint8    `c:"src_path_bits"`
	_            uint32   `c:"rsvd"`
}

// QPAttr is struct hicain_qp_attr.
type QPAttr struct {
	QPState         uint32  `c:"qp_state"`
	CurQPState      uint32  `c:"cur_qp_state"`
	PathMTU         uint32  `c:"path_mtu"`
	QKey            uint32  `c:"qkey"`
	RQPSN           uint32  `c:"rq_psn"`
	SQPSN           uint32  `c:"sq_psn"`
	DestQPNum       uint32  `c:"dest_qp_num"`
	QPAccessFlags   uint32  `c:"qp_access_flags"`
	PKeyIndex       uint16  `c:"pkey_index"`
	PortNum         uint8   `c:"port_num"`
	Timeout         uint8   `c:"timeout"`
	RetryCnt        uint8   `c:"retry_cnt"`
	RNRRetry        uint8   `c:"rnr_retry"`
	MinRNRTimer     uint8   `c:"min_rnr_timer"`
	MaxRDAtomic     uint8   `c:"max_rd_atomic"`
	MaxDestRDAtomic uint8   `c:"max_dest_rd_atomic"`
	SQDraining      uint8   `c:"sq_draining"`
	_               [6]byte `c:"rsvd"`
	AH              AHAttr  `c:"ah_attr"`
}

// CmdRegMR is struct hicain_cmd_reg_mr.
type CmdRegMRArgs struct {
	PD          uint32 `c:"pd"`
	Access      uint32 `c:"access"`
	IOVA        uint64 `c:"iova"`
	Length      uint64 `c:"length"`
	PageListGPA uint64 `c:"page_list_gpa"`
	NPages      uint32 `c:"npages"`
	PageShift   uint32 `c:"page_shift"`
}

// CmdCreateCQArgs is struct hicain_cmd_create_cq.
type CmdCreateCQArgs struct {
	RingGPA    uint64 `c:"ring_gpa"`
	DBRecGPA   uint64 `c:"dbrec_gpa"`
	Depth      uint32 `c:"depth"`
	CompVector uint32 `c:"comp_vector"`
	Flags      uint32 `c:"flags"`
	Rsvd       uint32 `c:"rsvd"`
}

// CmdCreateQPArgs is struct hicain_cmd_create_qp.
type CmdCreateQPArgs struct {
	PD         uint32 `c:"pd"`
	QPType     uint32 `c:"qp_type"`
	SendCQ     uint32 `c:"send_cq"`
	RecvCQ     uint32 `c:"recv_cq"`
	SRQ        uint32 `c:"srq"`
	SQDepth    uint32 `c:"sq_depth"`
	RQDepth    uint32 `c:"rq_depth"`
	MaxSendSGE uint32 `c:"max_send_sge"`
	MaxRecvSGE uint32 `c:"max_recv_sge"`
	MaxInline  uint32 `c:"max_inline"`
	SQStride   uint32 `c:"sq_stride"`
	RQStride   uint32 `c:"rq_stride"`
	SQSigAll   uint32 `c:"sq_sig_all"`
	XRCD       uint32 `c:"xrcd"` // ABI 1.11: an XRC target's domain
	SQGPA      uint64 `c:"sq_gpa"`
	RQGPA      uint64 `c:"rq_gpa"`
	SQDBRecGPA uint64 `c:"sq_dbrec_gpa"`
	RQDBRecGPA uint64 `c:"rq_dbrec_gpa"`
}

// CmdModifyQPArgs is struct hicain_cmd_modify_qp.
type CmdModifyQPArgs struct {
	QPN      uint32 `c:"qpn"`
	AttrMask uint32 `c:"attr_mask"`
	Attr     QPAttr `c:"attr"`
}

// CmdCreateAHArgs is struct hicain_cmd_create_ah.
type CmdCreateAHArgs struct {
	PD   uint32 `c:"pd"`
	_    uint32 `c:"rsvd"`
	Attr AHAttr `c:"attr"`
}

// CmdCreateSRQArgs is struct hicain_cmd_create_srq.
type CmdCreateSRQArgs struct {
	PD       uint32 `c:"pd"`
	Depth    uint32 `c:"depth"`
	MaxSGE   uint32 `c:"max_sge"`
	Limit    uint32 `c:"limit"`
	Stride   uint32 `c:"stride"`
	SRQType  uint32 `c:"srq_type"` // ABI 1.11: SRQTBasic or SRQTXRC
	RingGPA  uint64 `c:"ring_gpa"`
	DBRecGPA uint64 `c:"dbrec_gpa"`
	XRCD     uint32 `c:"xrcd"` // ABI 1.11, SRQTXRC
	CQ       uint32 `c:"cq"`   // ABI 1.11, SRQTXRC and SRQTTM
	// ABI 1.13, SRQTTM.
	MaxNumTags  uint32  `c:"max_num_tags"`
	MaxOps      uint32  `c:"max_ops"`
	OpsRingGPA  uint64  `c:"ops_ring_gpa"`
	OpsDBRecGPA uint64  `c:"ops_dbrec_gpa"`
	OpsDepth    uint32  `c:"ops_depth"`
	_           [4]byte `c:"rsvd2"`
}

// SRQ types (hicain_cmd_create_srq.srq_type, enum ib_srq_type).
const (
	SRQTBasic = 0
	SRQTXRC   = 1
	SRQTTM    = 2 // ABI 1.13
)

// CmdModifySRQArgs is struct hicain_cmd_modify_srq.
type CmdModifySRQArgs struct {
	SRQN     uint32 `c:"srqn"`
	AttrMask uint32 `c:"attr_mask"`
	MaxWR    uint32 `c:"max_wr"`
	Limit    uint32 `c:"limit"`
	RingGPA  uint64 `c:"ring_gpa"`
	DBRecGPA uint64 `c:"dbrec_gpa"`
}

// SRQAttr is struct hicain_srq_attr (QUERY_SRQ's AdminCQE.Out).
type SRQAttr struct {
	MaxWR    uint32 `c:"max_wr"`
	MaxSGE   uint32 `c:"max_sge"`
	SRQLimit uint32 `c:"srq_limit"`
	_        uint32 `c:"rsvd"`
}

// CmdMcastArgs is struct hicain_cmd_mcast.
type CmdMcastArgs struct {
	QPN uint32   `c:"qpn"`
	LID uint16   `c:"lid"`
	_   uint16   `c:"rsvd"`
	GID [16]byte `c:"gid"`
}

// Headers of CmdCreateFlowArgs.Match (ABI 1.15).
const (
	FlowEth  = 0x1
	FlowIPv4 = 0x2
	FlowIPv6 = 0x4
	FlowTCP  = 0x8
	FlowUDP  = 0x10
)

// CmdCreateFlowArgs is struct hicain_cmd_create_flow (ABI 1.15): the
// byte arrays are wire fields, in network byte order.
type CmdCreateFlowArgs struct {
	QPN           uint32   `c:"qpn"`
	Match         uint32   `c:"match"`
	Priority      uint16   `c:"priority"`
	Port          uint8    `c:"port"`
	_             uint8    `c:"rsvd0"`
	_             uint32   `c:"rsvd1"`
	DMAC          [6]byte  `c:"dmac"`
	DMACMask      [6]byte  `c:"dmac_mask"`
	SMAC          [6]byte  `c:"smac"`
	SMACMask      [6]byte  `c:"smac_mask"`
	EtherType     [2]byte  `c:"ether_type"`
	EtherTypeMask [2]byte  `c:"ether_type_mask"`
	VLANTag       [2]byte  `c:"vlan_tag"`
	VLANTagMask   [2]byte  `c:"vlan_tag_mask"`
	SrcIP         [16]byte `c:"src_ip"`
	SrcIPMask     [16]byte `c:"src_ip_mask"`
	DstIP         [16]byte `c:"dst_ip"`
	DstIPMask     [16]byte `c:"dst_ip_mask"`
	IPProto       uint8    `c:"ip_proto"`
	IPProtoMask   uint8    `c:"ip_proto_mask"`
	_             [2]byte  `c:"rsvd2"`
	SrcPort       [2]byte  `c:"src_port"`
	SrcPortMask   [2]byte  `c:"src_port_mask"`
	DstPort       [2]byte  `c:"dst_port"`
	DstPortMask   [2]byte  `c:"dst_port_mask"`
}

// RSS limits (ABI 1.15).
const (
	RSSKeyLen   = 40
	RSSMaxTable = 32
)

// CmdSetRSSArgs is struct hicain_cmd_set_rss (ABI 1.15).
type CmdSetRSSArgs struct {
	QPN      uint32              `c:"qpn"`
	LogTable uint32              `c:"log_table"`
	Fields   uint64              `c:"fields"`
	Key      [RSSKeyLen]byte     `c:"key"`
	Table    [RSSMaxTable]uint32 `c:"table"`
}

// CmdAllocMWArgs is struct hicain_cmd_alloc_mw (ABI 1.10).
type CmdAllocMWArgs struct {
	PD   uint32 `c:"pd"`
	Type uint32 `c:"type"`
}

// CmdPortCapArgs is struct hicain_cmd_port_cap (ABI 1.6).
type CmdPortCapArgs struct {
	CapMask uint32 `c:"cap_mask"`
	_       uint32 `c:"rsvd"`
}

// CmdMADIfcArgs is struct hicain_cmd_mad_ifc (ABI 1.4).
type CmdMADIfcArgs struct {
	InGPA uint64 `c:"in_gpa"`
	_     uint64 `c:"rsvd"`
}

// CmdSetAddrArgs is struct hicain_cmd_set_addr.
type CmdSetAddrArgs struct {
	MAC   [6]byte    `c:"mac"`
	MTU   uint16     `c:"mtu"`
	NIPv4 uint32     `c:"n_ipv4"`
	IPv4  [4][4]byte `c:"ipv4"`
}

// AdminCmd is struct hicain_admin_cmd; Payload is its union.
type AdminCmd struct {
	Opcode  uint16    `c:"opcode"`
	_       uint16    `c:"rsvd0"`
	CmdID   uint32    `c:"cmd_id"`
	RespGPA uint64    `c:"resp_gpa"`
	RespLen uint32    `c:"resp_len"`
	Handle  uint32    `c:"handle"`
	_       uint64    `c:"rsvd1"`
	Payload [224]byte `c:"raw"`
}

// AdminCQE is struct hicain_admin_cqe.
type AdminCQE struct {
	CmdID  uint32   `c:"cmd_id"`
	Opcode uint16   `c:"opcode"`
	Status uint16   `c:"status"`
	Handle uint32   `c:"handle"`
	_      uint32   `c:"rsvd"`
	Out    [48]byte `c:"out"`
}

// DeviceAttr is struct hicain_device_attr.
type DeviceAttr struct {
	NodeGUID        uint64  `c:"node_guid"`
	SysImageGUID    uint64  `c:"sys_image_guid"`
	MaxMRSize       uint64  `c:"max_mr_size"`
	PageSizeCap     uint64  `c:"page_size_cap"`
	VendorID        uint32  `c:"vendor_id"`
	VendorPartID    uint32  `c:"vendor_part_id"`
	HWVer           uint32  `c:"hw_ver"`
	MaxQP           uint32  `c:"max_qp"`
	MaxQPWR         uint32  `c:"max_qp_wr"`
	DeviceCapFlags  uint32  `c:"device_cap_flags"`
	MaxSGE          uint32  `c:"max_sge"`
	MaxSGERd        uint32  `c:"max_sge_rd"`
	MaxCQ           uint32  `c:"max_cq"`
	MaxCQE          uint32  `c:"max_cqe"`
	MaxMR           uint32  `c:"max_mr"`
	MaxPD           uint32  `c:"max_pd"`
	MaxQPRdAtom     uint32  `c:"max_qp_rd_atom"`
	MaxQPInitRdAtom uint32  `c:"max_qp_init_rd_atom"`
	MaxResRdAtom    uint32  `c:"max_res_rd_atom"`
	AtomicCap       uint32  `c:"atomic_cap"`
	MaxPKeys        uint32  `c:"max_pkeys"`
	MaxInline       uint32  `c:"max_inline"`
	MaxMsgSz        uint64  `c:"max_msg_sz"`
	LocalCAAckDelay uint8   `c:"local_ca_ack_delay"`
	PhysPortCnt     uint8   `c:"phys_port_cnt"`
	_               [6]byte `c:"rsvd"`
	// ABI 1.1
	MaxSRQ                uint32 `c:"max_srq"`
	MaxSRQWR              uint32 `c:"max_srq_wr"`
	MaxSRQSGE             uint32 `c:"max_srq_sge"`
	MaxMcastGrp           uint32 `c:"max_mcast_grp"`
	MaxMcastQPAttach      uint32 `c:"max_mcast_qp_attach"`
	MaxTotalMcastQPAttach uint32 `c:"max_total_mcast_qp_attach"`
	MaxAH                 uint32 `c:"max_ah"`
	MaxMW                 uint32 `c:"max_mw"` // ABI 1.10
	// ABI 1.13: struct ibv_tm_caps.
	MaxRndvHdrSize uint32  `c:"max_rndv_hdr_size"`
	MaxNumTags     uint32  `c:"max_num_tags"`
	TMFlags        uint32  `c:"tm_flags"`
	MaxTMOps       uint32  `c:"max_tm_ops"`
	MaxTMSGE       uint32  `c:"max_tm_sge"`
	_              [4]byte `c:"rsvd_tm"`
}

// PortAttr is struct hicain_port_attr.
type PortAttr struct {
	State         uint32 `c:"state"`
	MaxMTU        uint32 `c:"max_mtu"`
	ActiveMTU     uint32 `c:"active_mtu"`
	GIDTblLen     uint32 `c:"gid_tbl_len"`
	PortCapFlags  uint32 `c:"port_cap_flags"`
	MaxMsgSz      uint32 `c:"max_msg_sz"`
	BadPKeyCntr   uint32 `c:"bad_pkey_cntr"`
	QKeyViolCntr  uint32 `c:"qkey_viol_cntr"`
	PKeyTblLen    uint32 `c:"pkey_tbl_len"`
	LID           uint16 `c:"lid"`
	SMLID         uint16 `c:"sm_lid"`
	LMC           uint8  `c:"lmc"`
	MaxVLNum      uint8  `c:"max_vl_num"`
	SMSL          uint8  `c:"sm_sl"`
	SubnetTimeout uint8  `c:"subnet_timeout"`
	ActiveWidth   uint8  `c:"active_width"`
	ActiveSpeed   uint8  `c:"active_speed"`
	PhysState     uint8  `c:"phys_state"`
	LinkLayer     uint8  `c:"link_layer"`
}

// PortCounters is struct hicain_port_counters, the result of
// QUERY_COUNTERS (ABI 1.2).
type PortCounters struct {
	XmitData            uint64    `c:"xmit_data"`
	RcvData             uint64    `c:"rcv_data"`
	XmitPkts            uint64    `c:"xmit_pkts"`
	RcvPkts             uint64    `c:"rcv_pkts"`
	UnicastXmitPkts     uint64    `c:"unicast_xmit_pkts"`
	UnicastRcvPkts      uint64    `c:"unicast_rcv_pkts"`
	MulticastXmitPkts   uint64    `c:"multicast_xmit_pkts"`
	MulticastRcvPkts    uint64    `c:"multicast_rcv_pkts"`
	RcvErrors           uint64    `c:"rcv_errors"`
	XmitDiscards        uint64    `c:"xmit_discards"`
	RcvConstraintErrors uint64    `c:"rcv_constraint_errors"`
	LinkDowned          uint64    `c:"link_downed"`
	VL15Dropped         uint64    `c:"vl15_dropped"`
	QP1Dropped          uint64    `c:"qp1_dropped"`
	_                   [2]uint64 `c:"rsvd"`
}

// EQE is struct hicain_eqe.
type EQE struct {
	Type   uint32 `c:"type"`
	Handle uint32 `c:"handle"`
	Data   uint32 `c:"data"`
	Seq    uint32 `c:"seq"`
}

// L2Desc is struct hicain_l2_desc.
type L2Desc struct {
	Addr   uint64 `c:"addr"`
	Len    uint16 `c:"len"`
	Flags  uint16 `c:"flags"`
	BufLen uint16 `c:"buf_len"`
	_      uint16 `c:"rsvd"`
}

// WQDBRec is struct hicain_wq_dbrec.
type WQDBRec struct {
	Prod uint32 `c:"prod"`
	Cons uint32 `c:"cons"`
}

// TMDBRec is struct hicain_tm_dbrec (ABI 1.13), a TM SRQ's ops dbrec.
type TMDBRec struct {
	Prod uint32 `c:"prod"`
	Cons uint32 `c:"cons"`
	Busy uint64 `c:"busy"`
}

// CQDBRec is struct hicain_cq_dbrec.
type CQDBRec struct {
	Prod uint32 `c:"prod"`
	Cons uint32 `c:"cons"`
	Arm  uint32 `c:"arm"`
	// Events counts the interrupts the CQ raised (ABI 1.7).
	Events uint32 `c:"events"`
}

// SGE is struct hicain_sge.
type SGE struct {
	Addr   uint64 `c:"addr"`
	Length uint32 `c:"length"`
	LKey   uint32 `c:"lkey"`
}

// SendWQE is struct hicain_send_wqe; SGEs or inline data follow it.
type SendWQE struct {
	WRID       uint64 `c:"wr_id"`
	Opcode     uint8  `c:"opcode"`
	NumSGE     uint8  `c:"num_sge"`
	SendFlags  uint16 `c:"send_flags"`
	ImmData    uint32 `c:"imm_data"`
	RemoteAddr uint64 `c:"remote_addr"`
	RKey       uint32 `c:"rkey"`
	InlineLen  uint32 `c:"inline_len"`
	CompareAdd uint64 `c:"compare_add"`
	Swap       uint64 `c:"swap"`
	AH         uint32 `c:"ah"`
	RemoteQPN  uint32 `c:"remote_qpn"`
	RemoteQKey uint32 `c:"remote_qkey"`
	RemoteSRQN uint32 `c:"remote_srqn"` // ABI 1.11, XRC initiator
}

// WQEAV is struct hicain_wqe_av: the address vector of a SendAV WQE.
type WQEAV struct {
	Attr AHAttr    `c:"attr"`
	_    [2]uint32 `c:"rsvd"`
}

// RecvWQE is struct hicain_recv_wqe; SGEs follow it.
type RecvWQE struct {
	WRID   uint64 `c:"wr_id"`
	NumSGE uint32 `c:"num_sge"`
	_      uint32 `c:"rsvd"`
}

// CQE is struct hicain_cqe.
type CQE struct {
	WRID         uint64  `c:"wr_id"`
	Status       uint32  `c:"status"`
	Opcode       uint32  `c:"opcode"`
	VendorErr    uint32  `c:"vendor_err"`
	ByteLen      uint32  `c:"byte_len"`
	ImmData      uint32  `c:"imm_data"`
	QPNum        uint32  `c:"qp_num"`
	SrcQP        uint32  `c:"src_qp"`
	WCFlags      uint32  `c:"wc_flags"`
	PKeyIndex    uint16  `c:"pkey_index"`
	SLID         uint16  `c:"slid"`
	SL           uint8   `c:"sl"`
	DLIDPathBits uint8   `c:"dlid_path_bits"`
	_            [2]byte `c:"rsvd0"`
	Timestamp    uint64  `c:"timestamp"` // ABI 1.12: host CLOCK_REALTIME, ns
	TMHandle     uint32  `c:"tm_handle"` // ABI 1.13
	_            [4]byte `c:"rsvd"`
}

// CQETM is the view of a CQE with an IBV_WC_TM_* opcode (ABI 1.13):
// the bytes of pkey_index..rsvd0 hold the TMH tag.
type CQETM struct {
	WRID      uint64  `c:"wr_id"`
	Status    uint32  `c:"status"`
	Opcode    uint32  `c:"opcode"`
	VendorErr uint32  `c:"vendor_err"`
	ByteLen   uint32  `c:"byte_len"`
	ImmData   uint32  `c:"imm_data"` // the TMH's app_ctx
	QPNum     uint32  `c:"qp_num"`
	SrcQP     uint32  `c:"src_qp"`
	WCFlags   uint32  `c:"wc_flags"`
	Tag       uint64  `c:"tm_tag"`
	Timestamp uint64  `c:"timestamp"`
	TMHandle  uint32  `c:"tm_handle"`
	_         [4]byte `c:"rsvd"`
}

// TMOpWQE is struct hicain_tm_op_wqe (ABI 1.13).
type TMOpWQE struct {
	WRID          uint64 `c:"wr_id"`
	Opcode        uint32 `c:"opcode"`
	Flags         uint32 `c:"flags"`
	UnexpectedCnt uint32 `c:"unexpected_cnt"`
	Handle        uint32 `c:"handle"`
	RecvWRID      uint64 `c:"recv_wr_id"`
	Tag           uint64 `c:"tag"`
	Mask          uint64 `c:"mask"`
	SGE           SGE    `c:"sge"`
}

// AsBytes returns the memory of *p as a byte slice (for copying ABI
// structures to and from guest memory).
func AsBytes[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// PayloadOf returns the admin command's union viewed as *T.
func PayloadOf[T any](c *AdminCmd) *T {
	var z T
	if unsafe.Sizeof(z) > unsafe.Sizeof(c.Payload) {
		panic("device: payload too large")
	}
	return (*T)(unsafe.Pointer(&c.Payload[0]))
}
