package rdma_test

import (
	"bytes"
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma/rdmatest"
)

// An InfiniBand RC WRITE whose SLID is not the QP's peer's is dropped
// and counted, as rxe's check_addr drops a RoCE packet from a foreign
// IP: a port that guesses a QPN, a PSN and an R_Key cannot write into
// the QP's MR. The same packet from the peer's LID lands.
func TestIBForgedWriteFromForeignLID(t *testing.T) {
	a, b, link, _, devs := newIBPair(t)
	_, qb := connectRC(t, a, b, 8)
	payload := bytes.Repeat([]byte("forged!!"), 8)
	write := func(slid uint16) []byte {
		f := proto.PacketFields{Link: proto.LinkIB,
			LRH:  proto.LRHFields{DLID: 2, SLID: slid},
			BTH:  proto.BTHFields{Opcode: proto.OpRCWriteOnly, PKey: 0xFFFF, DestQP: qb.QPN(), PSN: 7, AckReq: true},
			RETH: proto.RETHFields{VA: 0x30000, RKey: b.mr.RKey, DMALength: uint32(len(payload))}, Payload: payload}
		buf := make([]byte, f.Len())
		n, err := f.Encode(buf)
		if err != nil {
			t.Fatal(err)
		}
		return buf[:n]
	}
	b.dev.Deliver(write(3)) // LID 3: a port that is not qb's peer
	rdmatest.Settle(devs, link)
	if c := b.dev.Counters(); c.RxAddrMismatch != 1 {
		t.Fatalf("forged WRITE from LID 3: RxAddrMismatch %d, want 1", c.RxAddrMismatch)
	}
	if bytes.Contains(b.mem.Bytes()[0x30000:0x30000+len(payload)], []byte("forged")) {
		t.Fatal("a WRITE from a foreign LID landed in the MR")
	}
	b.dev.Deliver(write(1)) // LID 1: qb's peer
	rdmatest.Settle(devs, link)
	if !bytes.Equal(b.mem.Bytes()[0x30000:0x30000+len(payload)], payload) {
		t.Fatal("the same WRITE from the peer's LID did not land")
	}
	if c := b.dev.Counters(); c.RxAddrMismatch != 1 {
		t.Fatalf("RxAddrMismatch %d after the peer's WRITE, want still 1", c.RxAddrMismatch)
	}
}
