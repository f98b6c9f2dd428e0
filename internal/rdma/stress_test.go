package rdma_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/rdma/rdmatest"
)

// TestRandomTraffic sends random RC messages (SEND, WRITE, WRITE_WITH_IMM,
// READ; sizes log-uniform from 1 B to 1 MiB) between two devices over an
// in-memory wire, with and without seeded faults (drop, duplicate, reorder,
// corrupt), at MTU 1024 and 4096. Every message must complete exactly once,
// in order, with the right data; corrupted frames must all be caught by the
// ICRC. The fake clock moves only when both devices are quiescent, so
// retransmission timeouts cost no wall time and a run is reproducible.
//
// The full run is 10,000 messages per configuration (6-10 s in all on two
// cores); -short runs 1,000 of at most 64 KiB, and the race detector, which
// slows the engine five to tenfold, 2,000 of at most 256 KiB.
func TestRandomTraffic(t *testing.T) {
	n, maxSize := 10000, 1<<20
	switch {
	case testing.Short():
		n, maxSize = 1000, 64<<10
	case raceEnabled:
		n, maxSize = 2000, 256<<10
	}
	faulty := rdmatest.Faults{Drop: 0.01, Duplicate: 0.005, Reorder: 0.01, Corrupt: 0.005}
	for _, mtu := range []int{1024, 4096} {
		for _, withFaults := range []bool{false, true} {
			name := fmt.Sprintf("mtu=%d/faults=%v", mtu, withFaults)
			t.Run(name, func(t *testing.T) {
				f := rdmatest.Faults{}
				if withFaults {
					f = faulty
				}
				start := time.Now()
				st := runTraffic(t, mtu, f, int64(mtu)*7+1, n, maxSize)
				t.Logf("%d messages, %.1f MiB in %v; %s", n, float64(st.bytes)/(1<<20), time.Since(start).Round(time.Millisecond), st.summary)
			})
		}
	}
}

type trafficStats struct {
	bytes   int64
	summary string
}

