package rdma_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/PacketFive/hinic/internal/rdma"
)

// splitSGE splits [addr, addr+size) into k SGEs of uneven sizes.
func splitSGE(n *node, addr uint64, size, k int) []rdma.SGE {
	if k <= 1 || size < k {
		return n.sge(addr, uint32(size))
	}
	var out []rdma.SGE
	rest := size
	for i := 0; i < k; i++ {
		l := rest / (k - i)
		if i == 0 {
			l = l/2 + 1
		}
		if i == k-1 {
			l = rest
		}
		out = append(out, rdma.SGE{Addr: addr, Length: uint32(l), LKey: n.mr.LKey})
		addr += uint64(l)
		rest -= l
	}
	return out
}

func TestOperations(t *testing.T) {
	type variant struct {
		mtu      int
		loopback bool
		ipv6     bool
	}
	variants := []variant{{1024, false, false}, {4096, false, false}, {1024, true, false}, {256, false, true}, {4096, true, true}}
	ops := []rdma.WROpcode{rdma.WRSend, rdma.WRSendWithImm, rdma.WRRDMAWrite, rdma.WRRDMAWriteWithImm, rdma.WRRDMARead}
	for _, v := range variants {
		name := fmt.Sprintf("mtu=%d/loopback=%v/ipv6=%v", v.mtu, v.loopback, v.ipv6)
		t.Run(name, func(t *testing.T) {
			p := newPair(t, pairOpts{mtu: v.mtu, loopback: v.loopback, ipv6: v.ipv6, inline: 256, memSize: 2 << 20})
			wrid := uint64(0)
			for _, op := range ops {
				for _, size := range []int{0, 1, v.mtu - 1, v.mtu, v.mtu + 1, 3*v.mtu + 5, 200001} {
					for _, sges := range []int{1, 3} {
						for _, inline := range []bool{false, true} {
							if inline && (op == rdma.WRRDMARead || size > 256) {
								continue
							}
							wrid++
							t.Run(fmt.Sprintf("%v/size=%d/sges=%d/inline=%v", op, size, sges, inline), func(t *testing.T) {
								runOp(t, p, op, size, sges, inline, wrid)
							})
						}
					}
				}
			}
			c := p.a.dev.Counters()
			if v.loopback && (c.LoopbackPackets == 0 || c.LoopbackPackets != c.TxPackets) {
				t.Errorf("loopback: %d of %d frames looped back", c.LoopbackPackets, c.TxPackets)
			}
			if !v.loopback && c.LoopbackPackets != 0 {
				t.Errorf("%d frames looped back between two devices", c.LoopbackPackets)
			}
		})
	}
}

func runOp(t *testing.T, p *pair, op rdma.WROpcode, size, sges int, inline bool, wrid uint64) {
	const srcAddr, dstAddr = 0x10000, 0x100000
	a, b := p.a, p.b
	local, remote := a.mem.Bytes(), b.mem.Bytes()
	src, dst := local[srcAddr:srcAddr+size], remote[dstAddr:dstAddr+size]
	if op == rdma.WRRDMARead {
		src, dst = remote[dstAddr:dstAddr+size], local[srcAddr:srcAddr+size]
	}
	fill(src, byte(wrid))
	clear(dst)
	// A guard byte after the destination must survive.
	guard := remote
	if op == rdma.WRRDMARead {
		guard = local
	}
	gi := dstAddr + size
	if op == rdma.WRRDMARead {
		gi = srcAddr + size
	}
	guard[gi] = 0xA5

	recv := op == rdma.WRSend || op == rdma.WRSendWithImm || op == rdma.WRRDMAWriteWithImm
	if recv {
		rwr := rdma.RecvWR{WRID: wrid + 1000, SGList: splitSGE(b, dstAddr, size+64, 2)}
		mustPost(t, p.qb.PostRecv([]rdma.RecvWR{rwr}))
	}
	flags := rdma.SendSignaled
	if inline {
		flags |= rdma.SendInline
	}
	wr := rdma.SendWR{WRID: wrid, Opcode: op, SendFlags: flags, ImmData: 0xC0FFEE00 | uint32(wrid&0xFF),
		SGList: splitSGE(a, srcAddr, size, sges), RemoteAddr: dstAddr, RKey: b.mr.RKey}
	mustPost(t, p.qa.PostSend([]rdma.SendWR{wr}))
	if inline {
		clear(src) // inline data was copied at post time
	}
	wcs := p.poll(a.scq, 1)
	wantOp := map[rdma.WROpcode]rdma.WCOpcode{rdma.WRSend: rdma.WCSend, rdma.WRSendWithImm: rdma.WCSend,
		rdma.WRRDMAWrite: rdma.WCRDMAWrite, rdma.WRRDMAWriteWithImm: rdma.WCRDMAWrite, rdma.WRRDMARead: rdma.WCRDMARead}[op]
	wantWC(t, wcs[0], wrid, rdma.WCSuccess, wantOp)
	if wcs[0].QPNum != p.qa.QPN() {
		t.Errorf("send WC QPNum %#x, want %#x", wcs[0].QPNum, p.qa.QPN())
	}
	if recv {
		rw := p.poll(b.rcq, 1)[0]
		rop := rdma.WCRecv
		if op == rdma.WRRDMAWriteWithImm {
			rop = rdma.WCRecvRDMAWithImm
		}
		wantWC(t, rw, wrid+1000, rdma.WCSuccess, rop)
		if rw.ByteLen != uint32(size) {
			t.Errorf("recv ByteLen %d, want %d", rw.ByteLen, size)
		}
		imm := op != rdma.WRSend
		if got := rw.WCFlags&rdma.WCWithImm != 0; got != imm || (imm && rw.ImmData != wr.ImmData) {
			t.Errorf("recv imm flag %v data %#x, want %v %#x", got, rw.ImmData, imm, wr.ImmData)
		}
		if rw.QPNum != p.qb.QPN() || rw.SrcQP != p.qa.QPN() {
			t.Errorf("recv QPNum %#x SrcQP %#x, want %#x %#x", rw.QPNum, rw.SrcQP, p.qb.QPN(), p.qa.QPN())
		}
	}
	if inline {
		fill(src, byte(wrid))
	}
	if !bytes.Equal(dst, src) {
		t.Fatalf("data mismatch")
	}
	if guard[gi] != 0xA5 {
		t.Fatalf("byte after the destination overwritten")
	}
	p.expectNone(a.scq, "send CQ")
	p.expectNone(b.rcq, "recv CQ")
}

