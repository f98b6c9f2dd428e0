package rdma_test

import (
	"sync"
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

// TestWindowBound: with every ACK lost, the requester stops after
// MaxUnackedPSNs packets and sends nothing more until its ACK timer fires.
func TestWindowBound(t *testing.T) {
	p, _, ib := newInterceptPair(t, pairOpts{mtu: 1024})
	ib.setDrop(func(*proto.Packet) bool { return true })
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWrite, SGList: p.a.sge(0, 1<<19),
		RemoteAddr: 0, RKey: p.b.mr.RKey}}))
	p.settle()
	if c := p.a.dev.Counters(); c.TxPackets != rdma.MaxUnackedPSNs {
		t.Fatalf("%d packets in flight, want %d", c.TxPackets, rdma.MaxUnackedPSNs)
	}
	// Let ACKs through again: the timeout resends the window, the ACKs
	// open it and the message completes.
	ib.setDrop(nil)
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 2, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0, 10), RKey: p.b.mr.RKey}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 2, rdma.WCSuccess, rdma.WCRDMAWrite)
}

// frameLog records, across both ports, the order in which packets were
// sent.
type frameLog struct {
	mu   sync.Mutex
	ents []logEnt
}

type logEnt struct {
	fromA bool
	op    proto.Opcode
	psn   proto.PSN
}

type logPort struct {
	log   *frameLog
	fromA bool
	next  rdma.Port
}

func (lp *logPort) Send(f []byte) error {
	if pkt, err := proto.Parse(f, proto.LinkEthernet); err == nil && pkt.BTH != nil {
		lp.log.mu.Lock()
		lp.log.ents = append(lp.log.ents, logEnt{lp.fromA, pkt.BTH.Opcode(), pkt.BTH.PSN()})
		lp.log.mu.Unlock()
	}
	return lp.next.Send(f)
}

func newLoggedPair(t *testing.T, o pairOpts) (*pair, *frameLog) {
	o.defaults()
	lg := &frameLog{}
	p, ia, ib := newInterceptPair(t, o)
	ia.next = &logPort{log: lg, fromA: true, next: ia.next}
	ib.next = &logPort{log: lg, fromA: false, next: ib.next}
	return p, lg
}

// TestReadLimitAndFence: at most max_rd_atomic READs are outstanding, and
// a fenced WR starts only after the READs before it completed.
func TestReadLimitAndFence(t *testing.T) {
	for _, limit := range []uint8{1, 3} {
		p, lg := newLoggedPair(t, pairOpts{mtu: 1024, rdAtomic: limit})
		var wrs []rdma.SendWR
		for i := range 6 {
			wrs = append(wrs, rdma.SendWR{WRID: uint64(i), Opcode: rdma.WRRDMARead, SGList: p.a.sge(uint64(i)*4096, 3000),
				RemoteAddr: uint64(i) * 4096, RKey: p.b.mr.RKey})
		}
		wrs = append(wrs, rdma.SendWR{WRID: 6, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendFence | rdma.SendSignaled,
			SGList: p.a.sge(0, 10), RemoteAddr: 1 << 16, RKey: p.b.mr.RKey})
		mustPost(t, p.qa.PostSend(wrs))
		wantWC(t, p.poll(p.a.scq, 1)[0], 6, rdma.WCSuccess, rdma.WCRDMAWrite)
		out, maxOut, done := 0, 0, 0
		for _, e := range lg.ents {
			switch {
			case e.fromA && e.op == proto.OpRCReadRequest:
				out++
				maxOut = max(maxOut, out)
			case !e.fromA && (e.op == proto.OpRCReadResponseLast || e.op == proto.OpRCReadResponseOnly):
				out--
				done++
			case e.fromA && e.op == proto.OpRCWriteOnly:
				if done != 6 {
					t.Fatalf("limit %d: fenced WRITE sent after %d of 6 READs completed", limit, done)
				}
			}
		}
		if maxOut != int(limit) {
			t.Fatalf("limit %d: %d READs outstanding at most", limit, maxOut)
		}
	}
}

// TestAckCoalescing: the requester asks for an ACK at the end of each
// message and every 32 packets; the responder answers every request for an
// ACK, coalescing those it handles in one batch.
func TestAckCoalescing(t *testing.T) {
	p, lg := newLoggedPair(t, pairOpts{mtu: 1024})
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0, 100*1024), RKey: p.b.mr.RKey}}))
	p.poll(p.a.scq, 1)
	var data, acks int
	for _, e := range lg.ents {
		if e.fromA {
			data++
		} else if e.op == proto.OpRCAcknowledge {
			acks++
		}
	}
	// 100 packets: AckReq on packets 32, 64, 96 and 100; the responder
	// may coalesce, so 1 to 4 ACKs.
	if data != 100 || acks < 1 || acks > 4 {
		t.Fatalf("%d data packets, %d ACKs", data, acks)
	}
	if c := p.b.dev.Counters(); c.AcksSent != uint64(acks) {
		t.Fatalf("AcksSent %d, %d on the wire", c.AcksSent, acks)
	}
}
