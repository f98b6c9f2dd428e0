package rdma_test

import (
	"encoding/binary"
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

// TestAtomicWrite: IBA 1.5 RDMA ATOMIC WRITE on the wire (RC_ATOMIC_WRITE
// with a RETH of DMA length 8 and the 8-byte value, answered by a READ
// RESPONSE ONLY without payload), the word replaced, the completion
// opcode, and through a window as well.
func TestAtomicWrite(t *testing.T) {
	o := mwOpts()
	o.inline = 64
	p, ia, ib := newInterceptPair(t, o)
	for _, ip := range []*interceptPort{ia, ib} {
		ip.mu.Lock()
		ip.keep = true
		ip.mu.Unlock()
	}
	binary.LittleEndian.PutUint64(p.a.mem.Bytes()[0x40:], 0x1122334455667788)
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRAtomicWrite, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0x40, 8), RemoteAddr: 0x3000, RKey: p.b.mr.RKey}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCAtomicWrite)
	if v := binary.LittleEndian.Uint64(p.b.mem.Bytes()[0x3000:]); v != 0x1122334455667788 {
		t.Fatalf("target word %#x", v)
	}
	var req, resp int
	for _, f := range ia.captured() {
		pkt, err := proto.Parse(f, proto.LinkEthernet)
		if err != nil || pkt.BTH.Opcode() != proto.OpRCAtomicWrite {
			continue
		}
		req++
		// Ethernet 14 + IPv4 20 + UDP 8, BTH 12, RETH 16, then the value.
		if f[42] != 0x1D || binary.BigEndian.Uint64(f[54:]) != 0x3000 ||
			binary.BigEndian.Uint32(f[62:]) != p.b.mr.RKey || binary.BigEndian.Uint32(f[66:]) != 8 ||
			binary.LittleEndian.Uint64(f[70:]) != 0x1122334455667788 || len(pkt.Payload) != 8 {
			t.Fatalf("ATOMIC WRITE frame % x", f)
		}
	}
	for _, f := range ib.captured() {
		pkt, err := proto.Parse(f, proto.LinkEthernet)
		if err == nil && pkt.BTH.Opcode() == proto.OpRCReadResponseOnly {
			resp++
			if len(pkt.Payload) != 0 || pkt.AETH.Type() != proto.AckTypeACK {
				t.Fatalf("ATOMIC WRITE response with %d bytes", len(pkt.Payload))
			}
		}
	}
	if req != 1 || resp != 1 {
		t.Fatalf("%d requests, %d responses", req, resp)
	}

	// Inline, through a type 2 window.
	mw := p.b.allocMW(t, rdma.MWType2)
	key, wc := p.bind(p.qb, p.b, mw, 0x3000, 8, rdma.AccessRemoteWrite)
	wantWC(t, wc, 77, rdma.WCSuccess, rdma.WCBindMW)
	binary.LittleEndian.PutUint64(p.a.mem.Bytes()[0x48:], 42)
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 2, Opcode: rdma.WRAtomicWrite, SendFlags: rdma.SendSignaled | rdma.SendInline,
		SGList: []rdma.SGE{{Addr: 0x48, Length: 8}}, RemoteAddr: 0x3000, RKey: key}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 2, rdma.WCSuccess, rdma.WCAtomicWrite)
	if v := binary.LittleEndian.Uint64(p.b.mem.Bytes()[0x3000:]); v != 42 {
		t.Fatalf("target word %d after the windowed write", v)
	}
	// The value in CompareAdd, no data.
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 3, Opcode: rdma.WRAtomicWrite, SendFlags: rdma.SendSignaled,
		RemoteAddr: 0x3000, RKey: key, CompareAdd: 0xfeedface}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 3, rdma.WCSuccess, rdma.WCAtomicWrite)
	if v := binary.LittleEndian.Uint64(p.b.mem.Bytes()[0x3000:]); v != 0xfeedface {
		t.Fatalf("target word %#x after the write of CompareAdd", v)
	}
	if c := p.b.dev.Counters(); c.AtomicWrites != 3 {
		t.Fatalf("AtomicWrites %d", c.AtomicWrites)
	}
}

