package integration

import (
	"bytes"
	"testing"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/rdma"
)

// newUDQPAV creates a UD QP in e's PD whose send WQEs have room for an
// address vector (ABI 1.3), in RTS.
func (e *udEnd) newUDQPAV(t *testing.T) *guestsim.QP {
	t.Helper()
	return e.udQP(t, guestsim.QPConfig{PD: e.pd, SendCQ: e.scq, RecvCQ: e.rcq, Type: guestsim.QPTypeUD, AV: true}, 1)
}

// avTo is the address vector of r's GID 1 (its IPv4 address).
func avTo(r *udEnd) device.AHAttr {
	return device.AHAttr{IsGlobal: 1, PortNum: 1, DMAC: r.mac, DGID: r.gid, SGIDIndex: 1, HopLimit: 64}
}

// TestUDSendAV: UD datagrams whose WQE carries the address vector
// (SendAV) reach the peer, from SGEs and inline, with the sender's GID
// in the GRH area and its QPN in the CQE; the device keeps no AH for
// them (the PD deallocates once its objects are gone).
func TestUDSendAV(t *testing.T) {
	tb := newTestbed(t, 2)
	ctx := testCtx(t)
	a := newUDEnd(t, tb.guests[0], tb.cfgs[0].MAC)
	b := newUDEnd(t, tb.guests[1], tb.cfgs[1].MAC)
	qa := a.newUDQPAV(t)

	for i, inline := range []bool{false, true} {
		n := 700
		if inline {
			n = 60 // within the QP's max_inline (64)
		}
		want := fill(t, a.g, a.buf, n, byte(3+i))
		recvAt := b.buf + 8192
		b.qp.PostRecv(uint64(100+i), []device.SGE{{Addr: recvAt, Length: 1024, LKey: b.lkey}})
		waitRecvTaken(t, b.qp)
		w := device.SendWQE{WRID: uint64(1 + i), Opcode: uint8(rdma.WRSendWithImm), SendFlags: uint16(rdma.SendSignaled),
			ImmData: uint32(0x5a00 + i), AH: 0xdead, RemoteQPN: b.qp.QPN, RemoteQKey: udQKey}
		if inline {
			qa.PostSendAV(w, avTo(b), nil, want)
		} else {
			qa.PostSendAV(w, avTo(b), []device.SGE{{Addr: a.buf, Length: uint32(n), LKey: a.lkey}}, nil)
		}
		wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, uint64(1+i))
		e := wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, uint64(100+i))
		if e.ByteLen != rdma.GRHSize+uint32(n) || e.SrcQP != qa.QPN || e.ImmData != uint32(0x5a00+i) {
			t.Fatalf("inline %v: recv CQE %+v", inline, e)
		}
		checkGRH(t, read(t, b.g, recvAt, rdma.GRHSize), a.gid, b.gid)
		if got := read(t, b.g, recvAt+rdma.GRHSize, n); !bytes.Equal(got, want) {
			t.Fatalf("inline %v: payload differs", inline)
		}
	}
	if st := tb.srv.Status().VNICs[0]; st.Objects.AHs != 0 || st.Counters.WQEErrors != 0 {
		t.Errorf("after AV sends: %d AHs, %d WQE errors; want none", st.Objects.AHs, st.Counters.WQEErrors)
	}
	// Every per-request AH released its PD reference.
	for _, d := range []struct {
		op     uint16
		handle uint32
	}{{device.CmdDestroyQP, qa.QPN}, {device.CmdDestroyQP, a.qp.QPN}, {device.CmdDeregMR, a.lkey},
		{device.CmdDeallocPD, a.pd}} {
		if err := a.g.Destroy(ctx, d.op, d.handle); err != nil {
			t.Fatalf("opcode %d on %#x: %v", d.op, d.handle, err)
		}
	}
}

