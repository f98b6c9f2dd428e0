// Package rdma is HiNIC's transport engine: the "hardware" of the emulated
// RDMA NIC, with a Go verbs API shaped after libibverbs so that the device
// backend can map guest ring entries one to one and the embedded rack can
// drive it in process.
//
// A Device is one RDMA NIC with one port, RoCEv2 on Ethernet or native
// InfiniBand (DeviceConfig.LinkLayer). It owns a GID table,
// protection domains, memory regions over an abstract DMA space (Memory),
// completion queues, shared receive queues, address handles and queue
// pairs (RC and UD, with multicast groups), and it runs the transport
// (IBA Vol 1 chapter 9) itself: segmentation, PSNs, ACK
// coalescing, the local ACK timer, PSN-sequence-error and RNR NAKs with
// retransmission, READ responses and their replay, the responder's key and
// bounds checks, completions and the error flush. Frames leave through a
// Port and arrive through Device.Deliver as standard RoCEv2 frames
// (Ethernet / IPv4 or IPv6 / UDP 4791 / BTH ... / ICRC), built and parsed
// with package proto.
//
// # Threading
//
// Each Device runs one engine goroutine that owns every QP's transport
// state; there are no locks on PSN state. Verbs calls from other goroutines
// reach it through bounded queues (received frames, per-QP doorbell and
// timer events, control requests), and completions come back through CQs.
// Every exported type documents whether it is safe for concurrent use.
// Timers come from an injected clock.Clock; clocktest.Fake makes
// retransmission and RNR behaviour deterministic in tests.
//
// # Imports
//
// rdma imports only the standard library, internal/proto,
// internal/clock and internal/ibagent (its SMA and PMA). It must not
// import internal/fabric or internal/device: the device backend depends
// on it, never the reverse, and the fabric meets it only at the Port.
//
// # Layout
//
// The transport is split as Linux rxe splits it: the requester
// (requester.go, rxe_req.c) turns send WQEs into request packets, the
// responder (responder.go, rxe_resp.c) executes requests and answers
// them, and the completer (completer.go, rxe_comp.c) handles
// acknowledgements and READ and atomic responses and retires send WQEs.
// Every QP type (RC, UC, UD, XRC, the special QPs, raw packet) goes
// through the same three, led by the per-type and per-opcode tables of
// service.go; sge.go resolves every work request's SGEs.
//
// # Files over 800 lines
//
// engine.go (803 lines) holds the engine loop and its queues: the
// goroutine that owns every QP's transport state, kept in one file so
// that the single-owner invariant can be read in one place.
//
// docs/rdma-engine.md describes the engine in full: what is implemented,
// defaults and limits, counters, and what is still to come.
package rdma
