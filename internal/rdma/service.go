package rdma

import (
	"fmt"

	"github.com/PacketFive/hinic/internal/proto"
)

// Per-QP-type and per-opcode tables, as rxe_opcode.c's: what each QP
// type may post and receive and how the requester treats it, and what
// each send opcode carries and what answers it. Every QP type goes
// through the one requester (reqStep): RC and XRC are reliable
// (acknowledged through the completer, retransmitted), UC is segmented
// the same way but completes each WQE when its last packet is on the
// wire, and UD, the special QPs and raw packet QPs send one packet a
// WQE, addressed per WQE, completing at once (IBA 10.8.3).

// wrOp describes a send work request opcode (IBA 9.4, table 38).
type wrOp struct {
	write    bool     // RDMA WRITE: an RETH on the first packet
	imm      bool     // immediate data on the last packet
	inv      bool     // SEND_WITH_INV: an IETH on the last packet
	response bool     // answered with data, not an ACK; counts against max_rd_atomic
	local    bool     // executed by the requester, no packet (BIND_MW, LOCAL_INV)
	wc       WCOpcode // the opcode of its completion
}

// wrOps is indexed by WROpcode; an opcode it does not list is refused at
// post time by every QP type (no service's posts has it).
var wrOps = [WRAtomicWrite + 1]wrOp{
	WRRDMAWrite:         {write: true, wc: WCRDMAWrite},
	WRRDMAWriteWithImm:  {write: true, imm: true, wc: WCRDMAWrite},
	WRSend:              {wc: WCSend},
	WRSendWithImm:       {imm: true, wc: WCSend},
	WRRDMARead:          {response: true, wc: WCRDMARead},
	WRAtomicCmpAndSwp:   {response: true, wc: WCCompSwap},
	WRAtomicFetchAndAdd: {response: true, wc: WCFetchAdd},
	WRLocalInv:          {local: true, wc: WCLocalInv},
	WRBindMW:            {local: true, wc: WCBindMW},
	WRSendWithInv:       {inv: true, wc: WCSend},
	WRAtomicWrite:       {response: true, wc: WCAtomicWrite},
}

// noWROp describes an opcode wrOps does not list.
var noWROp wrOp

// wrInfo returns the description of op.
func wrInfo(op WROpcode) *wrOp {
	if int(op) < len(wrOps) {
		return &wrOps[op]
	}
	return &noWROp
}

// wrMask is a set of send WR opcodes.
type wrMask uint32

func wrSet(ops ...WROpcode) (m wrMask) {
	for _, op := range ops {
		m |= 1 << op
	}
	return m
}

func (m wrMask) has(op WROpcode) bool { return op < 32 && m&(1<<op) != 0 }

// service is a QP type's transport service.
type service struct {
	posts     wrMask // the send WR opcodes it may post
	postsText string // the same in words, for PostSend's error ("" : no detail)

	// reliable: acknowledged and retransmitted; a WQE completes when
	// the completer sees it acknowledged (RC, XRC).
	reliable bool
	// datagram: one packet a WQE, addressed per WQE (UD, SMI, GSI) or
	// a whole frame (raw packet); it completes once on the wire.
	datagram bool
	// opBase is added to the RC opcode of each request packet: UC's
	// opcodes are RC's plus 0x20 (table 38). XRC's are added by txBegin.
	opBase proto.Opcode

	// The packets it takes: transport is their service; requests and
	// responses say which of its opcodes (responses: any that is not a
	// request) reach this QP type. XRC splits them between its two
	// halves (IBA 9.8).
	transport           proto.Transport
	requests, responses bool

	// windows: requests may name a memory window's R_Key (RC, XRC;
	// UC's responder checks MR keys only, docs/rdma-engine.md).
	windows bool

	transitions *transitions // its column of ib_modify_qp_is_ok's table
}

var (
	rcPosts = wrSet(WRSend, WRSendWithImm, WRRDMAWrite, WRRDMAWriteWithImm, WRRDMARead, WRAtomicCmpAndSwp,
		WRAtomicFetchAndAdd, WRLocalInv, WRBindMW, WRSendWithInv, WRAtomicWrite)
	udService = service{
		posts: wrSet(WRSend, WRSendWithImm), postsText: "on a UD QP (SEND and SEND_WITH_IMM only)",
		datagram: true, transport: proto.TransportUD, requests: true, transitions: &udTransitions,
	}
)

// services is indexed by QPType; CreateQP refuses a type it does not
// list.
var services = [QPTypeXRCTgt + 1]service{
	QPTypeRC: {posts: rcPosts, reliable: true, transport: proto.TransportRC, requests: true, responses: true,
		windows: true, transitions: &rcTransitions},
	QPTypeUC: {
		posts:     wrSet(WRSend, WRSendWithImm, WRRDMAWrite, WRRDMAWriteWithImm),
		postsText: "on a UC QP (SEND and RDMA WRITE, with or without immediate)",
		opBase:    proto.OpUCSendFirst - proto.OpRCSendFirst,
		// Every UC opcode is a request: nothing answers UC.
		transport: proto.TransportUC, requests: true, responses: true, transitions: &ucTransitions,
	},
	QPTypeUD:  udService,
	QPTypeSMI: withTransitions(udService, &specialTransitions),
	QPTypeGSI: withTransitions(udService, &specialTransitions),
	QPTypeRawPacket: {posts: wrSet(WRSend), postsText: "on a raw packet QP (only SEND)", datagram: true,
		transitions: &rawTransitions},
	QPTypeXRCIni: {posts: rcPosts, reliable: true, transport: proto.TransportXRC, responses: true,
		windows: true, transitions: &xrcIniTransitions},
	QPTypeXRCTgt: {reliable: true, transport: proto.TransportXRC, requests: true, windows: true,
		transitions: &xrcTgtTransitions},
}

func withTransitions(s service, t *transitions) service {
	s.transitions = t
	return s
}

// svc returns the QP's service.
func (qp *QP) svc() *service { return &services[qp.init.QPType] }

// checkOpcode refuses, at post time, a WR opcode the QP's type does not
// send.
func (qp *QP) checkOpcode(op WROpcode) error {
	s := qp.svc()
	if s.posts.has(op) {
		return nil
	}
	if s.postsText == "" {
		return fmt.Errorf("opcode %v: %w", op, ErrInvalid)
	}
	return fmt.Errorf("opcode %v %s: %w", op, s.postsText, ErrInvalid)
}

// takes reports whether a packet with opcode op is for a QP of this
// type: its service's transport, and a request or response as the
// service takes them (an XRC target takes the requests, an XRC
// initiator the responses; a raw packet QP takes none).
func (qp *QP) takes(op proto.Opcode) bool {
	s := qp.svc()
	if op.Transport() != s.transport {
		return false
	}
	switch op.Info().Kind {
	case proto.KindSend, proto.KindWrite, proto.KindReadRequest, proto.KindAtomic:
		return s.requests
	}
	return s.responses
}
