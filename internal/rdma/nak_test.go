package rdma_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

func isData(p *proto.Packet) bool { return p.BTH != nil && p.BTH.Opcode() != proto.OpRCAcknowledge }

// dropNth returns a drop function that drops the n-th (1-based) packet
// matching match, once.
func dropNth(n int, match func(p *proto.Packet) bool) func(p *proto.Packet) bool {
	seen := 0
	return func(p *proto.Packet) bool {
		if !match(p) {
			return false
		}
		seen++
		return seen == n
	}
}

// lostACK runs one SEND whose ACK is lost the first time, checks that
// it completes once on both sides, and returns A's and B's counters.
func lostACK(e nakEnv) (ca, cb rdma.Counters) {
	p := e.p
	e.ib.setDrop(dropNth(1, opIs(proto.OpRCAcknowledge)))
	mustPost(e.t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 9, SGList: p.b.sge(0, 64)}}))
	mustPost(e.t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0, 10)}}))
	wantWC(e.t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCSend)
	wantWC(e.t, p.poll(p.b.rcq, 1)[0], 9, rdma.WCSuccess, rdma.WCRecv)
	p.expectNone(p.b.rcq, "executed twice")
	return p.a.dev.Counters(), p.b.dev.Counters()
}

func opIs(op proto.Opcode) func(p *proto.Packet) bool {
	return func(p *proto.Packet) bool { return p.BTH != nil && p.BTH.Opcode() == op }
}

func wantState(t *testing.T, qp *rdma.QP, s rdma.QPState) {
	t.Helper()
	if got := qp.State(); got != s {
		t.Fatalf("QP %#x in %v, want %v", qp.QPN(), got, s)
	}
}

// craft builds a request frame from qa to qb as qa would, for injecting
// packets our own requester never sends.
func craft(p *pair, op proto.Opcode, psn uint32, payload []byte, reth proto.RETHFields) []byte {
	f := proto.PacketFields{
		Link: proto.LinkEthernet,
		Eth:  proto.EthernetFields{Dst: p.b.mac, Src: p.a.mac},
		IP4:  proto.IPv4Fields{TTL: 64, Src: p.a.ip.As4(), Dst: p.b.ip.As4()},
		UDP:  proto.UDPFields{SrcPort: 0xC000},
		BTH:  proto.BTHFields{Opcode: op, PKey: 0xFFFF, DestQP: p.qb.QPN(), PSN: proto.PSN(psn), AckReq: true},
		RETH: reth, Payload: payload,
	}
	b := make([]byte, f.Len())
	if _, err := f.Encode(b); err != nil {
		panic(err)
	}
	return b
}

// nakEnv is what a TestNAKPaths case gets.
type nakEnv struct {
	t      *testing.T
	p      *pair
	ia, ib *interceptPort // A's and B's ports
}

