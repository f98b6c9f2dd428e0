package rdma_test

import (
	"encoding/binary"
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

const allAccess = rdma.AccessLocalWrite | rdma.AccessRemoteWrite | rdma.AccessRemoteRead | rdma.AccessRemoteAtomic

func atomicOpts() pairOpts { return pairOpts{qpAccess: allAccess, mrAccess: allAccess} }

func word(m *rdma.HostMemory, addr uint64) uint64 {
	return binary.LittleEndian.Uint64(m.Bytes()[addr:])
}
func setWord(m *rdma.HostMemory, addr, v uint64) { binary.LittleEndian.PutUint64(m.Bytes()[addr:], v) }

// TestAtomics: CMP_AND_SWP that matches and that does not, and
// FETCH_AND_ADD; the target word changes as IBA 9.4.5 says, the original
// value lands in the requester's 8-byte buffer, completions carry the
// atomic opcodes and 8 bytes.
func TestAtomics(t *testing.T) {
	p := newPair(t, atomicOpts())
	const target, result = 0x800, 0x100
	setWord(p.b.mem, target, 41)
	steps := []struct {
		op            rdma.WROpcode
		compare, swap uint64
		wantOrig      uint64
		wantAfter     uint64
		wantWC        rdma.WCOpcode
	}{
		{rdma.WRAtomicCmpAndSwp, 41, 1000, 41, 1000, rdma.WCCompSwap},          // matches: swapped
		{rdma.WRAtomicCmpAndSwp, 41, 7, 1000, 1000, rdma.WCCompSwap},           // does not match: unchanged
		{rdma.WRAtomicFetchAndAdd, 24, 0, 1000, 1024, rdma.WCFetchAdd},         // adds
		{rdma.WRAtomicFetchAndAdd, ^uint64(0), 0, 1024, 1023, rdma.WCFetchAdd}, // wraps modulo 2^64
	}
	for i, s := range steps {
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: uint64(i), Opcode: s.op, SendFlags: rdma.SendSignaled,
			SGList: p.a.sge(result, 8), RemoteAddr: target, RKey: p.b.mr.RKey, CompareAdd: s.compare, Swap: s.swap}}))
		wc := p.poll(p.a.scq, 1)[0]
		wantWC(t, wc, uint64(i), rdma.WCSuccess, s.wantWC)
		if wc.ByteLen != 8 {
			t.Errorf("step %d: ByteLen %d, want 8", i, wc.ByteLen)
		}
		if got := word(p.a.mem, result); got != s.wantOrig {
			t.Errorf("step %d: original value %d, want %d", i, got, s.wantOrig)
		}
		if got := word(p.b.mem, target); got != s.wantAfter {
			t.Errorf("step %d: target holds %d, want %d", i, got, s.wantAfter)
		}
	}
	if c := p.b.dev.Counters(); c.AtomicsExecuted != uint64(len(steps)) {
		t.Errorf("AtomicsExecuted %d, want %d", c.AtomicsExecuted, len(steps))
	}
	if p.a.dev.QueryDevice().AtomicCap != rdma.AtomicCapHCA {
		t.Error("atomic_cap not reported")
	}
}

// TestAtomicsOutstanding posts 200 FETCH_ADDs at one word, far more than
// max_rd_atomic (4) allows in flight: every one executes exactly once, and
// each sees a distinct original value.
func TestAtomicsOutstanding(t *testing.T) {
	o := atomicOpts()
	o.rdAtomic = 4
	p := newPair(t, o)
	const target, n = 0x800, 200
	var wrs []rdma.SendWR
	for i := range n {
		wrs = append(wrs, rdma.SendWR{WRID: uint64(i), Opcode: rdma.WRAtomicFetchAndAdd, SendFlags: rdma.SendSignaled,
			SGList: p.a.sge(uint64(8*i), 8), RemoteAddr: target, RKey: p.b.mr.RKey, CompareAdd: 3})
	}
	mustPost(t, p.qa.PostSend(wrs))
	seen := map[uint64]bool{}
	for i, wc := range p.poll(p.a.scq, n) {
		wantWC(t, wc, uint64(i), rdma.WCSuccess, rdma.WCFetchAdd)
		orig := word(p.a.mem, uint64(8*i))
		if orig%3 != 0 || seen[orig] {
			t.Fatalf("atomic %d returned %d: a value twice, or not a multiple of 3", i, orig)
		}
		seen[orig] = true
	}
	if got := word(p.b.mem, target); got != 3*n {
		t.Fatalf("target holds %d after %d FETCH_ADDs of 3, want %d", got, n, 3*n)
	}
}

// TestAtomicReplay drops the first ATOMIC ACKNOWLEDGE: the requester
// retransmits after its timeout, the responder recognises the duplicate
// and answers from its replay cache without executing the atomic again.
func TestAtomicReplay(t *testing.T) {
	p, _, ib := newInterceptPair(t, atomicOpts())
	ib.setDrop(dropNth(1, opIs(proto.OpRCAtomicAcknowledge)))
	const target, result = 0x800, 0x100
	setWord(p.b.mem, target, 5)
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRAtomicFetchAndAdd, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(result, 8), RemoteAddr: target, RKey: p.b.mr.RKey, CompareAdd: 10}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCFetchAdd)
	if got := word(p.b.mem, target); got != 15 {
		t.Fatalf("target holds %d, want 15: the atomic ran more than once", got)
	}
	if got := word(p.a.mem, result); got != 5 {
		t.Fatalf("original value %d, want 5 (the replay must return the first result)", got)
	}
	ca, cb := p.a.dev.Counters(), p.b.dev.Counters()
	if cb.AtomicsExecuted != 1 || cb.AtomicReplays != 1 || ca.RetransmitTimeouts != 1 {
		t.Fatalf("executed %d, replays %d, timeouts %d; want 1, 1, 1", cb.AtomicsExecuted, cb.AtomicReplays, ca.RetransmitTimeouts)
	}
}

// TestAtomicErrors: a region without remote-atomic access is a remote
// access error; a QP that does not allow remote atomics answers with an
// invalid-request NAK. Either way the target word is untouched.
func TestAtomicErrors(t *testing.T) {
	cases := []struct {
		name string
		opts pairOpts
		want rdma.WCStatus
	}{
		{"MR without remote atomic", pairOpts{qpAccess: allAccess}, rdma.WCRemAccessErr},
		{"QP without remote atomic", pairOpts{mrAccess: allAccess}, rdma.WCRemInvReqErr},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, c.opts)
			setWord(p.b.mem, 0x800, 77)
			mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRAtomicCmpAndSwp, SendFlags: rdma.SendSignaled,
				SGList: p.a.sge(0x100, 8), RemoteAddr: 0x800, RKey: p.b.mr.RKey, CompareAdd: 77, Swap: 1}}))
			wantWC(t, p.poll(p.a.scq, 1)[0], 1, c.want, rdma.WCCompSwap)
			if got := word(p.b.mem, 0x800); got != 77 {
				t.Fatalf("target changed to %d", got)
			}
		})
	}
}
