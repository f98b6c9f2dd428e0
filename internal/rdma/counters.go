package rdma

import "sync/atomic"

// Counters is a snapshot of a device's counters. All counts are since the
// device was created. Packet counters count frames at the port (loopback
// frames count once as tx and once as rx).
type Counters struct {
	TxPackets uint64 // frames built and handed to the port or looped back
	TxBytes   uint64 // bytes of those frames (Ethernet header through ICRC)
	TxErrors  uint64 // frames Port.Send refused (counted, then dropped)
	RxPackets uint64 // RoCEv2 frames accepted for a QP (after all checks)
	RxBytes   uint64 // bytes of those frames

	LoopbackPackets uint64 // frames that went QP to QP on this device without the port

	RxDropped     uint64 // frames dropped because the receive queue was full
	RxICRCErrors  uint64 // RoCEv2 frames with a bad ICRC (dropped)
	RxMalformed   uint64 // frames that did not parse, bad IPv4 checksum, oversize
	RxNotRoCE     uint64 // well-formed frames that are not RoCEv2 (ARP, LLDP, ...), ignored
	RxNotForUs    uint64 // RoCEv2 frames whose destination MAC or IP is not ours
	RxUnknownQP   uint64 // RoCEv2 frames for a QP number that does not exist
	RxPKeyErrors  uint64 // P_Key mismatch (dropped)
	RxWrongState  uint64 // packets for a QP whose state does not accept them
	RxUnsupported uint64 // valid opcodes of a transport the device does not run (RD, XRC) or a QP type mismatch

	// RxAddrMismatch counts RC and UC packets (CNPs too) whose IP source
	// and destination are not the QP's remote and local addresses (rxe's
	// check_addr), or on InfiniBand whose SLID (and SGID, with GRHs) is
	// not the QP's path's: dropped, not even NAKed.
	RxAddrMismatch uint64
	// XRCBadSRQ counts XRC requests whose XRCETH named no XRC SRQ of
	// the target QP's XRC domain (answered with NAK Invalid Request).
	XRCBadSRQ uint64

	// Requester side.
	Retransmits        uint64 // request packets sent again (any cause)
	RetransmitTimeouts uint64 // local ACK timeouts that led to a retransmission
	TailProbes         uint64 // last packets sent again, asking for an ACK, after probeDelay without one
	AcksReceived       uint64 // ACK packets (AETH syndrome ACK) processed
	SeqNAKsReceived    uint64 // PSN sequence error NAKs received
	RNRNAKsReceived    uint64 // RNR NAKs received
	ErrNAKsReceived    uint64 // invalid request, remote access and remote operational NAKs received
	ReadGapRetries     uint64 // READ requests reissued because responses were missing
	RetryExceeded      uint64 // completions with RetryExcErr
	RNRRetryExceeded   uint64 // completions with RNRRetryExcErr
	StaleResponses     uint64 // ACKs and READ responses for PSNs already acknowledged or never sent

	// Responder side.
	AcksSent          uint64 // ACK packets sent (coalesced)
	SeqNAKsSent       uint64 // PSN sequence error NAKs sent (one per gap)
	RNRNAKsSent       uint64 // RNR NAKs sent
	ErrNAKsSent       uint64 // invalid request, remote access and remote operational NAKs sent
	OutOfSequence     uint64 // requests dropped because their PSN is ahead of the expected PSN
	Duplicates        uint64 // duplicate requests (re-ACKed or replayed)
	ReadReplays       uint64 // duplicate READ requests answered from the saved request
	ReadResponsesSent uint64 // READ response packets sent (first sends and replays)
	AtomicsExecuted   uint64 // CMP_AND_SWP and FETCH_AND_ADD executed on memory
	AtomicReplays     uint64 // duplicate atomics answered from the saved original value
	MWBinds           uint64 // memory windows bound (BIND_MW WRs that succeeded)
	MWInvalidates     uint64 // windows invalidated by LOCAL_INV or SEND_WITH_INV
	AtomicWrites      uint64 // RDMA ATOMIC WRITEs executed on memory

	// Datagrams (UD) and multicast.
	UDSent          uint64 // UD packets sent (one per work request; multicast counts once)
	UDReceived      uint64 // UD packets placed in a receive buffer
	UDNoRecv        uint64 // UD packets dropped because no receive WQE was posted
	UDTooLong       uint64 // UD packets larger than the receive buffer (LocLenErr completion)
	QKeyViolations  uint64 // UD packets dropped for a Q_Key mismatch
	McastDelivered  uint64 // multicast packets handed to an attached QP (one per QP)
	McastNoListener uint64 // multicast packets for a group no local QP is attached to
	UCDropped       uint64 // UC messages (or their packets) dropped: a gap, no receive WR, a bad key

	// Raw packet QPs (raw.go).
	RawSent       uint64 // frames raw QPs sent (to the port, looped back, or filtered)
	RawReceived   uint64 // frames placed in a raw QP's receive WR
	RawNoRecv     uint64 // frames a flow steered to a raw QP with no receive WR posted (dropped)
	RawTooLong    uint64 // frames longer than the receive WR's buffers (LocLenErr)
	RawTxFiltered uint64 // frames DeviceConfig.RawTxFilter refused (dropped, the send completes)
	RawNoFlow     uint64 // frames steered to raw QPs whose flow was gone when the engine took them

	// Congestion control.
	CEReceived     uint64 // RC packets that arrived with ECN CE
	CNPsSent       uint64 // CNPs sent (notification point)
	CNPsSuppressed uint64 // CE packets not answered: a CNP to that QP went out within CNPInterval
	CNPsReceived   uint64 // CNPs received (reaction point)
	RateDecreases  uint64 // DCQCN rate cuts
	RateRecoveries uint64 // QPs back at the line rate
	PacingStalls   uint64 // times a QP waited for its DCQCN rate

	// InfiniBand management.
	SMPsAnswered uint64 // SMPs the port's SMA answered
	MADsSent     uint64 // MADs the SMA and PMA sent (answers)
	VL15Dropped  uint64 // VL15 packets dropped (malformed, not for us, no SM behind QP0)
	QP1Dropped   uint64 // QP1 packets dropped (bad Q_Key, not a MAD, no GSI consumer)
	SMPMKeyDrops uint64 // SMPs the SMA dropped for a wrong M_Key (IBA 14.2.4)

	CompletionErrors uint64 // work completions with a status other than success
	CQOverflows      uint64 // completions lost because a CQ was full
	AsyncEvents      uint64 // asynchronous events queued
	AsyncEventsLost  uint64 // asynchronous events dropped because nobody read them

	// StallRecoveries counts work the engine's 10 ms safety check found
	// queued with no goroutine running it: a lost wake-up (expect 0).
	StallRecoveries uint64
}

