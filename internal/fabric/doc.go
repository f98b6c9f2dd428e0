// Package fabric is HiSwitch, the emulated top-of-rack switch of HiNIC:
// its ports (UNIX SOCK_SEQPACKET sockets opened by the versioned hello of
// docs/fabric-wire.md, QEMU -netdev stream sockets, inter-switch links),
// the Ethernet pipeline (FDB learning and aging per VLAN, flooding,
// 802.1Q PCP and DSCP to traffic class, per-class bounded egress queues
// with strict-priority and ETS scheduling, PFC, ECN marking), the glue to
// the InfiniBand forwarding of package ibsw, captures, fault injection,
// the control socket behind `hinic fabric status`, and the benchmark
// behind `hinic bench fabric`.
//
// # Goroutines and ownership
//
// Every connected port runs two goroutines: rx reads frames from the peer
// (recvmmsg batches into pooled buffers, package mmsg) and runs the ingress pipeline
// inline, handing each frame to the egress queue of the port it leaves
// by; tx drains that port's queues in scheduler order and writes them
// (sendmmsg batches). A buffer has one owner at a time: rx owns it from
// the read until it is enqueued, the egress queue until tx dequeues it,
// tx until it is written and returned to the pool. A frame that came
// alone in its read and finds its egress port idle (nothing queued, the
// writer free) is written by rx itself, with a write that never waits
// (cut-through, egress.enqueue). Flooding copies the
// frame once per extra egress port, so no buffer is ever shared.
//
// Each listening port has an accept loop; each accepted connection gets a
// short-lived handshake goroutine. Each switch has a housekeeping
// goroutine (FDB aging sweep, capture flush) and the fabric one control
// server. All of them are joined by Close.
//
// Timers that are part of the switch's behaviour (FDB aging, PFC pause
// expiry) come from an injected clock.Clock, so tests drive them with a
// clocktest.Fake. I/O deadlines and redial back-off use real time.
//
// # Dependencies
//
// fabric imports proto, ibsw, clock, rundir and the socket and capture
// leaves; it must not import device, rdma or the CLI. The device backend
// meets the fabric only at the socket wire format. internal/deps_test.go
// holds the rule.
package fabric
