package integration

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/rdma"
)

// FuzzGuestRings: the SQ and RQ rings and producer indices of a QP are
// the guest's (a process's, once hicain_ib maps them into it) and may
// hold any bytes. The device parses them (serviceSQ, serviceRQ) with no
// trust: whatever they hold, the backend must not panic, the guest's
// vNIC must not go fatal (a QP goes to ERR at worst), the peer guest's
// RAM must not change (its MR grants no remote access, and it posts no
// receives), and both vNICs must keep serving. Each input gets a fresh
// backend, a few hundred milliseconds: run it with a short
// -fuzzminimizetime.
func FuzzGuestRings(f *testing.F) {
	wqe := func(op uint8, nsge uint8, flags uint16, inl uint32, lkey uint32, addr uint64, ln uint32) []byte {
		b := make([]byte, 64+16)
		b[8], b[9] = op, nsge
		binary.LittleEndian.PutUint16(b[10:], flags)
		binary.LittleEndian.PutUint32(b[28:], inl)
		binary.LittleEndian.PutUint64(b[64:], addr)
		binary.LittleEndian.PutUint32(b[72:], ln)
		binary.LittleEndian.PutUint32(b[76:], lkey)
		return b
	}
	// A well-formed SEND (RNR at the peer), an unknown opcode, too many
	// SGEs, an inline length beyond the stride, a signaled WRITE of an
	// unregistered lkey, then indices beyond the depths.
	f.Add(wqe(uint8(rdma.WRSend), 1, uint16(rdma.SendSignaled), 0, 1, 0x10000, 64), []byte{}, uint32(1), uint32(0))
	f.Add(wqe(0xee, 0, uint16(rdma.SendSignaled), 0, 0, 0, 0), []byte{}, uint32(1), uint32(0))
	f.Add(wqe(uint8(rdma.WRSend), 255, 0, 0, 0, 0, 0), []byte{}, uint32(1), uint32(0))
	f.Add(wqe(uint8(rdma.WRSend), 0, uint16(rdma.SendInline), 1<<20, 0, 0, 0), []byte{}, uint32(1), uint32(0))
	f.Add(wqe(uint8(rdma.WRRDMAWrite), 1, uint16(rdma.SendSignaled), 0, 0x1234, 0, 4096), []byte{}, uint32(1), uint32(0))
	// ABI 1.10: a BIND_MW of a guessed window over a huge range, a
	// LOCAL_INV and a SEND_WITH_INV of guessed keys, an ATOMIC_WRITE of
	// an unregistered rkey (fields at the header's offsets: rkey 24,
	// imm 12, remote_addr 16, compare_add 32, swap 40).
	bind := wqe(device.WRBindMW, 0, uint16(rdma.SendSignaled), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(bind[12:], 0x80000101)
	binary.LittleEndian.PutUint32(bind[24:], 0x80000100)
	binary.LittleEndian.PutUint64(bind[32:], ^uint64(0))
	binary.LittleEndian.PutUint64(bind[40:], uint64(rdma.AccessRemoteWrite)<<32|1)
	inv := wqe(device.WRLocalInv, 0, uint16(rdma.SendSignaled), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(inv[12:], 0x80000100)
	sinv := wqe(device.WRSendInv, 1, uint16(rdma.SendSignaled), 0, 1, 0x10000, 64)
	binary.LittleEndian.PutUint32(sinv[12:], 0x80000100)
	aw := wqe(device.WRAtomicWrite, 0, uint16(rdma.SendSignaled), 0, 0, 0, 0)
	binary.LittleEndian.PutUint64(aw[16:], 0x10000)
	binary.LittleEndian.PutUint32(aw[24:], 0x1234)
	for _, w := range [][]byte{bind, inv, sinv, aw} {
		f.Add(w, []byte{}, uint32(1), uint32(0))
	}
	f.Add([]byte{}, []byte{1, 2, 3, 4, 5, 6, 7, 8, 200, 0, 0, 0}, uint32(0), uint32(1))
	f.Add([]byte{}, []byte{}, uint32(1000), uint32(70))
	f.Fuzz(func(t *testing.T, sq, rq []byte, sqProd, rqProd uint32) {
		// A hang (of the device or of its teardown) becomes a crash
		// that names the input; fuzzing alone would only stall.
		wd := time.AfterFunc(15*time.Second, func() {
			buf := make([]byte, 1<<20)
			os.Stderr.Write(buf[:runtime.Stack(buf, true)])
			panic(fmt.Sprintf("hang: sq=%x rq=%x sqProd=%d rqProd=%d", sq, rq, sqProd, rqProd))
		})
		t.Cleanup(func() { wd.Stop() })
		tb := newTestbed(t, 2)
		a, _ := connectPairAccess(t, tb, false, uint32(rdma.AccessLocalWrite))
		peer := tb.guests[1]
		before := make([]byte, testRAM)
		if err := peer.RAM().ReadAt(before, 0); err != nil {
			t.Fatal(err)
		}
		if err := a.qp.WriteRings(sq, rq); err != nil {
			t.Fatal(err)
		}
		a.qp.SetRQProd(rqProd)
		a.qp.SetSQProd(sqProd)
		// Let the WQEs run, then stop the QP: DESTROY_QP runs after the
		// doorbells in the session's order. A late frame can only make
		// the check below miss a write, never fail without one.
		time.Sleep(10 * time.Millisecond)
		if err := a.g.Destroy(testCtx(t), device.CmdDestroyQP, a.qp.QPN); err != nil {
			t.Fatalf("DESTROY_QP: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
		after := make([]byte, testRAM)
		if err := peer.RAM().ReadAt(after, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Error("the peer guest's RAM changed")
		}
		if a.g.DevStatus()&device.DevFatal != 0 {
			t.Error("the guest's vNIC went fatal over one QP's rings")
		}
		a.scq.Poll()
		a.rcq.Poll()
		stillServes(t, a.g)
		stillServes(t, peer)
	})
}
