package rdma_test

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

// TestWindowBound: with every ACK lost, the requester stops after its
// window and sends nothing more until its ACK timer fires. The window is
// MaxUnackedPSNs (1024) PSNs and at most MaxUnackedBytes (512 KiB) of
// packets at the path MTU; the WRITE is 2 MiB, so a smaller window would show.
func TestWindowBound(t *testing.T) {
	if rdma.MaxUnackedPSNs < 1024 {
		t.Fatalf("MaxUnackedPSNs %d: the window must cover the path, at least 1024 PSNs", rdma.MaxUnackedPSNs)
	}
	for _, tc := range []struct{ mtu, window int }{{512, 1024}, {1024, 512}, {2048, 256}, {4096, 128}} {
		p, _, ib := newInterceptPair(t, pairOpts{mtu: tc.mtu, memSize: 4 << 20})
		ib.setDrop(func(*proto.Packet) bool { return true })
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWrite, SGList: p.a.sge(0, 2<<20),
			RemoteAddr: 0, RKey: p.b.mr.RKey}}))
		p.settle()
		if c := p.a.dev.Counters(); c.TxPackets != uint64(tc.window) {
			t.Fatalf("MTU %d: %d packets in flight, want %d", tc.mtu, c.TxPackets, tc.window)
		}
		// Let ACKs through again: the timeout resends the window, the
		// ACKs open it and the message completes.
		ib.setDrop(nil)
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 2, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
			SGList: p.a.sge(0, 10), RKey: p.b.mr.RKey}}))
		wantWC(t, p.poll(p.a.scq, 1)[0], 2, rdma.WCSuccess, rdma.WCRDMAWrite)
	}
}

// TestReadDepth128: the device offers max_qp_rd_atom and
// max_qp_init_rd_atom of 128, as Soft-RoCE does (a HiNIC requester
// connecting to an rxe responder asks for rxe's 128), a QP takes 128 for
// both, 128 READs go out at once and no more, and the responder keeps all
// 128 to answer them again when every response was lost.
func TestReadDepth128(t *testing.T) {
	p, _, ib := newInterceptPair(t, pairOpts{mtu: 1024, rdAtomic: 128})
	for _, n := range []*node{p.a, p.b} {
		da := n.dev.QueryDevice()
		if da.MaxQPRdAtom != 128 || da.MaxQPInitRdAtom != 128 || da.MaxResRdAtom != 128*da.MaxQP {
			t.Fatalf("%s: max_qp_rd_atom %d, max_qp_init_rd_atom %d, max_res_rd_atom %d; want 128, 128, 128*max_qp",
				n.dev.Name(), da.MaxQPRdAtom, da.MaxQPInitRdAtom, da.MaxResRdAtom)
		}
	}
	for _, qp := range []*rdma.QP{p.qa, p.qb} {
		if a, _ := qp.Query(); a.MaxRDAtomic != 128 || a.MaxDestRDAtomic != 128 {
			t.Fatalf("QP %#x: max_rd_atomic %d, max_dest_rd_atomic %d", qp.QPN(), a.MaxRDAtomic, a.MaxDestRDAtomic)
		}
	}
	// Every response lost: the requester stops at 128 READ requests.
	ib.setDrop(func(pkt *proto.Packet) bool { return pkt.BTH.Opcode() == proto.OpRCReadResponseOnly })
	const reads = 200
	var wrs []rdma.SendWR
	for i := range reads {
		fill(p.b.mem.Bytes()[i*64:i*64+64], byte(i))
		wrs = append(wrs, rdma.SendWR{WRID: uint64(i), Opcode: rdma.WRRDMARead, SendFlags: rdma.SendSignaled,
			SGList: p.a.sge(uint64(i)*64, 64), RemoteAddr: uint64(i) * 64, RKey: p.b.mr.RKey})
	}
	mustPost(t, p.qa.PostSend(wrs))
	p.settle()
	if c := p.a.dev.Counters(); c.TxPackets != 128 {
		t.Fatalf("%d READ requests in flight, want 128", c.TxPackets)
	}
	if c := p.b.dev.Counters(); c.ReadResponsesSent != 128 {
		t.Fatalf("responder answered %d READs, want 128", c.ReadResponsesSent)
	}
	// Responses through again: the ACK timeout resends the 128, the
	// responder answers them from its replay ring, and the rest follow.
	ib.setDrop(nil)
	wcs := p.poll(p.a.scq, reads)
	for i, wc := range wcs {
		wantWC(t, wc, uint64(i), rdma.WCSuccess, rdma.WCRDMARead)
	}
	if !bytes.Equal(p.a.mem.Bytes()[:reads*64], p.b.mem.Bytes()[:reads*64]) {
		t.Fatal("READ data differs from the responder's memory")
	}
	if c := p.b.dev.Counters(); c.Duplicates < 128 {
		t.Fatalf("%d duplicate READs answered again, want at least 128", c.Duplicates)
	}
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
	// readWindow, when set on B's port, holds the first packet of each
	// READ response until A has sent every READ request its window
	// allows (responses done + readWindow, at most readTotal), or
	// readWait passed: B, on its own goroutine, would otherwise answer
	// the first request before A's engine sent the next, and the log
	// would show fewer outstanding than A had.
	readWindow, readTotal int
}

// readWait bounds logPort's hold: a requester that sends fewer READs
// than its window allows shows as fewer outstanding.
const readWait = 2 * time.Second

func (lp *logPort) Send(f []byte) error {
	if pkt, err := proto.Parse(f, proto.LinkEthernet); err == nil && pkt.BTH != nil {
		op := pkt.BTH.Opcode()
		if lp.readWindow > 0 && (op == proto.OpRCReadResponseFirst || op == proto.OpRCReadResponseOnly) {
			lp.waitReads()
		}
		lp.log.mu.Lock()
		lp.log.ents = append(lp.log.ents, logEnt{lp.fromA, op, pkt.BTH.PSN()})
		lp.log.mu.Unlock()
	}
	return lp.next.Send(f)
}