func TestUnsignaledAndSigAll(t *testing.T) {
	for _, sigAll := range []bool{false, true} {
		t.Run(fmt.Sprintf("sqSigAll=%v", sigAll), func(t *testing.T) {
			p := newPair(t, pairOpts{sqSigAll: sigAll})
			var wrs []rdma.SendWR
			for i := range 10 {
				f := rdma.SendFlags(0)
				if i == 9 {
					f = rdma.SendSignaled
				}
				wrs = append(wrs, rdma.SendWR{WRID: uint64(i), Opcode: rdma.WRRDMAWrite, SendFlags: f,
					SGList: p.a.sge(0, 100), RemoteAddr: uint64(i * 100), RKey: p.b.mr.RKey})
			}
			mustPost(t, p.qa.PostSend(wrs))
			want := 1
			if sigAll {
				want = 10
			}
			wcs := p.poll(p.a.scq, want)
			for i, wc := range wcs {
				wantWC(t, wc, uint64(10-want+i), rdma.WCSuccess, rdma.WCRDMAWrite)
			}
			p.expectNone(p.a.scq, "send CQ")
			// The unsignaled WRs freed their slots: the queue takes a full load again.
			wrs = wrs[:0]
			for i := range p.o.sendWR {
				wrs = append(wrs, rdma.SendWR{WRID: uint64(100 + i), Opcode: rdma.WRRDMAWrite,
					SGList: p.a.sge(0, 8), RemoteAddr: 0, RKey: p.b.mr.RKey})
			}
			mustPost(t, p.qa.PostSend(wrs))
		})
	}
}

// TestOrderingAndMixedQueue posts a long mixed queue at once and checks the
// completions come back in order with the right data.
func TestOrderingAndMixedQueue(t *testing.T) {
	p := newPair(t, pairOpts{mtu: 1024, memSize: 4 << 20})
	ops := []rdma.WROpcode{rdma.WRSend, rdma.WRRDMAWrite, rdma.WRRDMARead, rdma.WRRDMAWriteWithImm, rdma.WRSendWithImm}
	var wrs []rdma.SendWR
	var recvs []rdma.RecvWR
	const n, slot = 200, 9000
	for i := range n {
		op := ops[i%len(ops)]
		size := 1 + i*41%slot
		src, dst := uint64(i*slot), uint64(2<<20+i*slot)
		if op == rdma.WRRDMARead {
			fill(p.b.mem.Bytes()[dst:dst+uint64(size)], byte(i))
		} else {
			fill(p.a.mem.Bytes()[src:src+uint64(size)], byte(i))
		}
		if op == rdma.WRSend || op == rdma.WRSendWithImm || op == rdma.WRRDMAWriteWithImm {
			recvs = append(recvs, rdma.RecvWR{WRID: uint64(i), SGList: p.b.sge(dst, slot)})
		}
		wrs = append(wrs, rdma.SendWR{WRID: uint64(i), Opcode: op, SendFlags: rdma.SendSignaled, ImmData: uint32(i),
			SGList: p.a.sge(src, uint32(size)), RemoteAddr: dst, RKey: p.b.mr.RKey})
	}
	mustPost(t, p.qb.PostRecv(recvs))
	mustPost(t, p.qa.PostSend(wrs))
	wcs := p.poll(p.a.scq, n)
	for i, wc := range wcs {
		if wc.WRID != uint64(i) || wc.Status != rdma.WCSuccess {
			t.Fatalf("completion %d: %+v", i, wc)
		}
	}
	rwcs := p.poll(p.b.rcq, len(recvs))
	for i, wc := range rwcs {
		if wc.WRID != recvs[i].WRID || wc.Status != rdma.WCSuccess {
			t.Fatalf("recv completion %d: %+v, want WRID %d", i, wc, recvs[i].WRID)
		}
	}
	for i := range n {
		size := 1 + i*41%slot
		src, dst := uint64(i*slot), uint64(2<<20+i*slot)
		if !bytes.Equal(p.a.mem.Bytes()[src:src+uint64(size)], p.b.mem.Bytes()[dst:dst+uint64(size)]) {
			t.Fatalf("message %d (%v): data mismatch", i, ops[i%len(ops)])
		}
	}
}