func runTraffic(t *testing.T, mtu int, faults rdmatest.Faults, seed int64, n, maxSize int) trafficStats {
	const slots = 16
	slotSize := maxSize
	p := newPair(t, pairOpts{mtu: mtu, faults: faults, seed: seed, memSize: slots * slotSize,
		sendWR: slots, recvWR: slots, cqe: 4 * slots, rdAtomic: 8})
	rng := rand.New(rand.NewSource(seed))
	random := make([]byte, 2*maxSize)
	rng.Read(random)
	pattern := func(m, size int) []byte {
		off := m * 7919 % (len(random) - maxSize)
		return random[off : off+size]
	}
	ops := []rdma.WROpcode{rdma.WRSend, rdma.WRRDMAWrite, rdma.WRRDMAWriteWithImm, rdma.WRRDMARead}
	type msg struct {
		op               rdma.WROpcode
		size             int
		needRecv         bool
		sendDone, rcvDne bool
	}
	msgs := make([]msg, n)
	var total int64
	for i := range msgs {
		size := int(math.Exp(rng.Float64() * math.Log(float64(maxSize))))
		size = min(max(size, 1), maxSize)
		op := ops[rng.Intn(len(ops))]
		msgs[i] = msg{op: op, size: size, needRecv: op == rdma.WRSend || op == rdma.WRRDMAWriteWithImm}
		total += int64(size)
	}
	slotAddr := func(m int) uint64 { return uint64(m%slots) * uint64(slotSize) }
	aMem, bMem := p.a.mem.Bytes(), p.b.mem.Bytes()
	var recvOrder []int // messages whose receive completions are expected, in order
	next, fully, sendNext := 0, 0, 0
	wcs := make([]rdma.WC, 2*slots)
	fires := 0
	for fully < n {
		for next < n && next-fully < slots {
			m := &msgs[next]
			addr := slotAddr(next)
			src := aMem
			if m.op == rdma.WRRDMARead {
				src = bMem
			}
			copy(src[addr:], pattern(next, m.size))
			if m.needRecv {
				mustPost(t, p.qb.PostRecv([]rdma.RecvWR{{WRID: uint64(next), SGList: p.b.sge(addr, uint32(slotSize))}}))
				recvOrder = append(recvOrder, next)
			}
			mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: uint64(next), Opcode: m.op, SendFlags: rdma.SendSignaled,
				ImmData: uint32(next), SGList: p.a.sge(addr, uint32(m.size)), RemoteAddr: addr, RKey: p.b.mr.RKey}}))
			next++
		}
		p.settle()
		progress := false
		for k := p.a.scq.Poll(wcs); k > 0; k = p.a.scq.Poll(wcs) {
			progress = true
			for _, wc := range wcs[:k] {
				if wc.Status != rdma.WCSuccess || wc.WRID != uint64(sendNext) {
					t.Fatalf("send completion %+v (%v), want WRID %d success", wc, wc.Status, sendNext)
				}
				m := &msgs[sendNext]
				addr := slotAddr(sendNext)
				switch m.op {
				case rdma.WRRDMAWrite:
					if !bytes.Equal(bMem[addr:addr+uint64(m.size)], pattern(sendNext, m.size)) {
						t.Fatalf("message %d (WRITE %d B): remote data mismatch", sendNext, m.size)
					}
				case rdma.WRRDMARead:
					if !bytes.Equal(aMem[addr:addr+uint64(m.size)], pattern(sendNext, m.size)) {
						t.Fatalf("message %d (READ %d B): local data mismatch", sendNext, m.size)
					}
				}
				m.sendDone = true
				sendNext++
			}
		}
		for k := p.b.rcq.Poll(wcs); k > 0; k = p.b.rcq.Poll(wcs) {
			progress = true
			for _, wc := range wcs[:k] {
				if len(recvOrder) == 0 {
					t.Fatalf("unexpected receive completion %+v", wc)
				}
				id := recvOrder[0]
				recvOrder = recvOrder[1:]
				m := &msgs[id]
				if wc.Status != rdma.WCSuccess || wc.WRID != uint64(id) || int(wc.ByteLen) != m.size {
					t.Fatalf("receive completion %+v (%v), want WRID %d, %d bytes", wc, wc.Status, id, m.size)
				}
				if m.op == rdma.WRRDMAWriteWithImm && (wc.Opcode != rdma.WCRecvRDMAWithImm || wc.ImmData != uint32(id)) {
					t.Fatalf("receive completion %+v: want RECV_RDMA_WITH_IMM imm %d", wc, id)
				}
				if m.op == rdma.WRSend && (wc.Opcode != rdma.WCRecv || wc.WCFlags != 0) {
					t.Fatalf("receive completion %+v: want plain RECV", wc)
				}
				addr := slotAddr(id)
				if !bytes.Equal(bMem[addr:addr+uint64(m.size)], pattern(id, m.size)) {
					t.Fatalf("message %d (%v %d B): received data mismatch", id, m.op, m.size)
				}
				m.rcvDne = true
			}
		}
		for fully < next && msgs[fully].sendDone && (!msgs[fully].needRecv || msgs[fully].rcvDne) {
			fully++
		}
		if !progress && fully < n {
			if _, ok := p.clk.AdvanceToNext(); !ok {
				t.Fatalf("stuck at message %d of %d with no timer pending; counters A %+v B %+v",
					fully, n, p.a.dev.Counters(), p.b.dev.Counters())
			}
			if fires++; fires > 20*n {
				t.Fatalf("%d timer firings for %d messages", fires, n)
			}
		}
	}
	p.settle()
	p.expectNone(p.a.scq, "send CQ after the run")
	p.expectNone(p.b.rcq, "receive CQ after the run")
	ca, cb := p.a.dev.Counters(), p.b.dev.Counters()
	ab, ba := p.link.Stats()
	// Every corrupted frame fails its ICRC check, unless the receive
	// queue dropped it before it was checked (RxDropped: a burst of a
	// full window both ways while the machine is loaded).
	got, want, dropped := ca.RxICRCErrors+cb.RxICRCErrors, ab.Corrupted+ba.Corrupted, ca.RxDropped+cb.RxDropped
	if got > want || got+dropped < want {
		t.Fatalf("ICRC errors %d, corrupted frames %d, receive drops %d; A %+v B %+v", got, want, dropped, ca, cb)
	}
	if faults == (rdmatest.Faults{}) {
		if ca.Retransmits+cb.Retransmits != 0 || ca.RxDropped+cb.RxDropped != 0 {
			t.Fatalf("clean wire: %d retransmits, %d receive drops", ca.Retransmits+cb.Retransmits, ca.RxDropped+cb.RxDropped)
		}
	} else if ab.Dropped+ba.Dropped == 0 || ab.Corrupted+ba.Corrupted == 0 || ab.Reordered+ba.Reordered == 0 || ab.Duplicated+ba.Duplicated == 0 {
		t.Fatalf("faults not exercised: %+v %+v", ab, ba)
	}
	if qs := p.qa.State(); qs != rdma.QPStateRTS {
		t.Fatalf("requester QP in %v", qs)
	}
	return trafficStats{bytes: total, summary: fmt.Sprintf(
		"wire faults drop %d dup %d reorder %d corrupt %d; timer firings %d; retransmits %d (timeouts %d, seq NAKs %d, READ gaps %d); duplicates %d, READ replays %d, ICRC errors %d",
		ab.Dropped+ba.Dropped, ab.Duplicated+ba.Duplicated, ab.Reordered+ba.Reordered, ab.Corrupted+ba.Corrupted, fires,
		ca.Retransmits, ca.RetransmitTimeouts, ca.SeqNAKsReceived, ca.ReadGapRetries, cb.Duplicates, cb.ReadReplays,
		ca.RxICRCErrors+cb.RxICRCErrors)}
}