// waitReads waits until the log has as many READ requests from A as its
// window allows after the responses B finished.
func (lp *logPort) waitReads() {
	deadline := time.Now().Add(readWait)
	for time.Now().Before(deadline) {
		reqs, done := 0, 0
		lp.log.mu.Lock()
		for _, e := range lp.log.ents {
			switch {
			case e.fromA && e.op == proto.OpRCReadRequest:
				reqs++
			case !e.fromA && (e.op == proto.OpRCReadResponseLast || e.op == proto.OpRCReadResponseOnly):
				done++
			}
		}
		lp.log.mu.Unlock()
		if reqs >= min(done+lp.readWindow, lp.readTotal) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func newLoggedPair(t *testing.T, o pairOpts) (*pair, *frameLog) {
	p, lg, _ := newLoggedPairPorts(t, o)
	return p, lg
}

// newLoggedPairPorts is newLoggedPair that also returns B's logPort.
func newLoggedPairPorts(t *testing.T, o pairOpts) (*pair, *frameLog, *logPort) {
	o.defaults()
	lg := &frameLog{}
	p, ia, ib := newInterceptPair(t, o)
	ia.next = &logPort{log: lg, fromA: true, next: ia.next}
	lb := &logPort{log: lg, fromA: false, next: ib.next}
	ib.next = lb
	return p, lg, lb
}

// TestReadLimitAndFence: at most max_rd_atomic READs are outstanding, and
// a fenced WR starts only after the READs before it completed.
func TestReadLimitAndFence(t *testing.T) {
	for _, limit := range []uint8{1, 3} {
		p, lg, lb := newLoggedPairPorts(t, pairOpts{mtu: 1024, rdAtomic: limit})
		lb.readWindow, lb.readTotal = int(limit), 6
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

// TestReadResponsesInterleaveWrites: a QP answering a deep queue of READs
// still sends its own WRITEs; the send scheduler gives the responder's
// READ responses and the requester's packets a budget each per round, so
// 512 PSNs of outstanding READ responses do not hold a WRITE back until
// they are all sent. B's engine is held inside its first READ response
// while its WRITE is posted and all of A's READ requests are on their
// way, so what follows depends only on the scheduler.
func TestReadResponsesInterleaveWrites(t *testing.T) {
	const (
		reads     = 128
		readSize  = 4 << 10 // 4 packets: 128 READs fill the 512-PSN window of MTU 1024
		writeSize = 256 << 10
	)
	o := pairOpts{mtu: 1024, memSize: 4 << 20}
	o.defaults()
	p, ia, ib := newInterceptPair(t, o)
	lg := &frameLog{}
	ia.next = &logPort{log: lg, fromA: true, next: ia.next}
	ib.next = &logPort{log: lg, fromA: false, next: ib.next}
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ib.mu.Lock()
	ib.mutate = func(frame []byte) {
		pkt, err := proto.Parse(frame, proto.LinkEthernet)
		if err == nil && pkt.BTH != nil && pkt.BTH.Opcode() == proto.OpRCReadResponseFirst {
			once.Do(func() {
				close(held)
				<-release
			})
		}
	}
	ib.mu.Unlock()

	var wrs []rdma.SendWR
	for i := range reads {
		wrs = append(wrs, rdma.SendWR{WRID: uint64(i), Opcode: rdma.WRRDMARead, SendFlags: rdma.SendSignaled,
			SGList: p.a.sge(uint64(i)*readSize, readSize), RemoteAddr: uint64(i) * readSize, RKey: p.b.mr.RKey})
	}
	mustPost(t, p.qa.PostSend(wrs))
	<-held
	fill(p.b.mem.Bytes()[2<<20:2<<20+writeSize], 3)
	mustPost(t, p.qb.PostSend([]rdma.SendWR{{WRID: 1000, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
		SGList: p.b.sge(2<<20, writeSize), RemoteAddr: 3 << 20, RKey: p.a.mr.RKey}}))
	for p.a.dev.Counters().TxPackets < reads {
		runtime.Gosched() // A's engine is free: its requests go out at once
	}
	close(release)

	wantWC(t, p.poll(p.b.scq, 1)[0], 1000, rdma.WCSuccess, rdma.WCRDMAWrite)
	for i, wc := range p.poll(p.a.scq, reads) {
		wantWC(t, wc, uint64(i), rdma.WCSuccess, rdma.WCRDMARead)
	}
	if !bytes.Equal(p.a.mem.Bytes()[3<<20:3<<20+writeSize], p.b.mem.Bytes()[2<<20:2<<20+writeSize]) {
		t.Fatal("WRITE data differs")
	}
	// Count B's READ responses sent before its last WRITE packet.
	lg.mu.Lock()
	defer lg.mu.Unlock()
	responses, before := 0, -1
	for _, e := range lg.ents {
		if e.fromA {
			continue
		}
		switch e.op {
		case proto.OpRCReadResponseFirst, proto.OpRCReadResponseMiddle, proto.OpRCReadResponseLast:
			responses++
		case proto.OpRCWriteLast:
			before = responses
		}
	}
	if responses != reads*readSize/1024 || before < 0 {
		t.Fatalf("%d READ responses, WRITE last packet after %d", responses, before)
	}
	// 256 WRITE packets at sendBudget (16) a round beside 16 responses:
	// the WRITE is out after about 256 of the 1024 responses.
	if before > responses/2 {
		t.Fatalf("the WRITE's last packet went out after %d of %d READ responses: READs starve WRITEs", before, responses)
	}
}
