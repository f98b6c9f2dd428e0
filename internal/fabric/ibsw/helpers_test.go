package ibsw

import (
	"testing"

	"github.com/PacketFive/hinic/internal/fabric/ibsw/ibswtest"
	"github.com/PacketFive/hinic/internal/proto"
)

const testGUID = 0x5E10000000000A01

// newTestSwitch returns a switch with n external ports, all links down.
func newTestSwitch(t testing.TB, n int) *Switch {
	t.Helper()
	s, err := New(Config{NodeGUID: testGUID, NumPorts: n, Description: "test switch"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sent is one packet a switch emitted.
type sent struct {
	port int
	pkt  []byte
}

// ingress runs one packet through s and returns copies of what it sent.
func ingress(s *Switch, in int, pkt []byte) []sent {
	var out []sent
	s.Ingress(in, pkt, func(p int, b []byte) {
		out = append(out, sent{p, append([]byte(nil), b...)})
	})
	return out
}

// drFields describes a directed-route SMP to build.
type drFields struct {
	method   uint8
	attr     uint16
	am       uint32
	data     []byte
	hc, hp   uint8
	dir      bool
	initial  []byte // InitialPath[1..]
	ret      []byte // ReturnPath[1..]
	drSLID   uint16 // 0: permissive
	drDLID   uint16 // 0: permissive
	tid      uint64
	classVer uint8 // 0: 1
	mkey     uint64
}

// drMAD builds a directed-route SMP.
func drMAD(f drFields) []byte {
	if f.drSLID == 0 {
		f.drSLID = proto.SMPPermissiveLID
	}
	if f.drDLID == 0 {
		f.drDLID = proto.SMPPermissiveLID
	}
	if f.classVer == 0 {
		f.classVer = proto.SMClassVersion
	}
	if f.tid == 0 {
		f.tid = 0x1122334455667788
	}
	sf := proto.SMPFields{
		BaseVersion: proto.MADBaseVersion, MgmtClass: proto.MgmtClassSubnDirectedRoute,
		ClassVersion: f.classVer, Method: f.method, TransactionID: f.tid,
		AttributeID: f.attr, AttributeModifier: f.am, MKey: f.mkey,
		Direction: f.dir, HopPointer: f.hp, HopCount: f.hc,
		DrSLID: f.drSLID, DrDLID: f.drDLID,
	}
	copy(sf.InitialPath[1:], f.initial)
	copy(sf.ReturnPath[1:], f.ret)
	mad := make([]byte, proto.MADSize)
	proto.SMP(mad).Encode(&sf)
	copy(proto.SMP(mad).Data(), f.data)
	return mad
}

// drPacket wraps a DR SMP for the wire (LRH DLID = SLID = permissive).
func drPacket(f drFields) []byte {
	return ibswtest.SMPPacket(proto.LIDPermissive, proto.LIDPermissive, drMAD(f))
}

// lidMAD builds a LID-routed SMP.
func lidMAD(method uint8, attr uint16, am uint32, data []byte) []byte {
	mad := make([]byte, proto.MADSize)
	proto.SMP(mad).Encode(&proto.SMPFields{
		BaseVersion: proto.MADBaseVersion, MgmtClass: proto.MgmtClassSubnLID,
		ClassVersion: proto.SMClassVersion, Method: method, TransactionID: 0x42,
		AttributeID: attr, AttributeModifier: am,
	})
	copy(proto.SMP(mad).Data(), data)
	return mad
}

// sma sends a directed-route SMP from a neighbour on port in, one hop away
// (the requester's own port is InitialPath[1] = 1), and returns the
// answer's SMP view. It fails the test if there is not exactly one answer,
// out of port in.
func sma(t testing.TB, s *Switch, in int, method uint8, attr uint16, am uint32, data []byte) proto.SMP {
	t.Helper()
	out := ingress(s, in, drPacket(drFields{method: method, attr: attr, am: am, data: data, hc: 1, hp: 1, initial: []byte{1}}))
	if len(out) != 1 || out[0].port != in {
		t.Fatalf("%#x %#x: want one answer on port %d, got %d packets", method, attr, in, len(out))
	}
	return answerSMP(t, out[0].pkt)
}

// answerSMP checks a packet the switch originated and returns its SMP.
func answerSMP(t testing.TB, pkt []byte) proto.SMP {
	t.Helper()
	p, err := proto.Parse(pkt, proto.LinkIB)
	if err != nil || !p.VCRCValid() || !p.ICRCValid() {
		t.Fatalf("answer does not parse or has bad CRCs: %v", err)
	}
	if p.LRH.VL() != proto.VL15 || p.BTH.DestQP() != 0 || p.DETH.SrcQP() != 0 {
		t.Fatalf("answer not VL15/QP0: VL %d QP %d/%d", p.LRH.VL(), p.BTH.DestQP(), p.DETH.SrcQP())
	}
	smp, err := proto.ParseSMP(p.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if smp.Method() != proto.MADMethodGetResp {
		t.Fatalf("answer method %#x", smp.Method())
	}
	return smp
}

// portInfoData encodes a PortInfo attribute.
func portInfoData(f proto.PortInfoFields) []byte {
	d := make([]byte, proto.SMPDataSize)
	proto.PortInfo(d).Encode(&f)
	return d
}

// setState moves port p to state through a PortInfo Set sent in on port
// via (which must be up), and fails the test on a non-zero status.
func setState(t testing.TB, s *Switch, via, p int, state uint8) {
	t.Helper()
	r := sma(t, s, via, proto.MADMethodSet, proto.SMPAttrPortInfo, uint32(p),
		portInfoData(proto.PortInfoFields{PortState: state}))
	if r.Status() != 0 {
		t.Fatalf("Set port %d state %d: status %#x", p, state, r.Status())
	}
}

// activate brings the links of ports up and takes them to Active, with
// OperationalVLs VL0-7, as an SM would.
func activate(t testing.TB, s *Switch, ports ...int) {
	t.Helper()
	for _, p := range ports {
		s.SetPortLink(p, true)
	}
	for _, p := range ports {
		r := sma(t, s, ports[0], proto.MADMethodSet, proto.SMPAttrPortInfo, uint32(p),
			portInfoData(proto.PortInfoFields{OperationalVLs: proto.VLCapVL0To7}))
		if r.Status() != 0 {
			t.Fatalf("Set OperVLs: %#x", r.Status())
		}
		setState(t, s, ports[0], p, proto.PortStateArmed)
		setState(t, s, ports[0], p, proto.PortStateActive)
	}
}

// program sets the switch LID, LinearFDBTop and the LFT entries given
// (LID -> port), through the SMA, from port via.
func program(t testing.TB, s *Switch, via int, lid uint16, lft map[uint16]uint8) {
	t.Helper()
	r := sma(t, s, via, proto.MADMethodSet, proto.SMPAttrPortInfo, 0, portInfoData(proto.PortInfoFields{LID: lid, MasterSMLID: 1, GIDPrefix: 0xFE80000000000000}))
	if r.Status() != 0 {
		t.Fatalf("Set LID: %#x", r.Status())
	}
	top := lid
	blocks := map[uint32][]byte{}
	for l, p := range lft {
		top = max(top, l)
		b, i := proto.LFTLIDBlock(l)
		if blocks[b] == nil {
			blocks[b] = make([]byte, proto.SMPDataSize)
			for j := range blocks[b] {
				blocks[b][j] = proto.LFTPortDrop
			}
		}
		blocks[b][i] = p
	}
	si := make([]byte, proto.SMPDataSize)
	proto.SwitchInfo(si[:proto.SwitchInfoSize]).Encode(&proto.SwitchInfoFields{LinearFDBTop: top})
	if r := sma(t, s, via, proto.MADMethodSet, proto.SMPAttrSwitchInfo, 0, si); r.Status() != 0 {
		t.Fatalf("Set SwitchInfo: %#x", r.Status())
	}
	for b, d := range blocks {
		if r := sma(t, s, via, proto.MADMethodSet, proto.SMPAttrLinearForwardingTable, b, d); r.Status() != 0 {
			t.Fatalf("Set LFT block %d: %#x", b, r.Status())
		}
	}
}

// dataPacket builds a UD SEND-only data packet with an n-byte payload.
func dataPacket(dlid, slid uint16, sl, vl uint8, pkey uint16, n int) []byte {
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	f := proto.PacketFields{
		Link:    proto.LinkIB,
		LRH:     proto.LRHFields{VL: vl, SL: sl, DLID: dlid, SLID: slid},
		BTH:     proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: pkey, DestQP: 0x99, PSN: 7},
		DETH:    proto.DETHFields{QKey: 0x1234, SrcQP: 0x55},
		Payload: payload,
	}
	buf := make([]byte, f.Len())
	if _, err := f.Encode(buf); err != nil {
		panic(err)
	}
	return buf
}

// smpPacket wraps an SMP for the wire from slid to dlid on VL15.
func smpPacket(dlid, slid uint16, mad []byte) []byte { return ibswtest.SMPPacket(dlid, slid, mad) }