// counters is the live, atomically updated form of Counters.
type counters struct {
	txPackets, txBytes, txErrors, rxPackets, rxBytes, loopback atomic.Uint64

	rxDropped, rxICRC, rxMalformed, rxNotRoCE, rxNotForUs, rxUnknownQP atomic.Uint64
	rxPKey, rxWrongState, rxUnsupported                                atomic.Uint64
	rxAddrMismatch, xrcBadSRQ                                          atomic.Uint64

	retransmits, retransmitTimeouts, acksReceived, seqNAKsReceived  atomic.Uint64
	tailProbes                                                      atomic.Uint64
	rnrNAKsReceived, errNAKsReceived, readGapRetries, retryExceeded atomic.Uint64
	rnrRetryExceeded, staleResponses                                atomic.Uint64

	acksSent, seqNAKsSent, rnrNAKsSent, errNAKsSent, outOfSequence atomic.Uint64
	duplicates, readReplays, readResponsesSent                     atomic.Uint64
	atomicsExecuted, atomicReplays                                 atomic.Uint64
	mwBinds, mwInvalidates, atomicWrites                           atomic.Uint64

	udSent, udReceived, udNoRecv, udTooLong, qkeyViolations, mcastDelivered, mcastNoListener, ucDropped atomic.Uint64

	rawSent, rawReceived, rawNoRecv, rawTooLong, rawTxFiltered, rawNoFlow atomic.Uint64

	ceReceived, cnpsSent, cnpsSuppressed, cnpsReceived, rateDecreases, rateRecoveries, pacingStalls atomic.Uint64

	smpsAnswered, madsAnswered, vl15Dropped, qp1Dropped, smpMKeyDrops atomic.Uint64

	completionErrors, cqOverflows, asyncEvents, asyncEventsLost atomic.Uint64

	stallRecoveries atomic.Uint64
}

