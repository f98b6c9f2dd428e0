// Package hilink is HiLink, the GPU peer fabric of a rack: the switch
// that `hinic link serve` runs and the endpoint a GPU backend opens a
// port with. Ports are UNIX SOCK_SEQPACKET sockets, one frame per
// message (the format is in package wire, docs/hilink-wire.md), opened
// by a hello that names the GPU ids behind the port. The switch forwards
// by destination GPU id and is lossless and in order per source and
// destination by credits: a frame is sent on a link only against a
// credit its receiver granted.
//
// Concurrency: a Switch is safe for concurrent use. Each connected port
// (a session) has one receive goroutine, which owns the socket's read
// side and the receive buffers, and one transmit goroutine, which owns
// the write side; a frame's buffer belongs to the receive goroutine
// until it is queued, then to the queue, then to the transmit goroutine
// that sends it and puts it back in the pool. A session's mutex guards
// its credit counts and its queues; no goroutine holds two sessions'
// mutexes at once, nor a session's and the route table's except in the
// hello, in the order port, routes.
//
// hilink imports, of the project, only the shared leaf packages wire,
// mmsg, unixsock, ctlsock and pcapfile: never the NIC's device, rdma or
// fabric packages (ARCHITECTURE.md §2.7, checked by internal/deps_test.go).
package hilink