func TestNAKPaths(t *testing.T) {
	type env = nakEnv
	cases := []struct {
		name string
		opts pairOpts
		run  func(e env)
	}{
		{"PSN sequence error then recovery by retransmission", pairOpts{mtu: 1024}, func(e env) {
			p := e.p
			e.ia.setDrop(dropNth(3, isData)) // third packet of a 5-packet WRITE
			fill(p.a.mem.Bytes()[:5000], 1)
			mustPost(e.t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
				SGList: p.a.sge(0, 5000), RemoteAddr: 0x1000, RKey: p.b.mr.RKey}}))
			p.settle() // recovery must not need a timeout
			wantWC(e.t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCRDMAWrite)
			ca, cb := p.a.dev.Counters(), p.b.dev.Counters()
			if cb.SeqNAKsSent != 1 || ca.SeqNAKsReceived != 1 {
				e.t.Errorf("seq NAKs sent %d received %d, want 1 and 1 (one per gap)", cb.SeqNAKsSent, ca.SeqNAKsReceived)
			}
			if cb.OutOfSequence != 2 || ca.Retransmits != 3 || ca.RetransmitTimeouts != 0 {
				e.t.Errorf("out of sequence %d (want 2), retransmits %d (want 3), timeouts %d (want 0)",
					cb.OutOfSequence, ca.Retransmits, ca.RetransmitTimeouts)
			}
			if !bytes.Equal(p.a.mem.Bytes()[:5000], p.b.mem.Bytes()[0x1000:0x1000+5000]) {
				e.t.Error("data mismatch")
			}
		}},
		{"invalid request: QP without remote write", pairOpts{qpAccess: rdma.AccessLocalWrite}, func(e env) {
			p := e.p
			mustPost(e.t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 9, SGList: p.b.sge(0, 64)}}))
			mustPost(e.t, p.qa.PostSend([]rdma.SendWR{
				{WRID: 1, Opcode: rdma.WRRDMAWrite, SGList: p.a.sge(0, 8), RemoteAddr: 0, RKey: p.b.mr.RKey},
				{WRID: 2, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0, 8)},
			}))
			wcs := p.poll(p.a.scq, 2)
			wantWC(e.t, wcs[0], 1, rdma.WCRemInvReqErr, rdma.WCRDMAWrite)
			wantWC(e.t, wcs[1], 2, rdma.WCWRFlushErr, rdma.WCSend)
			wantWC(e.t, p.poll(p.b.rcq, 1)[0], 9, rdma.WCWRFlushErr, rdma.WCRecv)
			wantState(e.t, p.qa, rdma.QPStateErr)
			wantState(e.t, p.qb, rdma.QPStateErr)
			if c := p.b.dev.Counters(); c.ErrNAKsSent != 1 {
				e.t.Errorf("error NAKs sent %d, want 1", c.ErrNAKsSent)
			}
		}},
		{"invalid request: message longer than the receive buffer", pairOpts{}, func(e env) {
			p := e.p
			mustPost(e.t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 9, SGList: p.b.sge(0, 100)}}))
			mustPost(e.t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRSend, SGList: p.a.sge(0, 3000)}}))
			wantWC(e.t, p.poll(p.a.scq, 1)[0], 1, rdma.WCRemInvReqErr, rdma.WCSend)
			wantWC(e.t, p.poll(p.b.rcq, 1)[0], 9, rdma.WCLocLenErr, rdma.WCRecv)
		}},
		{"invalid request: MIDDLE without FIRST", pairOpts{}, func(e env) {
			p := e.p
			e.ib.keep = true
			p.b.dev.Deliver(craft(p, proto.OpRCWriteMiddle, remotePSN(p.qa), make([]byte, 1024), proto.RETHFields{}))
			p.settle()
			var naks int
			for _, f := range e.ib.captured() {
				pkt, _ := proto.Parse(f, proto.LinkEthernet)
				if pkt.AETH != nil && pkt.AETH.Type() == proto.AckTypeNAK && pkt.AETH.Value() == proto.NAKInvalidRequest {
					naks++
				}
			}
			if naks != 1 {
				e.t.Fatalf("%d invalid-request NAKs on the wire, want 1", naks)
			}
			wantState(e.t, p.qb, rdma.QPStateErr)
		}},
		{"remote access error: bad rkey", pairOpts{}, func(e env) {
			remoteAccess(e.t, e.p, rdma.WRRDMAWrite, 0, e.p.b.mr.RKey+1, 16)
		}},
		{"remote access error: out of bounds", pairOpts{}, func(e env) {
			remoteAccess(e.t, e.p, rdma.WRRDMAWrite, uint64(e.p.o.memSize)-8, e.p.b.mr.RKey, 16)
		}},
		{"remote access error: READ out of bounds", pairOpts{}, func(e env) {
			remoteAccess(e.t, e.p, rdma.WRRDMARead, uint64(e.p.o.memSize)-8, e.p.b.mr.RKey, 16)
		}},
		{"remote access error: no remote write permission", pairOpts{}, func(e env) {
			mr, err := e.p.b.dev.RegMR(e.p.b.pd, 0x4000, 0x1000, rdma.AccessLocalWrite|rdma.AccessRemoteRead)
			if err != nil {
				e.t.Fatal(err)
			}
			remoteAccess(e.t, e.p, rdma.WRRDMAWrite, 0x4000, mr.RKey, 16)
		}},
		{"remote access error: no remote read permission", pairOpts{}, func(e env) {
			mr, err := e.p.b.dev.RegMR(e.p.b.pd, 0x4000, 0x1000, rdma.AccessLocalWrite|rdma.AccessRemoteWrite)
			if err != nil {
				e.t.Fatal(err)
			}
			remoteAccess(e.t, e.p, rdma.WRRDMARead, 0x4000, mr.RKey, 16)
		}},
		{"remote access error: MR of another PD", pairOpts{}, func(e env) {
			pd2, _ := e.p.b.dev.AllocPD()
			mr, err := e.p.b.dev.RegMR(pd2, 0x4000, 0x1000, rdma.AccessLocalWrite|rdma.AccessRemoteWrite)
			if err != nil {
				e.t.Fatal(err)
			}
			remoteAccess(e.t, e.p, rdma.WRRDMAWrite, 0x4000, mr.RKey, 16)
		}},
		{"remote operational error: receive buffer with a bad lkey", pairOpts{}, func(e env) {
			p := e.p
			mustPost(e.t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 9, SGList: []rdma.SGE{{Addr: 0, Length: 64, LKey: 0xDEAD00}}}}))
			mustPost(e.t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRSend, SGList: p.a.sge(0, 10)}}))
			wantWC(e.t, p.poll(p.a.scq, 1)[0], 1, rdma.WCRemOpErr, rdma.WCSend)
			wantWC(e.t, p.poll(p.b.rcq, 1)[0], 9, rdma.WCLocProtErr, rdma.WCRecv)
		}},
		{"RNR NAK then success after PostRecv", pairOpts{minRNR: 14}, func(e env) {
			p := e.p
			mustPost(e.t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
				SGList: p.a.sge(0, 3000)}}))
			p.settle()
			if c := p.b.dev.Counters(); c.RNRNAKsSent != 1 {
				e.t.Fatalf("RNR NAKs sent %d, want 1", c.RNRNAKsSent)
			}
			// The RNR timer (min_rnr_timer 14 = 1.28 ms) resends; still no
			// receive: a second RNR NAK.
			step, ok := p.clk.AdvanceToNext()
			if !ok || step != rdma.RNRTimerDuration(14) || step != 1280*time.Microsecond {
				e.t.Fatalf("RNR wait %v (%v), want 1.28ms", step, ok)
			}
			p.settle()
			if c := p.a.dev.Counters(); c.RNRNAKsReceived != 2 {
				e.t.Fatalf("RNR NAKs received %d, want 2", c.RNRNAKsReceived)
			}
			p.expectNone(p.a.scq, "while RNR")
			mustPost(e.t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 9, SGList: p.b.sge(0, 4096)}}))
			p.advance()
			wantWC(e.t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCSend)
			rwc := p.poll(p.b.rcq, 1)[0]
			wantWC(e.t, rwc, 9, rdma.WCSuccess, rdma.WCRecv)
			if rwc.ByteLen != 3000 {
				e.t.Fatalf("ByteLen %d", rwc.ByteLen)
			}
			if c := p.a.dev.Counters(); c.RetransmitTimeouts != 0 {
				e.t.Errorf("%d ACK timeouts during RNR waits", c.RetransmitTimeouts)
			}
		}},
		{"RNR NAK on WRITE_WITH_IMM", pairOpts{}, func(e env) {
			p := e.p
			fill(p.a.mem.Bytes()[:2500], 3)
			mustPost(e.t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWriteWithImm, SendFlags: rdma.SendSignaled,
				ImmData: 77, SGList: p.a.sge(0, 2500), RemoteAddr: 0x8000, RKey: p.b.mr.RKey}}))
			p.settle()
			if c := p.b.dev.Counters(); c.RNRNAKsSent != 1 {
				e.t.Fatalf("RNR NAKs sent %d", c.RNRNAKsSent)
			}
			mustPost(e.t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 9}}))
			wantWC(e.t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCRDMAWrite)
			rwc := p.poll(p.b.rcq, 1)[0]
			wantWC(e.t, rwc, 9, rdma.WCSuccess, rdma.WCRecvRDMAWithImm)
			if rwc.ImmData != 77 || rwc.ByteLen != 2500 || !bytes.Equal(p.a.mem.Bytes()[:2500], p.b.mem.Bytes()[0x8000:0x8000+2500]) {
				e.t.Fatalf("recv %+v or data mismatch", rwc)
			}
		}},
		{"RNR retry exceeded", pairOpts{rnrRetry: 2}, func(e env) {
			p := e.p
			mustPost(e.t, p.qa.PostSend([]rdma.SendWR{
				{WRID: 1, Opcode: rdma.WRSend, SGList: p.a.sge(0, 10)},
				{WRID: 2, Opcode: rdma.WRRDMAWrite, SGList: p.a.sge(0, 10), RKey: p.b.mr.RKey},
			}))
			wcs := p.poll(p.a.scq, 2)
			wantWC(e.t, wcs[0], 1, rdma.WCRNRRetryExcErr, rdma.WCSend)
			wantWC(e.t, wcs[1], 2, rdma.WCWRFlushErr, rdma.WCRDMAWrite)
			if c := p.a.dev.Counters(); c.RNRNAKsReceived != 3 || c.RNRRetryExceeded != 1 {
				e.t.Fatalf("RNR NAKs received %d (want 3 = 1 + rnr_retry), exceeded %d", c.RNRNAKsReceived, c.RNRRetryExceeded)
			}
			wantState(e.t, p.qa, rdma.QPStateErr)
		}},
		{"retry exceeded when the peer is gone", pairOpts{retry: 3, timeout: 10}, func(e env) {
			p := e.p
			e.ia.setDrop(func(*proto.Packet) bool { return true })
			start := p.clk.Now()
			mustPost(e.t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
				SGList: p.a.sge(0, 2048), RKey: p.b.mr.RKey}}))
			wantWC(e.t, p.poll(p.a.scq, 1)[0], 1, rdma.WCRetryExcErr, rdma.WCRDMAWrite)
			c := p.a.dev.Counters()
			if c.RetransmitTimeouts != 4 || c.Retransmits != 3*2 || c.RetryExceeded != 1 {
				e.t.Fatalf("timeouts %d (want 4), retransmits %d (want 6), exceeded %d", c.RetransmitTimeouts, c.Retransmits, c.RetryExceeded)
			}
			if el, want := p.clk.Now().Sub(start), 4*rdma.LocalAckTimeout(10); el != want {
				e.t.Fatalf("gave up after %v, want 4 x %v", el, rdma.LocalAckTimeout(10))
			}
			wantState(e.t, p.qa, rdma.QPStateErr)
		}},
		{"duplicate request re-ACKed", pairOpts{}, func(e env) {
			ca, cb := lostACK(e)
			// The tail-loss probe (the SEND again, asking for an ACK) gets
			// the ACK back before the local ACK timeout.
			if cb.Duplicates != 1 || ca.TailProbes != 1 || ca.RetransmitTimeouts != 0 || cb.AcksSent != 2 {
				e.t.Fatalf("duplicates %d, probes %d, timeouts %d, ACKs sent %d; want 1, 1, 0, 2",
					cb.Duplicates, ca.TailProbes, ca.RetransmitTimeouts, cb.AcksSent)
			}
		}},
		{"duplicate request re-ACKed after the timeout (no probe below 1 ms)", pairOpts{timeout: 10}, func(e env) {
			ca, cb := lostACK(e)
			if cb.Duplicates != 1 || ca.TailProbes != 0 || ca.RetransmitTimeouts != 1 {
				e.t.Fatalf("duplicates %d, probes %d, timeouts %d; want 1, 0, 1", cb.Duplicates, ca.TailProbes, ca.RetransmitTimeouts)
			}
		}},
		{"tail loss recovered by a probe and a NAK", pairOpts{}, func(e env) {
			// The last two packets of a WRITE are lost: no later packet
			// shows the responder the gap. The probe (the last packet
			// again) arrives out of sequence, the responder NAKs the
			// first missing PSN, and the requester goes back to it,
			// all long before the local ACK timeout.
			p := e.p
			n := 0
			e.ia.setDrop(func(pkt *proto.Packet) bool {
				if pkt.BTH == nil {
					return false
				}
				switch pkt.BTH.Opcode() {
				case proto.OpRCWriteMiddle, proto.OpRCWriteLast:
					n++
					return n == 2 || n == 3 // WRITE_MIDDLE #2 and WRITE_LAST, first time
				}
				return false
			})
			start := p.clk.Now()
			mustPost(e.t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
				SGList: p.a.sge(0, 4096), RemoteAddr: 0x1000, RKey: p.b.mr.RKey}}))
			wantWC(e.t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCRDMAWrite)
			ca, cb := p.a.dev.Counters(), p.b.dev.Counters()
			if ca.TailProbes != 1 || cb.SeqNAKsSent != 1 || ca.RetransmitTimeouts != 0 {
				e.t.Fatalf("probes %d, NAKs %d, timeouts %d; want 1, 1, 0", ca.TailProbes, cb.SeqNAKsSent, ca.RetransmitTimeouts)
			}
			if el := p.clk.Now().Sub(start); el >= rdma.LocalAckTimeout(14) {
				e.t.Fatalf("recovered after %v of fake time, not before the %v timeout", el, rdma.LocalAckTimeout(14))
			}
		}},
		{"duplicate READ replayed after a lost first response", pairOpts{}, func(e env) {
			readReplay(e.t, e.p, e.ib, proto.OpRCReadResponseFirst, false)
		}},
		{"duplicate READ replayed after a lost last response", pairOpts{}, func(e env) {
			readReplay(e.t, e.p, e.ib, proto.OpRCReadResponseLast, true)
		}},
		{"local protection error: bad lkey", pairOpts{}, func(e env) {
			p := e.p
			mustPost(e.t, p.qa.PostSend([]rdma.SendWR{
				{WRID: 1, Opcode: rdma.WRRDMAWrite, SGList: p.a.sge(0, 8), RKey: p.b.mr.RKey},
				{WRID: 2, Opcode: rdma.WRRDMAWrite, SGList: []rdma.SGE{{Addr: 0, Length: 8, LKey: 0x777}}, RKey: p.b.mr.RKey},
				{WRID: 3, Opcode: rdma.WRRDMAWrite, SGList: p.a.sge(0, 8), RKey: p.b.mr.RKey},
			}))
			wcs := p.poll(p.a.scq, 2)
			wantWC(e.t, wcs[0], 2, rdma.WCLocProtErr, rdma.WCRDMAWrite)
			wantWC(e.t, wcs[1], 3, rdma.WCWRFlushErr, rdma.WCRDMAWrite)
		}},
		{"local protection error: READ into memory without local write", pairOpts{}, func(e env) {
			p := e.p
			mr, err := p.a.dev.RegMR(p.a.pd, 0x4000, 0x1000, rdma.AccessRemoteRead)
			if err != nil {
				e.t.Fatal(err)
			}
			mustPost(e.t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMARead,
				SGList: []rdma.SGE{{Addr: 0x4000, Length: 8, LKey: mr.LKey}}, RKey: p.b.mr.RKey}}))
			wantWC(e.t, p.poll(p.a.scq, 1)[0], 1, rdma.WCLocProtErr, rdma.WCRDMARead)
		}},
		{"local protection error: SGE outside its MR", pairOpts{}, func(e env) {
			p := e.p
			mustPost(e.t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRSend,
				SGList: p.a.sge(uint64(p.o.memSize)-4, 8)}}))
			wantWC(e.t, p.poll(p.a.scq, 1)[0], 1, rdma.WCLocProtErr, rdma.WCSend)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, ia, ib := newInterceptPair(t, c.opts)
			c.run(env{t, p, ia, ib})
		})
	}
}

