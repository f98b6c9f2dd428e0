package rdma_test

import (
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

// markCE sets the CE codepoint on every RoCEv2 data frame, as a congested
// switch would (the ICRC does not cover the ECN bits).
func markCE(frame []byte) {
	pkt, err := proto.Parse(frame, proto.LinkEthernet)
	if err != nil || pkt.IPv4 == nil || pkt.BTH == nil {
		return
	}
	if k := pkt.BTH.Opcode().Info().Kind; k == proto.KindSend || k == proto.KindWrite {
		pkt.IPv4.SetECN(proto.ECNCE)
	}
}

func TestCNPOnCE(t *testing.T) {
	p, ia, ib := newInterceptPair(t, pairOpts{})
	ib.keep = true
	ia.mutate = markCE
	for i := 0; i < 4; i++ {
		mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: uint64(i), SGList: p.b.sge(0x8000, 4096)}}))
	}
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0x1000, 3000)}}))
	p.poll(p.b.rcq, 1)
	p.poll(p.a.scq, 1)
	cb := p.b.dev.Counters()
	// Three CE packets within the 50 µs interval of the fake clock: one CNP.
	if cb.CEReceived != 3 || cb.CNPsSent != 1 || cb.CNPsSuppressed != 2 {
		t.Fatalf("b: CE %d, CNPs sent %d, suppressed %d; want 3, 1, 2", cb.CEReceived, cb.CNPsSent, cb.CNPsSuppressed)
	}
	var cnp *proto.Packet
	for _, f := range ib.captured() {
		pkt, err := proto.Parse(f, proto.LinkEthernet)
		if err == nil && pkt.BTH != nil && pkt.BTH.Opcode() == proto.OpCNP {
			cnp = &pkt
		}
	}
	if cnp == nil {
		t.Fatal("no CNP on b's port")
	}
	if cnp.BTH.DestQP() != p.qa.QPN() || !cnp.BTH.BECN() || !cnp.ICRCValid() || cnp.IPv4.DSCP() != 48 ||
		len(cnp.Payload) != 0 {
		t.Fatalf("CNP: dest QP %#x (want %#x), BECN %v, ICRC ok %v, DSCP %d", cnp.BTH.DestQP(), p.qa.QPN(),
			cnp.BTH.BECN(), cnp.ICRCValid(), cnp.IPv4.DSCP())
	}
	if ca := p.a.dev.Counters(); ca.CNPsReceived != 1 || ca.RateDecreases != 0 {
		t.Fatalf("a: CNPs received %d, rate cuts %d (DCQCN is off by default)", ca.CNPsReceived, ca.RateDecreases)
	}
	if r := p.qa.Rate(); r != 0 {
		t.Fatalf("rate %v with DCQCN off", r)
	}
	// After the interval, CE gets a CNP again.
	p.clk.Advance(60 * time.Microsecond)
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 2, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0x1000, 10)}}))
	p.poll(p.b.rcq, 1)
	if cb := p.b.dev.Counters(); cb.CNPsSent != 2 {
		t.Fatalf("CNPs sent %d after the interval, want 2", cb.CNPsSent)
	}
}

func TestDCQCNCutsPacesAndRecovers(t *testing.T) {
	cfg := &rdma.DCQCNConfig{LineRate: 1e9, IncreasePeriod: 300 * time.Microsecond, ByteCounter: 1 << 30}
	p, ia, _ := newInterceptPair(t, pairOpts{dcqcn: cfg, cnpIntvl: -1})
	ia.mutate = markCE
	mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: 0, SGList: p.b.sge(0x8000, 64)}}))
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend, SGList: p.a.sge(0x1000, 64)}}))
	p.poll(p.b.rcq, 1)
	// One CNP: Rc = line x (1 - α/2) with α = 1023/1024 raised by g first.
	r1 := p.qa.Rate()
	if r1 < 0.49e9 || r1 > 0.51e9 {
		t.Fatalf("rate after one CNP %.3g, want about half the line rate", r1)
	}
	ia.mutate = nil
	// Now a 64 KiB WRITE at ~500 MB/s needs ~130 µs: with the clock
	// stopped the QP sends its first packet and then waits.
	tx0 := p.a.dev.Counters().TxPackets
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 9, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0x10000, 64<<10), RemoteAddr: 0x20000, RKey: p.b.mr.RKey}}))
	p.settle()
	ca := p.a.dev.Counters()
	if sent := ca.TxPackets - tx0; sent != 1 || ca.PacingStalls == 0 {
		t.Fatalf("sent %d packets with the clock stopped (pacing stalls %d), want 1", sent, ca.PacingStalls)
	}
	wantWC(t, p.poll(p.a.scq, 1)[0], 9, rdma.WCSuccess, rdma.WCRDMAWrite)
	// Recovery: timer-driven increases bring the rate back to the line rate.
	r2 := p.qa.Rate()
	if r2 != 0 && r2 < r1 {
		t.Fatalf("rate %.3g after the transfer fell below %.3g", r2, r1)
	}
	for i := 0; i < 200 && p.qa.Rate() != 0; i++ {
		p.clk.Advance(300 * time.Microsecond)
	}
	if r := p.qa.Rate(); r != 0 {
		t.Fatalf("rate %.3g after 60 ms without CNPs, want back at the line rate", r)
	}
	if ca := p.a.dev.Counters(); ca.RateDecreases != 1 || ca.RateRecoveries != 1 {
		t.Fatalf("cuts %d recoveries %d, want 1 and 1", ca.RateDecreases, ca.RateRecoveries)
	}
}