// TestUDSendBadAV: a WQE whose address vector the device cannot use
// completes with LOC_QP_OP_ERR and the QP carries on; SendAV on an RC QP
// is refused the same way; a WQE whose SGEs do not fit after the AV is
// malformed (QP_FATAL for that QP only). The peer's vNIC and the other
// QPs keep working.
func TestUDSendBadAV(t *testing.T) {
	tb := newTestbed(t, 2)
	a := newUDEnd(t, tb.guests[0], tb.cfgs[0].MAC)
	b := newUDEnd(t, tb.guests[1], tb.cfgs[1].MAC)
	qa := a.newUDQPAV(t)
	sge := []device.SGE{{Addr: a.buf, Length: 64, LKey: a.lkey}}
	send := func(wrID uint64) device.SendWQE {
		return device.SendWQE{WRID: wrID, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled),
			RemoteQPN: b.qp.QPN, RemoteQKey: udQKey}
	}
	good := avTo(b)
	ipv6 := good
	ipv6.DGID = [16]byte{0: 0xfd, 15: 2}
	noMAC := good
	noMAC.DMAC = [6]byte{}
	for i, c := range []struct {
		name string
		av   device.AHAttr
		op   rdma.WROpcode
	}{
		{"no GRH", device.AHAttr{PortNum: 1, DMAC: b.mac, DGID: b.gid, SGIDIndex: 1}, rdma.WRSend},
		{"SGID index outside the table", func() device.AHAttr { v := good; v.SGIDIndex = 9; return v }(), rdma.WRSend},
		{"IPv6 DGID from an IPv4 SGID", ipv6, rdma.WRSend},
		{"remote unicast without a DMAC", noMAC, rdma.WRSend},
		{"port 2", func() device.AHAttr { v := good; v.PortNum = 2; return v }(), rdma.WRSend},
		{"RDMA WRITE", good, rdma.WRRDMAWrite},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := send(uint64(10 + i))
			w.Opcode = uint8(c.op)
			qa.PostSendAV(w, c.av, sge, nil)
			e := wantCQE(t, a.scq, rdma.WCLocQPOpErr, wcOpcode(c.op), uint64(10+i))
			if e.QPNum != qa.QPN {
				t.Errorf("error CQE %+v: QP %d, want %d", e, e.QPNum, qa.QPN)
			}
		})
	}
	// The QP carries on: a good AV reaches the peer.
	b.qp.PostRecv(50, []device.SGE{{Addr: b.buf, Length: 1024, LKey: b.lkey}})
	waitRecvTaken(t, b.qp)
	qa.PostSendAV(send(20), good, sge, nil)
	wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 20)
	wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 50)

	// SendAV on a connected QP: an error completion, then the QP works.
	t.Run("RC QP", func(t *testing.T) {
		ra, rb := connectPair(t, tb, false)
		ra.qp.PostSendAV(device.SendWQE{WRID: 30, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
			good, []device.SGE{{Addr: ra.buf, Length: 64, LKey: ra.lkey}}, nil)
		wantCQE(t, ra.scq, rdma.WCLocQPOpErr, rdma.WCSend, 30)
		rb.qp.PostRecv(31, []device.SGE{{Addr: rb.buf, Length: 4096, LKey: rb.lkey}})
		ra.qp.PostSend(device.SendWQE{WRID: 32, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
			[]device.SGE{{Addr: ra.buf, Length: 64, LKey: ra.lkey}}, nil)
		wantCQE(t, ra.scq, rdma.WCSuccess, rdma.WCSend, 32)
		wantCQE(t, rb.rcq, rdma.WCSuccess, rdma.WCRecv, 31)
	})

	// a.qp's WQEs have room for the header and four SGEs (128 bytes):
	// after an AV, two SGEs do not fit.
	t.Run("SGEs past the stride", func(t *testing.T) {
		a.qp.PostSendAV(send(40), good, []device.SGE{sge[0], sge[0]}, nil)
		ev := waitEvent(t, a.g, device.EvQPFatal)
		if ev.Handle != a.qp.QPN || ev.Data != device.QPFatalWQE {
			t.Fatalf("event %+v: want QP_FATAL for QP %d, malformed WQE", ev, a.qp.QPN)
		}
		b.qp.PostRecv(51, []device.SGE{{Addr: b.buf, Length: 1024, LKey: b.lkey}})
		waitRecvTaken(t, b.qp)
		qa.PostSendAV(send(41), good, sge, nil)
		wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 41)
		wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 51)
	})
	stillServes(t, b.g)
	if n := tb.srv.Status().VNICs[1].Counters.WQEErrors; n != 0 {
		t.Errorf("the peer's vNIC counted %d WQE errors", n)
	}
}

func wcOpcode(op rdma.WROpcode) rdma.WCOpcode {
	if op == rdma.WRRDMAWrite {
		return rdma.WCRDMAWrite
	}
	return rdma.WCSend
}