// remoteAccess posts one RDMA op that the responder must refuse with a
// remote access error, and checks both sides and that no memory changed.
func remoteAccess(t *testing.T, p *pair, op rdma.WROpcode, raddr uint64, rkey uint32, size uint32) {
	t.Helper()
	fill(p.b.mem.Bytes(), 0x5A)
	fill(p.a.mem.Bytes()[:0x100], 0x11)
	before := append([]byte(nil), p.b.mem.Bytes()...)
	beforeA := append([]byte(nil), p.a.mem.Bytes()[0x1000:0x2000]...)
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: op, SGList: p.a.sge(0x1000, size), RemoteAddr: raddr, RKey: rkey}}))
	wantOp := rdma.WCRDMAWrite
	if op == rdma.WRRDMARead {
		wantOp = rdma.WCRDMARead
	}
	wantWC(t, p.poll(p.a.scq, 1)[0], 1, rdma.WCRemAccessErr, wantOp)
	wantState(t, p.qa, rdma.QPStateErr)
	wantState(t, p.qb, rdma.QPStateErr)
	if !bytes.Equal(before, p.b.mem.Bytes()) || !bytes.Equal(beforeA, p.a.mem.Bytes()[0x1000:0x2000]) {
		t.Fatal("memory changed by a refused request")
	}
	if c := p.b.dev.Counters(); c.ErrNAKsSent != 1 {
		t.Fatalf("error NAKs sent %d", c.ErrNAKsSent)
	}
}