// TestAtomicWriteDuplicate: a duplicated ATOMIC WRITE is answered again
// and not executed twice (the word written meanwhile keeps its value).
func TestAtomicWriteDuplicate(t *testing.T) {
	p, ia, _ := newInterceptPair(t, mwOpts())
	var dup []byte
	ia.mu.Lock()
	ia.mutate = func(f []byte) {
		if f[42] == byte(proto.OpRCAtomicWrite) && dup == nil {
			dup = append([]byte(nil), f...)
		}
	}
	ia.mu.Unlock()
	binary.LittleEndian.PutUint64(p.a.mem.Bytes()[0x40:], 7)
	mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRAtomicWrite, SendFlags: rdma.SendSignaled,
		SGList: p.a.sge(0x40, 8), RemoteAddr: 0x3000, RKey: p.b.mr.RKey}}))
	wantWC(t, p.poll(p.a.scq, 1)[0], 1, rdma.WCSuccess, rdma.WCAtomicWrite)
	binary.LittleEndian.PutUint64(p.b.mem.Bytes()[0x3000:], 99)
	ia.mu.Lock()
	f := dup
	ia.mu.Unlock()
	if f == nil {
		t.Fatal("no ATOMIC WRITE seen")
	}
	before := p.b.dev.Counters()
	p.b.dev.Deliver(f)
	p.settle()
	after := p.b.dev.Counters()
	if v := binary.LittleEndian.Uint64(p.b.mem.Bytes()[0x3000:]); v != 99 {
		t.Fatalf("duplicate executed again: word %d", v)
	}
	if after.AtomicWrites != before.AtomicWrites || after.AtomicReplays != before.AtomicReplays+1 {
		t.Fatalf("counters before %+v after %+v", before, after)
	}
}

func TestAtomicWriteErrors(t *testing.T) {
	t.Run("post", func(t *testing.T) {
		p := newPair(t, mwOpts())
		for _, wr := range []rdma.SendWR{
			{Opcode: rdma.WRAtomicWrite, SGList: p.a.sge(0, 4), RemoteAddr: 0x3000},
			{Opcode: rdma.WRAtomicWrite, SGList: p.a.sge(0, 8), RemoteAddr: 0x3004},
		} {
			if err := p.qa.PostSend([]rdma.SendWR{wr}); !isErr(err, rdma.ErrInvalid) {
				t.Fatalf("%+v: %v", wr, err)
			}
		}
	})
	t.Run("MR without remote write", func(t *testing.T) {
		p := newPair(t, mwOpts())
		mr, err := p.b.dev.RegMR(p.b.pd, 0, 0x10000, rdma.AccessLocalWrite|rdma.AccessRemoteRead|rdma.AccessRemoteAtomic)
		if err != nil {
			t.Fatal(err)
		}
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRAtomicWrite, SendFlags: rdma.SendSignaled,
			SGList: p.a.sge(0, 8), RemoteAddr: 0x3000, RKey: mr.RKey}}))
		if wc := p.poll(p.a.scq, 1)[0]; wc.Status != rdma.WCRemAccessErr {
			t.Fatalf("%+v (%v)", wc, wc.Status)
		}
	})
	t.Run("QP without remote write", func(t *testing.T) {
		o := mwOpts()
		o.qpAccess = rdma.AccessLocalWrite | rdma.AccessRemoteRead | rdma.AccessRemoteAtomic
		p := newPair(t, o)
		mustPost(t, p.qa.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRAtomicWrite, SendFlags: rdma.SendSignaled,
			SGList: p.a.sge(0, 8), RemoteAddr: 0x3000, RKey: p.b.mr.RKey}}))
		if wc := p.poll(p.a.scq, 1)[0]; wc.Status != rdma.WCRemInvReqErr {
			t.Fatalf("%+v (%v)", wc, wc.Status)
		}
	})
}
