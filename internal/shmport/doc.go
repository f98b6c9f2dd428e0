// Package shmport is the shared-memory fabric port: a ring pair in a
// memfd shared by a NIC end (or a dialling switch) and a HiSwitch port on
// one host, modelled on memif of VPP and DPDK. docs/fabric-wire.md
// ("Shared-memory ports") gives the wire format.
//
// The side that dials creates the region (a sealed memfd) and four
// eventfds and passes them over the port's SOCK_SEQPACKET socket with
// SCM_RIGHTS after the hello; the socket stays open as the session's
// liveness signal. Ring 0 carries frames from the dialling side to the
// accepting side, ring 1 the other way. Each ring has a producer index
// (head) and a consumer index (tail), each written by one side only, a
// descriptor per slot (offset and length of a frame in the ring's buffer
// area) and one buffer per slot, used in place: the producer writes the
// frame into the buffer, the consumer reads it where it lies.
//
// The peer is untrusted. Each side keeps its own index privately and
// only reads the peer's; an index that claims more than a ring's worth
// of frames, and a descriptor whose offset or length leaves the buffer
// area, is an error (the session ends) or a dropped frame, never a read
// outside the mapping. The region must be sealed against shrinking, so a
// peer cannot truncate it under the mapping (which would raise SIGBUS).
// A consumer reads each descriptor once; the frame bytes themselves may
// still change under it, so consumers that parse a frame copy it first
// (HiSwitch copies into its pool; the RDMA engine's Deliver copies).
//
// Wake-ups: a consumer that finds its ring empty polls for a while
// (Options.Poll; 0 turns polling off), then sets its ring's "waiting"
// word and sleeps on the ring's data eventfd; a producer that publishes
// frames writes that eventfd only when the word is set. A producer that
// finds the ring full does the same with the "space" word and eventfd.
//
// # Ownership
//
// A Conn has one sending goroutine (Send, SendBatch) and one receiving
// goroutine (Recv) at a time. Shutdown may be called from any goroutine
// and wakes both; Close also waits until neither is inside a call and
// unmaps the region. Both are idempotent.
//
// shmport imports only the standard library and golang.org/x/sys/unix.
package shmport