// readReplay drops one READ response and checks the READ still completes,
// with the responder replaying it from the saved request. Losing the last
// response leaves no later packet to reveal the gap, so the ACK timer
// recovers (timeout true); losing an earlier one is noticed at once.
func readReplay(t *testing.T, p *pair, ib *interceptPort, lost proto.Opcode, timeout bool) {
	t.Helper()
	ib.setDrop(dropNth(1, opIs(lost)))
	fill(p.b.mem.Bytes()[0x2000:0x2000+3000], 9)
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRRDMARead, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0, 3000), RemoteAddr: 0x2000, RKey: p.b.mr.RKey}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCRDMARead)
	if !bytes.Equal(p.a.mem.Bytes()[:3000], p.b.mem.Bytes()[0x2000:0x2000+3000]) {
		t.Fatal("data mismatch")
	}
	ca, cb := p.a.dev.Counters(), p.b.dev.Counters()
	if cb.ReadReplays != 1 || cb.Duplicates != 1 {
		t.Fatalf("READ replays %d, duplicates %d, want 1 and 1", cb.ReadReplays, cb.Duplicates)
	}
	if got := ca.RetransmitTimeouts > 0; got != timeout {
		t.Fatalf("ACK timeouts %d, timeout expected %v", ca.RetransmitTimeouts, timeout)
	}
	if !timeout && ca.ReadGapRetries != 1 {
		t.Fatalf("READ gap retries %d, want 1", ca.ReadGapRetries)
	}
}

