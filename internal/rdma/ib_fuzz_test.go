package rdma_test

import (
	"sync"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/clock/clocktest"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/rdma/rdmatest"
)

// recorder passes frames to a device and keeps a copy of each, so the
// fuzz corpus starts from the packets a real exchange put on the wire.
// Both directions' engines deliver at once, so they share a lock.
type recorder struct {
	to     rdmatest.Receiver
	frames *frames
}

// frames is what the recorders of a link have kept.
type frames struct {
	mu   sync.Mutex
	all  [][]byte
	done bool // seeding is over: keep no more
}

func (r recorder) Deliver(f []byte) {
	r.frames.mu.Lock()
	if !r.frames.done {
		r.frames.all = append(r.frames.all, append([]byte(nil), f...))
	}
	r.frames.mu.Unlock()
	r.to.Deliver(f)
}

// ibFrame encodes a native IB packet (LRH, BTH, ..., ICRC, VCRC).
func ibFrame(tb testing.TB, f proto.PacketFields) []byte {
	tb.Helper()
	f.Link = proto.LinkIB
	b := make([]byte, f.Len())
	if _, err := f.Encode(b); err != nil {
		tb.Fatal(err)
	}
	return b
}

// FuzzDeliverIB feeds arbitrary packets to the InfiniBand receive path of
// two devices with live RC QPs, QP0 (the SMA answers SMPs) and QP1 (the
// PMA). Seeds: the packets of a real SEND/WRITE/READ exchange, LID-routed
// and directed-route SMPs and a PMA Get. Property: no panic, and every
// packet is handled (Settle returns).
func FuzzDeliverIB(f *testing.F) {
	clk := clocktest.New()
	link := rdmatest.NewLink(1, rdmatest.Faults{})
	a := newIBNode(f, link.A(), clk, 0x0248_4eff_fe00_0a00, 1)
	b := newIBNode(f, link.B(), clk, 0x0248_4eff_fe00_0b00, 2)
	var seen frames
	link.Connect(recorder{a.dev, &seen}, recorder{b.dev, &seen})
	devs := []*rdma.Device{a.dev, b.dev}
	qa, qb := connectRC(f, a, b, 64)
	smQP(f, a, rdma.QPTypeSMI)
	smQP(f, b, rdma.QPTypeSMI)
	smQP(f, b, rdma.QPTypeGSI)
	for range 8 {
		mustPost(f, qb.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: b.sge(0x8000, 8192)}}))
	}
	mustPost(f, qa.PostSend([]rdma.SendWR{
		{WRID: 1, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: a.sge(0x1000, 3000)},
		{WRID: 2, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled, SGList: a.sge(0x1000, 3000), RemoteAddr: 0x20000, RKey: b.mr.RKey},
		{WRID: 3, Opcode: rdma.WRRDMARead, SendFlags: rdma.SendSignaled, SGList: a.sge(0x40000, 3000), RemoteAddr: 0x20000, RKey: b.mr.RKey},
		{WRID: 4, Opcode: rdma.WRAtomicFetchAndAdd, SendFlags: rdma.SendSignaled, SGList: a.sge(0x50000, 8), RemoteAddr: 0x30000, RKey: b.mr.RKey, CompareAdd: 1},
	}))
	pollN(f, devs, link, clk, a.scq, 4)
	seen.mu.Lock()
	for _, fr := range seen.all {
		f.Add(fr)
	}
	seen.all, seen.done = nil, true
	seen.mu.Unlock()

	smp := func(class uint8, dlid uint16, attr uint16) []byte {
		mad := make([]byte, proto.MADSize)
		sf := proto.SMPFields{BaseVersion: proto.MADBaseVersion, MgmtClass: class, ClassVersion: proto.SMClassVersion,
			Method: proto.MADMethodGet, TransactionID: 7, AttributeID: attr}
		if class == proto.MgmtClassSubnDirectedRoute {
			sf.DrSLID, sf.DrDLID = proto.SMPPermissiveLID, proto.SMPPermissiveLID
		}
		proto.SMP(mad).Encode(&sf)
		return ibFrame(f, proto.PacketFields{LRH: proto.LRHFields{VL: 15, DLID: dlid, SLID: 1},
			BTH: proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: 0xFFFF, DestQP: 0}, DETH: proto.DETHFields{SrcQP: 0}, Payload: mad})
	}
	f.Add(smp(proto.MgmtClassSubnLID, 2, proto.SMPAttrNodeInfo))
	f.Add(smp(proto.MgmtClassSubnLID, 2, proto.SMPAttrPortInfo))
	f.Add(smp(proto.MgmtClassSubnDirectedRoute, 0xFFFF, proto.SMPAttrNodeDescription))
	// A PortInfo Set that gives the port an M_Key with protection, and
	// a TrapRepress carrying a key: the M_Key check and lease paths.
	mk := smp(proto.MgmtClassSubnLID, 2, proto.SMPAttrPortInfo)
	if pkt, err := proto.Parse(mk, proto.LinkIB); err == nil {
		m := proto.SMP(pkt.Payload)
		m.SetMethod(proto.MADMethodSet)
		proto.PortInfo(m.Data()).Encode(&proto.PortInfoFields{LID: 2, MKey: 0x77, MKeyProtectBits: 3, MKeyLeasePeriod: 1})
		proto.PutICRC(pkt.ICRC, pkt.ComputeICRC())
		proto.PutVCRC(pkt.VCRC, proto.VCRC(mk[:len(mk)-len(pkt.VCRC)]))
		f.Add(mk)
	}
	rep := smp(proto.MgmtClassSubnDirectedRoute, 0xFFFF, proto.SMPAttrPortInfo)
	if pkt, err := proto.Parse(rep, proto.LinkIB); err == nil {
		m := proto.SMP(pkt.Payload)
		m.SetMethod(proto.MADMethodTrapRepress)
		m.SetMKey(0x77)
		proto.PutICRC(pkt.ICRC, pkt.ComputeICRC())
		proto.PutVCRC(pkt.VCRC, proto.VCRC(rep[:len(rep)-len(pkt.VCRC)]))
		f.Add(rep)
	}
	pma := make([]byte, proto.MADSize)
	pma[0], pma[1], pma[2], pma[3] = proto.MADBaseVersion, proto.MgmtClassPerfMgt, 1, proto.MADMethodGet
	pma[16], pma[17] = byte(proto.PMAAttrPortCounters>>8), byte(proto.PMAAttrPortCounters)
	f.Add(ibFrame(f, proto.PacketFields{LRH: proto.LRHFields{DLID: 2, SLID: 1},
		BTH: proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: 0xFFFF, DestQP: 1}, DETH: proto.DETHFields{QKey: 0x80010000, SrcQP: 1}, Payload: pma}))
	f.Add(ibFrame(f, proto.PacketFields{LRH: proto.LRHFields{DLID: 2, SLID: 1}, Global: true,
		BTH: proto.BTHFields{Opcode: proto.OpRCSendOnly, PKey: 0xFFFF, DestQP: qb.QPN(), PSN: 100}, Payload: []byte("x")}))

	f.Fuzz(func(t *testing.T, frame []byte) {
		// Recompute the ICRC and VCRC half the time so that mutations
		// get past them.
		if len(frame) > 0 && frame[len(frame)-1]&1 == 0 {
			if pkt, err := proto.Parse(frame, proto.LinkIB); err == nil && pkt.HasTransport() {
				proto.PutICRC(pkt.ICRC, pkt.ComputeICRC())
				if end := len(frame) - len(pkt.VCRC); pkt.VCRC != nil && end >= 0 {
					proto.PutVCRC(pkt.VCRC, proto.VCRC(frame[:end]))
				}
			}
		}
		a.dev.Deliver(frame)
		b.dev.Deliver(frame)
		rdmatest.Settle(devs, link)
		clk.Advance(10 * time.Millisecond)
		rdmatest.Settle(devs, link)
	})
}