func (c *counters) snapshot() Counters {
	return Counters{
		TxPackets: c.txPackets.Load(), TxBytes: c.txBytes.Load(), TxErrors: c.txErrors.Load(),
		RxPackets: c.rxPackets.Load(), RxBytes: c.rxBytes.Load(), LoopbackPackets: c.loopback.Load(),

		RxDropped: c.rxDropped.Load(), RxICRCErrors: c.rxICRC.Load(), RxMalformed: c.rxMalformed.Load(),
		RxNotRoCE: c.rxNotRoCE.Load(), RxNotForUs: c.rxNotForUs.Load(), RxUnknownQP: c.rxUnknownQP.Load(),
		RxPKeyErrors: c.rxPKey.Load(), RxWrongState: c.rxWrongState.Load(), RxUnsupported: c.rxUnsupported.Load(),
		RxAddrMismatch: c.rxAddrMismatch.Load(),
		XRCBadSRQ:      c.xrcBadSRQ.Load(),

		Retransmits: c.retransmits.Load(), RetransmitTimeouts: c.retransmitTimeouts.Load(),
		TailProbes:   c.tailProbes.Load(),
		AcksReceived: c.acksReceived.Load(), SeqNAKsReceived: c.seqNAKsReceived.Load(),
		RNRNAKsReceived: c.rnrNAKsReceived.Load(), ErrNAKsReceived: c.errNAKsReceived.Load(),
		ReadGapRetries: c.readGapRetries.Load(), RetryExceeded: c.retryExceeded.Load(),
		RNRRetryExceeded: c.rnrRetryExceeded.Load(), StaleResponses: c.staleResponses.Load(),

		AcksSent: c.acksSent.Load(), SeqNAKsSent: c.seqNAKsSent.Load(), RNRNAKsSent: c.rnrNAKsSent.Load(),
		ErrNAKsSent: c.errNAKsSent.Load(), OutOfSequence: c.outOfSequence.Load(),
		Duplicates: c.duplicates.Load(), ReadReplays: c.readReplays.Load(),
		ReadResponsesSent: c.readResponsesSent.Load(),
		AtomicsExecuted:   c.atomicsExecuted.Load(), AtomicReplays: c.atomicReplays.Load(),
		MWBinds: c.mwBinds.Load(), MWInvalidates: c.mwInvalidates.Load(),
		AtomicWrites: c.atomicWrites.Load(),

		UDSent: c.udSent.Load(), UDReceived: c.udReceived.Load(), UDNoRecv: c.udNoRecv.Load(),
		UDTooLong: c.udTooLong.Load(), QKeyViolations: c.qkeyViolations.Load(),
		McastDelivered: c.mcastDelivered.Load(), McastNoListener: c.mcastNoListener.Load(),
		UCDropped: c.ucDropped.Load(),

		RawSent: c.rawSent.Load(), RawReceived: c.rawReceived.Load(), RawNoRecv: c.rawNoRecv.Load(),
		RawTooLong: c.rawTooLong.Load(), RawTxFiltered: c.rawTxFiltered.Load(), RawNoFlow: c.rawNoFlow.Load(),

		CEReceived: c.ceReceived.Load(), CNPsSent: c.cnpsSent.Load(), CNPsSuppressed: c.cnpsSuppressed.Load(),
		CNPsReceived: c.cnpsReceived.Load(), RateDecreases: c.rateDecreases.Load(),
		RateRecoveries: c.rateRecoveries.Load(), PacingStalls: c.pacingStalls.Load(),

		SMPsAnswered: c.smpsAnswered.Load(), MADsSent: c.madsAnswered.Load(),
		VL15Dropped: c.vl15Dropped.Load(), QP1Dropped: c.qp1Dropped.Load(),
		SMPMKeyDrops: c.smpMKeyDrops.Load(),

		CompletionErrors: c.completionErrors.Load(), CQOverflows: c.cqOverflows.Load(),
		AsyncEvents: c.asyncEvents.Load(), AsyncEventsLost: c.asyncEventsLost.Load(),
		StallRecoveries: c.stallRecoveries.Load(),
	}
}
