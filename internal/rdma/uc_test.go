package rdma_test

import (
	"bytes"
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

// ucPair connects a UC QP on a to one on b.
func ucPair(t *testing.T, p *pair) (*rdma.QP, *rdma.QP) {
	t.Helper()
	mk := func(n *node) *rdma.QP {
		qp, err := n.dev.CreateQP(n.pd, rdma.QPInitAttr{SendCQ: n.scq, RecvCQ: n.rcq, QPType: rdma.QPTypeUC,
			Cap: rdma.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return qp
	}
	ua, ub := mk(p.a), mk(p.b)
	conn := func(qp, remote *rdma.QP, rn *node) {
		gid, _ := rn.dev.QueryGID(1)
		for _, s := range []struct {
			a    rdma.QPAttr
			mask rdma.QPAttrMask
		}{
			{rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1, QPAccessFlags: rdma.AccessRemoteWrite},
				rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrAccessFlags},
			{rdma.QPAttr{QPState: rdma.QPStateRTR, PathMTU: rdma.MTU1024, DestQPNum: remote.QPN(), RQPSN: 100,
				AHAttr: rdma.AHAttr{IsGlobal: true, DMAC: rn.mac, GRH: rdma.GlobalRoute{DGID: gid, SGIDIndex: 1}}},
				rdma.QPAttrState | rdma.QPAttrAV | rdma.QPAttrPathMTU | rdma.QPAttrDestQPN | rdma.QPAttrRQPSN},
			{rdma.QPAttr{QPState: rdma.QPStateRTS, SQPSN: 100}, rdma.QPAttrState | rdma.QPAttrSQPSN},
		} {
			if err := qp.Modify(&s.a, s.mask); err != nil {
				t.Fatal(err)
			}
		}
	}
	conn(ua, ub, p.b)
	conn(ub, ua, p.a)
	return ua, ub
}

func TestUCSendWriteAndLoss(t *testing.T) {
	p, ia, _ := newInterceptPair(t, pairOpts{})
	ua, ub := ucPair(t, p)
	if err := ua.PostSend([]rdma.SendWR{{Opcode: rdma.WRRDMARead, SGList: p.a.sge(0, 8)}}); !isErr(err, rdma.ErrInvalid) {
		t.Fatalf("READ on UC: %v", err)
	}
	fill(p.a.mem.Bytes()[0x1000:0x1000+3000], 4)
	src := p.a.mem.Bytes()[0x1000 : 0x1000+3000]
	// A 3-packet SEND and a WRITE with immediate arrive intact; the
	// sends complete without any ACK.
	for i := 0; i < 3; i++ {
		mustPost(t, ub.PostRecv([]rdma.RecvWR{{WRID: uint64(i), SGList: p.b.sge(0x8000+uint64(i)*0x1000, 4096)}}))
	}
	mustPost(t, ua.PostSend([]rdma.SendWR{
		{WRID: 1, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0x1000, 3000)},
		{WRID: 2, Opcode: rdma.WRRDMAWriteWithImm, ImmData: 77, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0x1000, 3000),
			RemoteAddr: 0x20000, RKey: p.b.mr.RKey},
	}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCSend)
	wantWC(t, p.poll(p.a.scq, 1)[0], 2, rdma.WCSuccess, rdma.WCRDMAWrite)
	wcs := p.poll(p.b.rcq, 2)
	wantWC(t, wcs[0], 0, rdma.WCSuccess, rdma.WCRecv)
	wantWC(t, wcs[1], 1, rdma.WCSuccess, rdma.WCRecvRDMAWithImm)
	if wcs[0].ByteLen != 3000 || wcs[1].ImmData != 77 {
		t.Fatalf("wcs %+v", wcs)
	}
	if !bytes.Equal(p.b.mem.Bytes()[0x8000:0x8000+3000], src) || !bytes.Equal(p.b.mem.Bytes()[0x20000:0x20000+3000], src) {
		t.Fatal("data differs")
	}
	if c := p.a.dev.Counters(); c.AcksReceived != 0 || c.Retransmits != 0 {
		t.Fatalf("UC saw ACKs %d, retransmits %d", c.AcksReceived, c.Retransmits)
	}
	// Lose the middle packet of the next SEND: the message is dropped,
	// its receive WR kept; the SEND after it lands in that WR.
	dropped := false
	ia.setDrop(func(pkt *proto.Packet) bool {
		if !dropped && pkt.BTH != nil && pkt.BTH.Opcode() == proto.OpUCSendMiddle {
			dropped = true
			return true
		}
		return false
	})
	mustPost(t, ua.PostSend([]rdma.SendWR{
		{WRID: 3, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0x1000, 3000)},
		{WRID: 4, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0x1000, 100)},
	}))
	p.poll(p.a.scq, 2)
	wc := p.poll(p.b.rcq, 1)[0]
	wantWC(t, wc, 2, rdma.WCSuccess, rdma.WCRecv)
	if wc.ByteLen != 100 {
		t.Fatalf("the surviving message has %d bytes, want 100", wc.ByteLen)
	}
	p.expectNone(p.b.rcq, "the dropped message")
	if c := p.b.dev.Counters(); c.UCDropped == 0 || c.OutOfSequence == 0 {
		t.Fatalf("UC drops %d, out of sequence %d", c.UCDropped, c.OutOfSequence)
	}
	// No receive WR: the SEND is lost silently, no RNR.
	mustPost(t, ua.PostSend([]rdma.SendWR{{WRID: 5, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: p.a.sge(0x1000, 10)}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 5, rdma.WCSuccess, rdma.WCSend)
	p.settle()
	if c := p.b.dev.Counters(); c.RNRNAKsSent != 0 {
		t.Fatalf("RNR NAKs on UC: %d", c.RNRNAKsSent)
	}
	if ua.State() != rdma.QPStateRTS || ub.State() != rdma.QPStateRTS {
		t.Fatalf("states %v %v", ua.State(), ub.State())
	}
}
