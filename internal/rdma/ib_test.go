package rdma_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/clock"
	"github.com/PacketFive/hinic/internal/clock/clocktest"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/rdma/rdmatest"
)

// ibNode is an InfiniBand device with one MR over its memory.
type ibNode struct {
	dev      *rdma.Device
	mem      *rdma.HostMemory
	pd       *rdma.PD
	mr       *rdma.MR
	scq, rcq *rdma.CQ
}

func newIBNode(t testing.TB, port rdma.Port, clk clock.Clock, guid uint64, lid uint16) *ibNode {
	t.Helper()
	n := &ibNode{mem: rdma.NewHostMemory(1 << 20)}
	dev, err := rdma.NewDevice(rdma.DeviceConfig{Name: "hicain", LinkLayer: rdma.LinkLayerInfiniBand,
		NodeGUID: guid, LID: lid, SMLID: 1, MTU: 2048, Memory: n.mem, Clock: clk, Description: "ibnode"}, port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	n.dev = dev
	if n.pd, err = dev.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if n.mr, err = dev.RegMR(n.pd, 0, 1<<20, rdma.AccessLocalWrite|rdma.AccessRemoteWrite|rdma.AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	if n.scq, err = dev.CreateCQ(256, nil); err != nil {
		t.Fatal(err)
	}
	if n.rcq, err = dev.CreateCQ(256, nil); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *ibNode) sge(addr uint64, length uint32) []rdma.SGE {
	return []rdma.SGE{{Addr: addr, Length: length, LKey: n.mr.LKey}}
}

func pollN(t testing.TB, devs []*rdma.Device, link *rdmatest.Link, clk *clocktest.Fake, cq *rdma.CQ, n int) []rdma.WC {
	t.Helper()
	var out []rdma.WC
	buf := make([]rdma.WC, n)
	for i := 0; i < 200 && len(out) < n; i++ {
		rdmatest.Settle(devs, link)
		k := cq.Poll(buf[:n-len(out)])
		out = append(out, buf[:k]...)
		if len(out) < n {
			clk.Advance(time.Millisecond)
		}
	}
	if len(out) < n {
		t.Fatalf("%d of %d completions", len(out), n)
	}
	return out
}

// newIBPair is two InfiniBand nodes on one fault-free link, a with LID
// 1 and b with LID 2, static (no subnet manager), on a fake clock.
func newIBPair(t testing.TB) (a, b *ibNode, link *rdmatest.Link, clk *clocktest.Fake, devs []*rdma.Device) {
	t.Helper()
	clk = clocktest.New()
	link = rdmatest.NewLink(1, rdmatest.Faults{})
	a = newIBNode(t, link.A(), clk, 0x0248_4eff_fe00_0a00, 1)
	b = newIBNode(t, link.B(), clk, 0x0248_4eff_fe00_0b00, 2)
	link.Connect(a.dev, b.dev)
	return a, b, link, clk, []*rdma.Device{a.dev, b.dev}
}

func TestIBStaticLIDsRC(t *testing.T) {
	a, b, link, clk, devs := newIBPair(t)
	if pa := a.dev.QueryPort(); pa.LinkLayer != rdma.LinkLayerInfiniBand || pa.State != rdma.PortActive || pa.LID != 1 {
		t.Fatalf("port %+v", pa)
	}
	if g, _ := a.dev.QueryGID(0); g[0] != 0xfe || g[1] != 0x80 || g[15] != 0x01 {
		t.Fatalf("GID 0 %x: want fe80::<port GUID>", g)
	}
	if ty, _ := a.dev.QueryGIDType(0); ty != rdma.GIDTypeIB {
		t.Fatalf("GID type %v", ty)
	}
	qa, qb := connectRC(t, a, b, 32)
	fill(a.mem.Bytes()[0x1000:0x1000+5000], 9)
	mustPost(t, qb.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: b.sge(0x8000, 8192)}}))
	mustPost(t, qa.PostSend([]rdma.SendWR{
		{WRID: 1, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled, SGList: a.sge(0x1000, 5000)},
		{WRID: 2, Opcode: rdma.WRRDMAWrite, SendFlags: rdma.SendSignaled, SGList: a.sge(0x1000, 5000), RemoteAddr: 0x20000, RKey: b.mr.RKey},
		{WRID: 3, Opcode: rdma.WRRDMARead, SendFlags: rdma.SendSignaled, SGList: a.sge(0x40000, 5000), RemoteAddr: 0x20000, RKey: b.mr.RKey},
	}))
	for i, wc := range pollN(t, devs, link, clk, a.scq, 3) {
		if wc.Status != rdma.WCSuccess || wc.WRID != uint64(i+1) {
			t.Fatalf("send wc %d: %+v", i, wc)
		}
	}
	wc := pollN(t, devs, link, clk, b.rcq, 1)[0]
	if wc.Status != rdma.WCSuccess || wc.ByteLen != 5000 {
		t.Fatalf("recv wc %+v", wc)
	}
	want := a.mem.Bytes()[0x1000 : 0x1000+5000]
	for _, got := range [][]byte{b.mem.Bytes()[0x8000 : 0x8000+5000], b.mem.Bytes()[0x20000 : 0x20000+5000], a.mem.Bytes()[0x40000 : 0x40000+5000]} {
		if !bytes.Equal(got, want) {
			t.Fatal("data differs after SEND/WRITE/READ over IB")
		}
	}
	// The wire carried IB packets (LRH ... VCRC) with our LIDs.
	if c := b.dev.Counters(); c.RxICRCErrors != 0 || c.RxPackets < 5 {
		t.Fatalf("b counters %+v", c)
	}
}