// TestFlushOnError: moving a QP to ERR completes its posted work with
// WRFlushErr, and work posted in ERR is flushed too.
func TestFlushOnError(t *testing.T) {
	p := newPair(t, pairOpts{})
	a := rdma.QPAttr{QPState: rdma.QPStateSQD}
	if err := p.qa.Modify(&a, rdma.QPAttrState); err != nil { // hold the sends
		t.Fatal(err)
	}
	mustPost(t, p.qa.PostSend([]rdma.SendWR{
		{WRID: 1, Opcode: rdma.WRSend, SGList: p.a.sge(0, 8)},
		{WRID: 2, Opcode: rdma.WRRDMARead, SGList: p.a.sge(0, 8), RKey: p.b.mr.RKey},
	}))
	mustPost(t, p.qa.PostRecv([]rdma.RecvWR{{WRID: 3}, {WRID: 4}}))
	a = rdma.QPAttr{QPState: rdma.QPStateErr}
	if err := p.qa.Modify(&a, rdma.QPAttrState); err != nil {
		t.Fatal(err)
	}
	s := p.poll(p.a.scq, 2)
	wantWC(t, s[0], 1, rdma.WCWRFlushErr, rdma.WCSend)
	wantWC(t, s[1], 2, rdma.WCWRFlushErr, rdma.WCRDMARead)
	r := p.poll(p.a.rcq, 2)
	wantWC(t, r[0], 3, rdma.WCWRFlushErr, rdma.WCRecv)
	wantWC(t, r[1], 4, rdma.WCWRFlushErr, rdma.WCRecv)
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 5, Opcode: rdma.WRSend, SGList: p.a.sge(0, 8)}}))
	mustPost(t, p.qa.PostRecv([]rdma.RecvWR{{WRID: 6}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 5, rdma.WCWRFlushErr, rdma.WCSend)
	wantWC(t, p.poll(p.a.rcq, 1)[0], 6, rdma.WCWRFlushErr, rdma.WCRecv)
	if c := p.a.dev.Counters(); c.TxPackets != 0 {
		t.Fatalf("%d frames sent", c.TxPackets)
	}
}
