package hilink

import (
	"encoding/binary"
	"testing"

	"github.com/PacketFive/hinic/internal/hilink/wire"
)

// fuzzPorts returns a switch that is not started, with a session on
// port 0 for GPUs 0 and 1 and one on port 1 for GPU 2, without sockets:
// enough for the ingress path, which never touches the connection.
func fuzzPorts(t *testing.T) (*Switch, *session, *session) {
	sw, err := New(Config{RunDir: "/nonexistent", Ports: 2, Credits: 8, MaxFrame: 4096})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(p *port, gpus ...uint16) *session {
		s := &session{sw: sw, p: p, gpus: gpus, name: "fuzz", peerMax: 2048, kick: make(chan struct{}, 1),
			done: make(chan struct{}), txCredits: 2, peerGrant: 4, rxAvail: sw.cfg.Credits, voq: make([]fifo, len(sw.ports))}
		for _, g := range gpus {
			sw.routes[g] = s
		}
		p.sess = s
		return s
	}
	return sw, mk(sw.ports[0], 0, 1), mk(sw.ports[1], 2)
}

// FuzzReceive feeds messages to a port's ingress, as a peer would send
// them: the input is a sequence of 2-byte big-endian lengths, each
// followed by that many bytes of one message. The switch must not panic;
// every frame it queues parses, goes to the port of its DstGPU and comes
// from one of the sending port's GPUs; the peer's credits are conserved
// (held by the peer, held by the switch, or on their way back) until the
// port is dropped for an overrun or a credit overflow, and only those
// two end it.
func FuzzReceive(f *testing.F) {
	msgs := func(ms ...[]byte) []byte {
		var b []byte
		for _, m := range ms {
			b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
			b = append(b, m...)
		}
		return b
	}
	w := func(src, dst uint16, n int) []byte {
		return wire.Append(nil, &wire.Fields{Type: wire.TypeWrite, SrcGPU: src, DstGPU: dst}, make([]byte, n))
	}
	credit := func(n uint16) []byte { return wire.Append(nil, &wire.Fields{Type: wire.TypeCredit, Credits: n}, nil) }
	// Writes to the other port and back to the same one, a read request.
	f.Add(msgs(w(0, 2, 10), w(1, 0, 100), wire.Append(nil, &wire.Fields{Type: wire.TypeReadReq, SrcGPU: 1, DstGPU: 2, Length: 9}, nil)))
	// Credits within the grant, then beyond it.
	f.Add(msgs(credit(2), credit(1)))
	// Nine frames against eight credits: an overrun.
	f.Add(msgs(w(0, 2, 1), w(0, 2, 1), w(0, 2, 1), w(0, 2, 1), w(0, 2, 1), w(0, 2, 1), w(0, 2, 1), w(0, 2, 1), w(0, 2, 1)))
	// Bad source, no route, a frame too big for the destination, a hello, junk.
	f.Add(msgs(w(2, 0, 1), w(0, 9, 1), w(0, 2, 3000), wire.AppendHelloFrame(nil, 0, 1, &wire.HelloFields{MaxFrame: 4096, Role: wire.RoleGPU, GPUs: []uint16{0}}), []byte{0xFF}))
	// Requests to nobody that end an operation come back unreachable.
	f.Add(msgs(wire.Append(nil, &wire.Fields{Type: wire.TypeWrite, Flags: wire.FlagLast, SrcGPU: 0, DstGPU: 9}, []byte{1}),
		wire.Append(nil, &wire.Fields{Type: wire.TypeReadReq, SrcGPU: 1, DstGPU: 9, Length: 9}, nil)))
	f.Fuzz(func(t *testing.T, data []byte) {
		sw, a, b := fuzzPorts(t)
		maxFrame := sw.cfg.MaxFrame
		for len(data) >= 2 {
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			n = min(n, len(data))
			msg := data[:n]
			data = data[n:]
			fr := sw.getFrame()
			size, trunc := copy(fr.buf, msg), len(msg) > maxFrame
			reason, fatal := a.receive(fr, size, trunc)
			if reason != dropNone {
				sw.putFrame(fr)
			}
			if fatal {
				if reason != DropOverrun && reason != DropCreditOverflow {
					t.Fatalf("port dropped for %d", reason)
				}
				return
			}
			if a.rxAvail+a.held+a.ret != sw.cfg.Credits || a.rxAvail < 0 {
				t.Fatalf("credits: peer %d, held %d, returning %d", a.rxAvail, a.held, a.ret)
			}
			if a.txCredits > a.peerGrant || a.txCredits < 0 {
				t.Fatalf("tx credits %d of %d", a.txCredits, a.peerGrant)
			}
			queued := 0
			for _, s := range []*session{a, b} {
				for _, q := range s.voq {
					for _, qf := range q.q[q.head:] {
						h, err := wire.Parse(qf.msg())
						// A bounced request comes from the GPU it could not reach.
						bounced := h.Status() == wire.StatusUnreachable && s == a
						if err != nil || !h.Type().Forwarded() || sw.routes[h.DstGPU()] != s || qf.src != a ||
							(h.SrcGPU() != 0 && h.SrcGPU() != 1 && !bounced) || qf.n > s.peerMax {
							t.Fatalf("queued to port %d: %x (%v)", s.p.num, qf.msg(), err)
						}
						queued++
					}
				}
			}
			if queued != a.held || a.queued+b.queued != queued {
				t.Fatalf("queued %d, held %d", queued, a.held)
			}
		}
	})
}