// connectRC makes an RC QP on a (LID 1) and one on b (LID 2), depth
// depth, remote write, read and atomics allowed, and connects them.
func connectRC(t testing.TB, a, b *ibNode, depth int) (qa, qb *rdma.QP) {
	t.Helper()
	mk := func(n *ibNode) *rdma.QP {
		qp, err := n.dev.CreateQP(n.pd, rdma.QPInitAttr{SendCQ: n.scq, RecvCQ: n.rcq, QPType: rdma.QPTypeRC,
			Cap: rdma.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return qp
	}
	qa, qb = mk(a), mk(b)
	conn := func(qp, remote *rdma.QP, dlid uint16) {
		for _, s := range []struct {
			a    rdma.QPAttr
			mask rdma.QPAttrMask
		}{
			{rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1, QPAccessFlags: rdma.AccessRemoteWrite | rdma.AccessRemoteRead | rdma.AccessRemoteAtomic},
				rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrAccessFlags},
			{rdma.QPAttr{QPState: rdma.QPStateRTR, PathMTU: rdma.MTU2048, DestQPNum: remote.QPN(), RQPSN: 7,
				MaxDestRDAtomic: 4, MinRNRTimer: 12, AHAttr: rdma.AHAttr{DLID: dlid, SL: 0, PortNum: 1}},
				rdma.QPAttrState | rdma.QPAttrAV | rdma.QPAttrPathMTU | rdma.QPAttrDestQPN | rdma.QPAttrRQPSN |
					rdma.QPAttrMaxDestRDAtomic | rdma.QPAttrMinRNRTimer},
			{rdma.QPAttr{QPState: rdma.QPStateRTS, SQPSN: 7, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 4},
				rdma.QPAttrState | rdma.QPAttrSQPSN | rdma.QPAttrTimeout | rdma.QPAttrRetryCnt | rdma.QPAttrRNRRetry |
					rdma.QPAttrMaxQPRDAtomic},
		} {
			if err := qp.Modify(&s.a, s.mask); err != nil {
				t.Fatal(err)
			}
		}
	}
	conn(qa, qb, 2)
	conn(qb, qa, 1)
	return qa, qb
}

// smQP makes QP0 or QP1 on n and takes it to RTS.
func smQP(t testing.TB, n *ibNode, typ rdma.QPType) *rdma.QP {
	t.Helper()
	qp, err := n.dev.CreateQP(n.pd, rdma.QPInitAttr{SendCQ: n.scq, RecvCQ: n.rcq, QPType: typ,
		Cap: rdma.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	qkey := uint32(0)
	if typ == rdma.QPTypeGSI {
		qkey = 0x80010000
	}
	for _, s := range []struct {
		a    rdma.QPAttr
		mask rdma.QPAttrMask
	}{
		{rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1, QKey: qkey}, rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrQKey},
		{rdma.QPAttr{QPState: rdma.QPStateRTR}, rdma.QPAttrState},
		{rdma.QPAttr{QPState: rdma.QPStateRTS}, rdma.QPAttrState | rdma.QPAttrSQPSN},
	} {
		if err := qp.Modify(&s.a, s.mask); err != nil {
			t.Fatal(err)
		}
	}
	return qp
}

func TestIBSMAAndPMA(t *testing.T) {
	clk := clocktest.New()
	link := rdmatest.NewLink(1, rdmatest.Faults{})
	sm := newIBNode(t, link.A(), clk, 0x0248_4eff_fe00_0100, 1) // the SM's port, static LID 1
	ca := newIBNode(t, link.B(), clk, 0x0248_4eff_fe00_0200, 0) // waits for an SM
	link.Connect(sm.dev, ca.dev)
	devs := []*rdma.Device{sm.dev, ca.dev}
	if p := ca.dev.QueryPort(); p.State != rdma.PortInit || p.LID != 0 {
		t.Fatalf("unconfigured port %+v", p)
	}
	qp0 := smQP(t, sm, rdma.QPTypeSMI)
	if _, err := sm.dev.CreateQP(sm.pd, rdma.QPInitAttr{SendCQ: sm.scq, RecvCQ: sm.rcq, QPType: rdma.QPTypeSMI}); !isErr(err, rdma.ErrBusy) {
		t.Fatalf("second QP0: %v", err)
	}
	ah, err := sm.dev.CreateAH(sm.pd, rdma.AHAttr{DLID: proto.LIDPermissive, PortNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	tid := uint64(0)
	// dr sends a directed-route SMP along path and returns the answer.
	dr := func(method uint8, path []byte, attr uint16, data []byte) proto.SMP {
		t.Helper()
		tid++
		f := proto.SMPFields{BaseVersion: proto.MADBaseVersion, MgmtClass: proto.MgmtClassSubnDirectedRoute,
			ClassVersion: proto.SMClassVersion, Method: method, TransactionID: tid, AttributeID: attr,
			DrSLID: proto.SMPPermissiveLID, DrDLID: proto.SMPPermissiveLID, HopCount: uint8(len(path))}
		copy(f.InitialPath[1:], path)
		mad := sm.mem.Bytes()[0x1000 : 0x1000+proto.MADSize]
		proto.SMP(mad).Encode(&f)
		copy(proto.SMP(mad).Data(), data)
		mustPost(t, qp0.PostRecv([]rdma.RecvWR{{WRID: tid, SGList: sm.sge(0x4000, 40+256)}}))
		mustPost(t, qp0.PostSend([]rdma.SendWR{{WRID: tid, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
			SGList: sm.sge(0x1000, proto.MADSize), AH: ah}}))
		pollN(t, devs, link, clk, sm.scq, 1)
		wc := pollN(t, devs, link, clk, sm.rcq, 1)[0]
		if wc.Status != rdma.WCSuccess || wc.ByteLen != 40+256 {
			t.Fatalf("SMP answer wc %+v", wc)
		}
		r := proto.SMP(append([]byte(nil), sm.mem.Bytes()[0x4000+40:0x4000+40+256]...))
		if r.TransactionID() != tid || r.Method() != proto.MADMethodGetResp || !r.Direction() || r.HopPointer() != 0 {
			t.Fatalf("answer tid %d method %#x D %v hp %d", r.TransactionID(), r.Method(), r.Direction(), r.HopPointer())
		}
		return r
	}
	// Our own port, without the wire (HopCount 0).
	r := dr(proto.MADMethodGet, nil, proto.SMPAttrNodeInfo, nil)
	if ni := proto.NodeInfo(r.Data()); ni.NodeGUID() != 0x0248_4eff_fe00_0100 || ni.NodeType() != proto.NodeTypeCA {
		t.Fatalf("own NodeInfo GUID %#x type %d", ni.NodeGUID(), ni.NodeType())
	}
	// The CA at the other end of the cable: path {1}.
	r = dr(proto.MADMethodGet, []byte{1}, proto.SMPAttrNodeInfo, nil)
	if ni := proto.NodeInfo(r.Data()); ni.NodeGUID() != 0x0248_4eff_fe00_0200 || ni.PortGUID() != 0x0248_4eff_fe00_0201 || r.Status() != 0 {
		t.Fatalf("remote NodeInfo GUID %#x port GUID %#x status %#x", ni.NodeGUID(), ni.PortGUID(), r.Status())
	}
	r = dr(proto.MADMethodGet, []byte{1}, proto.SMPAttrNodeDescription, nil)
	if got := string(bytes.TrimRight(r.Data()[:64], "\x00")); got != "ibnode" {
		t.Fatalf("NodeDescription %q", got)
	}
	r = dr(proto.MADMethodGet, []byte{1}, proto.SMPAttrPortInfo, nil)
	pi := proto.PortInfo(r.Data()).Fields()
	if pi.PortState != proto.PortStateInit || pi.LID != 0 {
		t.Fatalf("PortInfo state %d LID %d", pi.PortState, pi.LID)
	}
	// Active straight from Init is refused.
	pi.PortState = proto.PortStateActive
	set := make([]byte, proto.SMPDataSize)
	proto.PortInfo(set).Encode(&pi)
	if r = dr(proto.MADMethodSet, []byte{1}, proto.SMPAttrPortInfo, set); r.Status() == 0 {
		t.Fatal("Init -> Active accepted")
	}
	pi.LID, pi.MasterSMLID, pi.PortState, pi.OperationalVLs = 5, 1, proto.PortStateArmed, proto.VLCapVL0To7
	proto.PortInfo(set).Encode(&pi)
	if r = dr(proto.MADMethodSet, []byte{1}, proto.SMPAttrPortInfo, set); r.Status() != 0 {
		t.Fatalf("Set Armed: status %#x", r.Status())
	}
	pi.PortState = proto.PortStateActive
	proto.PortInfo(set).Encode(&pi)
	if r = dr(proto.MADMethodSet, []byte{1}, proto.SMPAttrPortInfo, set); r.Status() != 0 {
		t.Fatalf("Set Active: status %#x", r.Status())
	}
	if p := ca.dev.QueryPort(); p.State != rdma.PortActive || p.LID != 5 || p.SMLID != 1 {
		t.Fatalf("configured port %+v", p)
	}
	evs := nextEvents(t, ca.dev, 2)
	if evs[0] != rdma.EventLIDChange || evs[1] != rdma.EventPortActive {
		t.Fatalf("events %v, want LID_CHANGE, PORT_ACTIVE", evs)
	}
	// A new master (SM LID 7) that asks the port's clients to register
	// again: SM_CHANGE, then CLIENT_REREGISTER; the response's
	// ClientReregister bit reads 0.
	pi.MasterSMLID, pi.ClientReregister = 7, true
	proto.PortInfo(set).Encode(&pi)
	if r = dr(proto.MADMethodSet, []byte{1}, proto.SMPAttrPortInfo, set); r.Status() != 0 {
		t.Fatalf("Set SM LID 7: status %#x", r.Status())
	}
	if got := proto.PortInfo(r.Data()).Fields(); got.ClientReregister || got.MasterSMLID != 7 {
		t.Fatalf("response: ClientReregister %v, MasterSMLID %d", got.ClientReregister, got.MasterSMLID)
	}
	evs = nextEvents(t, ca.dev, 2)
	if evs[0] != rdma.EventSMChange || evs[1] != rdma.EventClientReregister {
		t.Fatalf("events %v, want SM_CHANGE, CLIENT_REREGISTER", evs)
	}
	pi.ClientReregister = false

	// The PMA on QP1 of LID 5 answers PortCounters.
	qp1 := smQP(t, sm, rdma.QPTypeGSI)
	ah5, err := sm.dev.CreateAH(sm.pd, rdma.AHAttr{DLID: 5, PortNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	mad := sm.mem.Bytes()[0x1000 : 0x1000+proto.MADSize]
	clear(mad)
	proto.PerfMgtMAD(mad).Encode(&proto.MADFields{BaseVersion: proto.MADBaseVersion, MgmtClass: proto.MgmtClassPerfMgt,
		ClassVersion: proto.PerfMgtClassVersion, Method: proto.MADMethodGet, TransactionID: 99,
		AttributeID: proto.PMAAttrPortCounters})
	proto.PortCounters(proto.PerfMgtMAD(mad).Data()[:proto.PortCountersSize]).Encode(&proto.PortCountersFields{PortSelect: 1})
	mustPost(t, qp1.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: sm.sge(0x4000, 40+256)}}))
	mustPost(t, qp1.PostSend([]rdma.SendWR{{WRID: 1, Opcode: rdma.WRSend, SendFlags: rdma.SendSignaled,
		SGList: sm.sge(0x1000, proto.MADSize), AH: ah5, RemoteQPN: 1, RemoteQKey: 0x80010000}}))
	pollN(t, devs, link, clk, sm.scq, 1)
	wc := pollN(t, devs, link, clk, sm.rcq, 1)[0]
	if wc.Status != rdma.WCSuccess || wc.SLID != 5 || wc.SrcQP != 1 {
		t.Fatalf("PMA answer wc %+v", wc)
	}
	resp := proto.PerfMgtMAD(sm.mem.Bytes()[0x4000+40 : 0x4000+40+256])
	pc := proto.PortCounters(resp.Data()[:proto.PortCountersSize])
	if resp.TransactionID() != 99 || resp.Status() != 0 || pc.PortRcvPkts() < 5 || pc.PortXmitPkts() < 5 {
		t.Fatalf("PortCounters tid %d status %#x rcv %d xmit %d", resp.TransactionID(), resp.Status(), pc.PortRcvPkts(), pc.PortXmitPkts())
	}
	if c := ca.dev.Counters(); c.SMPsAnswered < 6 || c.MADsSent < 7 {
		t.Fatalf("CA answered %d SMPs, sent %d MADs", c.SMPsAnswered, c.MADsSent)
	}
}

// TestIBMulticast: a UD datagram to an MLID with the group's MGID reaches
// a QP attached on the other device and one on the sending device (the
// local copy), each with the GRH and the payload intact.
func TestIBMulticast(t *testing.T) {
	clk := clocktest.New()
	link := rdmatest.NewLink(1, rdmatest.Faults{})
	a := newIBNode(t, link.A(), clk, 0x0248_4eff_fe00_0c00, 1)
	b := newIBNode(t, link.B(), clk, 0x0248_4eff_fe00_0d00, 2)
	link.Connect(a.dev, b.dev)
	devs := []*rdma.Device{a.dev, b.dev}
	mk := func(n *ibNode) *rdma.QP {
		t.Helper()
		qp, err := n.dev.CreateQP(n.pd, rdma.QPInitAttr{SendCQ: n.scq, RecvCQ: n.rcq, QPType: rdma.QPTypeUD,
			Cap: rdma.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []struct {
			a    rdma.QPAttr
			mask rdma.QPAttrMask
		}{
			{rdma.QPAttr{QPState: rdma.QPStateInit, PortNum: 1, QKey: 5}, rdma.QPAttrState | rdma.QPAttrPKeyIndex | rdma.QPAttrPort | rdma.QPAttrQKey},
			{rdma.QPAttr{QPState: rdma.QPStateRTR}, rdma.QPAttrState},
			{rdma.QPAttr{QPState: rdma.QPStateRTS}, rdma.QPAttrState | rdma.QPAttrSQPSN},
		} {
			if err := qp.Modify(&s.a, s.mask); err != nil {
				t.Fatal(err)
			}
		}
		return qp
	}
	sender, local, remote := mk(a), mk(a), mk(b)
	mgid := [16]byte{0xff, 0x12, 0x40, 0x1b, 15: 7}
	for _, qp := range []*rdma.QP{local, remote} {
		if err := qp.AttachMcast(mgid, 0xc007); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.dev.CreateAH(a.pd, rdma.AHAttr{DLID: 0xc007}); err == nil {
		t.Fatal("a multicast DLID without a GRH was accepted")
	}
	ah, err := a.dev.CreateAH(a.pd, rdma.AHAttr{DLID: 0xc007, IsGlobal: true, GRH: rdma.GlobalRoute{DGID: mgid}})
	if err != nil {
		t.Fatal(err)
	}
	fill(a.mem.Bytes()[0x1000:0x1000+300], 5)
	mustPost(t, local.PostRecv([]rdma.RecvWR{{WRID: 1, SGList: a.sge(0x8000, 400)}}))
	mustPost(t, remote.PostRecv([]rdma.RecvWR{{WRID: 2, SGList: b.sge(0x8000, 400)}}))
	mustPost(t, sender.PostSend([]rdma.SendWR{{Opcode: rdma.WRSend, SGList: a.sge(0x1000, 300), AH: ah, RemoteQKey: 5}}))
	want := a.mem.Bytes()[0x1000 : 0x1000+300]
	for _, n := range []*ibNode{a, b} {
		wc := pollN(t, devs, link, clk, n.rcq, 1)[0]
		if wc.Status != rdma.WCSuccess || wc.ByteLen != 340 || wc.WCFlags&rdma.WCGRH == 0 || wc.SrcQP != sender.QPN() || wc.SLID != 1 {
			t.Fatalf("wc %+v", wc)
		}
		got := n.mem.Bytes()[0x8000 : 0x8000+340]
		if got[0]>>4 != 6 || !bytes.Equal(got[24:40], mgid[:]) || !bytes.Equal(got[40:], want) {
			t.Fatalf("GRH %x / payload intact %v", got[:40], bytes.Equal(got[40:], want))
		}
	}
}

// TestIBLocalSMP drives the port's SMA through LocalSMP, as a driver's
// process_mad does for the SMPs of an SM on the port itself: Gets and
// Sets answered in place, the port configured (LID, Armed, Active) with
// its events, and the input that is not the SMA's refused or left
// unanswered.
func TestIBLocalSMP(t *testing.T) {
	clk := clocktest.New()
	link := rdmatest.NewLink(1, rdmatest.Faults{})
	n := newIBNode(t, link.A(), clk, 0x0248_4eff_fe00_0300, 0)
	smp := func(f proto.SMPFields, data []byte) []byte {
		m := make([]byte, proto.MADSize)
		f.BaseVersion, f.ClassVersion, f.TransactionID = proto.MADBaseVersion, proto.SMClassVersion, 0x1234
		if f.MgmtClass == 0 {
			f.MgmtClass = proto.MgmtClassSubnDirectedRoute
		}
		if f.MgmtClass == proto.MgmtClassSubnDirectedRoute {
			f.DrSLID, f.DrDLID = proto.SMPPermissiveLID, proto.SMPPermissiveLID
		}
		proto.SMP(m).Encode(&f)
		copy(proto.SMP(m).Data(), data)
		return m
	}
	ask := func(m []byte) proto.SMP {
		t.Helper()
		r, err := n.dev.LocalSMP(m)
		if err != nil || r == nil {
			t.Fatalf("LocalSMP: %v, answer %v", err, r != nil)
		}
		s := proto.SMP(r)
		if s.Method() != proto.MADMethodGetResp || s.TransactionID() != 0x1234 {
			t.Fatalf("answer method %#x tid %#x", s.Method(), s.TransactionID())
		}
		return s
	}
	// The sender's SMI stepped HopPointer to 1 (ib_mad does); the answer
	// returns with HopPointer 0 and the D bit.
	r := ask(smp(proto.SMPFields{Method: proto.MADMethodGet, AttributeID: proto.SMPAttrNodeInfo, HopPointer: 1}, nil))
	if ni := proto.NodeInfo(r.Data()); ni.NodeGUID() != 0x0248_4eff_fe00_0300 || ni.LocalPortNum() != 1 ||
		!r.Direction() || r.HopPointer() != 0 || r.Status() != 0 {
		t.Fatalf("NodeInfo GUID %#x port %d, D %v hp %d status %#x", ni.NodeGUID(), ni.LocalPortNum(),
			r.Direction(), r.HopPointer(), r.Status())
	}
	// The host's agents claim IsSM (ib_umad's issm0 open): PortInfo says
	// so until they give it up; bits a host cannot claim are refused.
	capMask := func() uint32 {
		t.Helper()
		return proto.PortInfo(ask(smp(proto.SMPFields{Method: proto.MADMethodGet, AttributeID: proto.SMPAttrPortInfo}, nil)).Data()).Fields().CapabilityMask
	}
	base := capMask()
	if err := n.dev.SetHostCapabilities(proto.PortCapIsSM); err != nil || capMask() != base|proto.PortCapIsSM {
		t.Fatalf("IsSM claimed: %v, mask %#x (was %#x)", err, capMask(), base)
	}
	if err := n.dev.SetHostCapabilities(0); err != nil || capMask() != base {
		t.Fatalf("IsSM given up: %v, mask %#x", err, capMask())
	}
	if err := n.dev.SetHostCapabilities(proto.PortCapIsTrapSupported); !isErr(err, rdma.ErrInvalid) || capMask() != base {
		t.Fatalf("IsTrapSupported claimed: %v, mask %#x", err, capMask())
	}
	// OpenSM's Set of its own port: LID 1, SM LID 1; then Armed, Active.
	pi := proto.PortInfo(ask(smp(proto.SMPFields{Method: proto.MADMethodGet, AttributeID: proto.SMPAttrPortInfo}, nil)).Data()).Fields()
	pi.LID, pi.MasterSMLID, pi.PortState = 1, 1, proto.PortStateNoChange
	set := func(pi proto.PortInfoFields) proto.SMP {
		t.Helper()
		b := make([]byte, 64)
		proto.PortInfo(b).Encode(&pi)
		return ask(smp(proto.SMPFields{Method: proto.MADMethodSet, AttributeID: proto.SMPAttrPortInfo, HopPointer: 1}, b))
	}
	if r := set(pi); r.Status() != 0 || proto.PortInfo(r.Data()).LID() != 1 {
		t.Fatalf("Set PortInfo LID: status %#x LID %d", r.Status(), proto.PortInfo(r.Data()).LID())
	}
	if p := n.dev.QueryPort(); p.LID != 1 || p.SMLID != 1 || p.State != rdma.PortInit {
		t.Fatalf("port after the LID Set: %+v", p)
	}
	pi.PortState = proto.PortStateActive // not from Init
	if r := set(pi); r.Status() != proto.MADStatusInvalidField {
		t.Fatalf("Init -> Active: status %#x", r.Status())
	}
	for _, s := range []uint8{proto.PortStateArmed, proto.PortStateActive} {
		pi.PortState = s
		if r := set(pi); r.Status() != 0 {
			t.Fatalf("Set PortState %d: status %#x", s, r.Status())
		}
	}
	if p := n.dev.QueryPort(); p.State != rdma.PortActive {
		t.Fatalf("port state %v, want Active", p.State)
	}
	evs := nextEvents(t, n.dev, 2)
	if evs[0] != rdma.EventLIDChange || evs[1] != rdma.EventPortActive {
		t.Fatalf("events %v, want LID change, port active", evs)
	}
	// A LID-routed SMP to the port is the SMA's too.
	r = ask(smp(proto.SMPFields{MgmtClass: proto.MgmtClassSubnLID, Method: proto.MADMethodGet,
		AttributeID: proto.SMPAttrNodeDescription}, nil))
	if got := string(bytes.TrimRight(r.Data()[:64], "\x00")); got != "ibnode" {
		t.Fatalf("NodeDescription %q", got)
	}
	if r := ask(smp(proto.SMPFields{Method: proto.MADMethodGet, AttributeID: 0xFF90}, nil)); r.Status() != proto.MADStatusMethodAttrUnsupported {
		t.Fatalf("unknown attribute: status %#x", r.Status())
	}

	// Not the SMA's: no answer, no error.
	resp := smp(proto.SMPFields{Method: proto.MADMethodGetResp, AttributeID: proto.SMPAttrNodeInfo}, nil)
	perf := smp(proto.SMPFields{Method: proto.MADMethodGet, AttributeID: 0x12}, nil)
	perf[1] = proto.MgmtClassPerfMgt
	badBase := smp(proto.SMPFields{Method: proto.MADMethodGet, AttributeID: proto.SMPAttrNodeInfo}, nil)
	badBase[0] = 2
	// SMInfo is the SM's, by LID or by any directed route.
	smInfo := smp(proto.SMPFields{Method: proto.MADMethodGet, AttributeID: proto.SMPAttrSMInfo}, nil)
	smInfoDR := smp(proto.SMPFields{MgmtClass: proto.MgmtClassSubnDirectedRoute, Method: proto.MADMethodGet,
		AttributeID: proto.SMPAttrSMInfo, HopCount: 2, HopPointer: 2}, nil)
	for name, m := range map[string][]byte{"response": resp, "PerfMgt": perf, "base version 2": badBase,
		"SMInfo": smInfo, "SMInfo by directed route": smInfoDR} {
		if r, err := n.dev.LocalSMP(m); r != nil || err != nil {
			t.Errorf("%s: answer %v, error %v; want neither", name, r != nil, err)
		}
	}
	// Refused: the wrong size, and directed routes that do not end here.
	for name, c := range map[string]struct {
		m   []byte
		err error
	}{
		"short":     {make([]byte, 255), rdma.ErrInvalid},
		"hop count": {smp(proto.SMPFields{Method: proto.MADMethodGet, AttributeID: proto.SMPAttrNodeInfo, HopCount: 1}, nil), rdma.ErrInvalid},
		"hop ptr":   {smp(proto.SMPFields{Method: proto.MADMethodGet, AttributeID: proto.SMPAttrNodeInfo, HopPointer: 2}, nil), rdma.ErrInvalid},
		"returning": {smp(proto.SMPFields{Method: proto.MADMethodGet, AttributeID: proto.SMPAttrNodeInfo, Direction: true}, nil), rdma.ErrInvalid},
	} {
		if r, err := n.dev.LocalSMP(c.m); r != nil || !isErr(err, c.err) {
			t.Errorf("%s: answer %v, error %v; want %v", name, r != nil, err, c.err)
		}
	}
	dr := smp(proto.SMPFields{Method: proto.MADMethodGet, AttributeID: proto.SMPAttrNodeInfo}, nil)
	proto.SMP(dr).Encode(&proto.SMPFields{BaseVersion: 1, MgmtClass: proto.MgmtClassSubnDirectedRoute, ClassVersion: 1,
		Method: proto.MADMethodGet, AttributeID: proto.SMPAttrNodeInfo, DrSLID: proto.SMPPermissiveLID, DrDLID: 5})
	if r, err := n.dev.LocalSMP(dr); r != nil || !isErr(err, rdma.ErrInvalid) {
		t.Errorf("DrDLID 5: answer %v, error %v", r != nil, err)
	}
	// An Ethernet port has no SMA.
	eth, err := rdma.NewDevice(rdma.DeviceConfig{Name: "roce", MAC: [6]byte{0x02, 0, 0, 0, 0, 1}, MTU: 1024, Memory: rdma.NewHostMemory(1 << 16)}, link.B())
	if err != nil {
		t.Fatal(err)
	}
	defer eth.Close()
	if r, err := eth.LocalSMP(resp); r != nil || !isErr(err, rdma.ErrUnsupported) {
		t.Errorf("RoCE port: answer %v, error %v", r != nil, err)
	}
	n.dev.Close()
	get := smp(proto.SMPFields{Method: proto.MADMethodGet, AttributeID: proto.SMPAttrNodeInfo}, nil)
	if r, err := n.dev.LocalSMP(get); r != nil || !isErr(err, rdma.ErrClosed) {
		t.Errorf("after Close: answer %v, error %v", r != nil, err)
	}
}

// nextEvents returns the types of dev's next n asynchronous events,
// failing after 5 s without one.
func nextEvents(t *testing.T, dev *rdma.Device, n int) []rdma.AsyncEventType {
	t.Helper()
	var evs []rdma.AsyncEventType
	for len(evs) < n {
		select {
		case ev := <-dev.AsyncEvents():
			evs = append(evs, ev.Type)
		case <-time.After(5 * time.Second):
			t.Fatalf("events %v, want %d", evs, n)
		}
	}
	return evs
}

// TestIBGIDTable: an InfiniBand port reports an 8-entry GID table whose
// entry 0 is the port GID and whose other entries are empty (zero), as a
// ConnectX port without alias GUIDs does; an address may use only entry
// 0, and there is no entry 8.
func TestIBGIDTable(t *testing.T) {
	link := rdmatest.NewLink(1, rdmatest.Faults{})
	n := newIBNode(t, link.A(), clocktest.New(), 0x0002c90300001111, 5)
	if got := n.dev.QueryPort().GIDTableLen; got != 8 {
		t.Fatalf("GID table length %d, want 8", got)
	}
	g0, err := n.dev.QueryGID(0)
	if err != nil || g0 == ([16]byte{}) || g0[0] != 0xFE || g0[1] != 0x80 {
		t.Fatalf("GID 0 = %x, %v; want the port GID", g0, err)
	}
	for i := 1; i < 8; i++ {
		g, err := n.dev.QueryGID(i)
		if err != nil || g != ([16]byte{}) {
			t.Fatalf("GID %d = %x, %v; want an empty entry", i, g, err)
		}
		if typ, err := n.dev.QueryGIDType(i); err != nil || typ != rdma.GIDTypeIB {
			t.Fatalf("GID %d type %v, %v", i, typ, err)
		}
	}
	if _, err := n.dev.QueryGID(8); err == nil {
		t.Fatal("GID 8 of an 8-entry table was read")
	}
	if _, err := n.dev.QueryGIDType(8); err == nil {
		t.Fatal("GID type 8 of an 8-entry table was read")
	}
	for idx, ok := range []bool{true, false} {
		_, err = n.dev.CreateAH(n.pd, rdma.AHAttr{PortNum: 1, DLID: 7, IsGlobal: true,
			GRH: rdma.GlobalRoute{DGID: g0, SGIDIndex: uint8(idx), HopLimit: 64}})
		if (err == nil) != ok {
			t.Fatalf("an address handle on GID entry %d: %v", idx, err)
		}
	}
}
