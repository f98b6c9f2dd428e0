package ibsw

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/proto"
)

// unhex decodes hex with comments (from '#' to the end of a line) and
// white space.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		b.WriteString(strings.Join(strings.Fields(line), ""))
	}
	out, err := hex.DecodeString(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGoldenNodeInfoAnswer: the exact packet a 4-port switch without a LID
// sends back for a one-hop directed-route Get NodeInfo received on port 2.
func TestGoldenNodeInfoAnswer(t *testing.T) {
	want := unhex(t, `
		f0 02 ffff 0048 ffff     # LRH: VL15 LVer0, SL0 LNH2, DLID perm., PktLen 72, SLID perm.
		64 00 ffff 00 000000 00 000000   # BTH: UD SEND-only, P_Key ffff, QP0, PSN 0
		00000000 00 000000       # DETH: Q_Key 0, SrcQP 0
		01 81 01 81              # MAD: BaseVersion 1, class 0x81, ClassVersion 1, GetResp
		8000 01 01               # D=1 status 0, HopPointer 1, HopCount 1
		1122334455667788         # TransactionID echoed
		0011 0000 00000000       # NodeInfo, AttributeModifier 0
		0000000000000000         # M_Key
		ffff ffff                # DrSLID, DrDLID permissive
		`+strings.Repeat("00", 28)+`  # reserved
		01 01 02 04              # NodeInfo: BaseVersion, ClassVersion, switch, 4 ports
		5e10000000000a01         # SystemImageGUID
		5e10000000000a01         # NodeGUID
		5e10000000000a01         # PortGUID (port 0's, whatever the port)
		0020 5e10 00000001       # PartitionCap 32, DeviceID 0x5E10, Revision 1
		02 ffffff                # LocalPortNum 2 (the ingress port), VendorID
		`+strings.Repeat("00", 24)+`  # rest of the SMP data
		00 01 `+strings.Repeat("00", 62)+`  # InitialPath[1] = 1
		00 02 `+strings.Repeat("00", 62)+`  # ReturnPath[1] = 2, recorded here
		a5e2c32e                 # ICRC
		6d3a                     # VCRC
	`)
	s := newTestSwitch(t, 4)
	s.SetPortLink(2, true)
	out := ingress(s, 2, drPacket(drFields{method: proto.MADMethodGet, attr: proto.SMPAttrNodeInfo, hc: 1, hp: 1, initial: []byte{1}}))
	if len(out) != 1 || out[0].port != 2 {
		t.Fatalf("got %v", out)
	}
	if !bytes.Equal(out[0].pkt, want) {
		t.Errorf("answer differs:\n got % x\nwant % x", out[0].pkt, want)
	}
}

func TestSMAStatus(t *testing.T) {
	get, set := uint8(proto.MADMethodGet), uint8(proto.MADMethodSet)
	topTooHigh := make([]byte, proto.SMPDataSize)
	proto.SwitchInfo(topTooHigh[:proto.SwitchInfoSize]).Encode(&proto.SwitchInfoFields{LinearFDBTop: 0xC000})
	for _, c := range []struct {
		name   string
		method uint8
		attr   uint16
		am     uint32
		data   []byte
		cv     uint8
		want   uint16
	}{
		{"Get NodeInfo", get, proto.SMPAttrNodeInfo, 0, nil, 0, 0},
		{"Set NodeInfo", set, proto.SMPAttrNodeInfo, 0, nil, 0, 0x000C},
		{"Set NodeDescription", set, proto.SMPAttrNodeDescription, 0, nil, 0, 0x000C},
		{"Get SMInfo: no SM on a switch", get, proto.SMPAttrSMInfo, 0, nil, 0, 0x000C},
		{"Get SLtoVLMappingTable", get, proto.SMPAttrSLtoVLMappingTable, 0x0102, nil, 0, 0x000C},
		{"Get VLArbitrationTable", get, proto.SMPAttrVLArbitrationTable, 0x10001, nil, 0, 0x000C},
		{"Get MlnxExtPortInfo", get, proto.SMPAttrMlnxExtendedPortInfo, 1, nil, 0, 0x000C},
		{"Get PortInfo port 4", get, proto.SMPAttrPortInfo, 4, nil, 0, 0},
		{"Get PortInfo port 5 of 4", get, proto.SMPAttrPortInfo, 5, nil, 0, 0x001C},
		{"Get PortInfo with SMSupportsExtendedSpeeds", get, proto.SMPAttrPortInfo, 0x80000003, nil, 0, 0},
		{"Get PortInfo 0x100", get, proto.SMPAttrPortInfo, 0x100, nil, 0, 0x001C},
		{"Get P_KeyTable port 0 block 0", get, proto.SMPAttrPKeyTable, 0, nil, 0, 0},
		{"Get P_KeyTable port 0 block 1 (PartitionCap 32)", get, proto.SMPAttrPKeyTable, 1, nil, 0, 0x001C},
		{"Get P_KeyTable port 3 block 1", get, proto.SMPAttrPKeyTable, 3<<16 | 1, nil, 0, 0},
		{"Get P_KeyTable port 3 block 2 (cap 64)", get, proto.SMPAttrPKeyTable, 3<<16 | 2, nil, 0, 0x001C},
		{"Get P_KeyTable port 5", get, proto.SMPAttrPKeyTable, 5 << 16, nil, 0, 0x001C},
		{"Get LFT block 767", get, proto.SMPAttrLinearForwardingTable, 767, nil, 0, 0},
		{"Get LFT block 768", get, proto.SMPAttrLinearForwardingTable, 768, nil, 0, 0x001C},
		{"Get MFT block 31", get, proto.SMPAttrMulticastForwardingTable, 31, nil, 0, 0},
		{"Get MFT block 32 (cap 1024)", get, proto.SMPAttrMulticastForwardingTable, 32, nil, 0, 0x001C},
		{"Get MFT position 1 of a 4-port switch", get, proto.SMPAttrMulticastForwardingTable, proto.MFTAttrMod(1, 0), nil, 0, 0x001C},
		{"Get GUIDInfo block 0", get, proto.SMPAttrGUIDInfo, 0, nil, 0, 0},
		{"Get GUIDInfo block 1", get, proto.SMPAttrGUIDInfo, 1, nil, 0, 0x001C},
		{"Set SwitchInfo LinearFDBTop beyond the table", set, proto.SMPAttrSwitchInfo, 0, topTooHigh, 0, 0x001C},
		{"ClassVersion 2", get, proto.SMPAttrNodeInfo, 0, nil, 2, 0x0004},
		{"GetTable is not an SMP method", proto.MADMethodGetTable, proto.SMPAttrNodeInfo, 0, nil, 0, 0x0008},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newTestSwitch(t, 4)
			s.SetPortLink(3, true)
			out := ingress(s, 3, drPacket(drFields{method: c.method, attr: c.attr, am: c.am, data: c.data, hc: 1, hp: 1, initial: []byte{1}, classVer: c.cv}))
			if len(out) != 1 || out[0].port != 3 {
				t.Fatalf("want one answer on port 3, got %v", out)
			}
			r := answerSMP(t, out[0].pkt)
			if r.Status() != c.want || !r.Direction() || r.HopPointer() != 1 || r.TransactionID() != 0x1122334455667788 {
				t.Errorf("status %#x D %v HopPointer %d TID %#x; want status %#x", r.Status(), r.Direction(), r.HopPointer(), r.TransactionID(), c.want)
			}
			if r.AttributeID() != c.attr || r.AttributeModifier() != c.am {
				t.Errorf("attribute %#x/%#x not echoed", r.AttributeID(), r.AttributeModifier())
			}
		})
	}
}

// TestSMANoAnswer: what the SMA must not answer.
func TestSMANoAnswer(t *testing.T) {
	for _, c := range []struct {
		name   string
		method uint8
		base   uint8
	}{
		{"GetResp sent to the switch", proto.MADMethodGetResp, 1},
		{"Trap: no SM on a switch", proto.MADMethodTrap, 1},
		{"TrapRepress", proto.MADMethodTrapRepress, 1},
		{"Send takes no answer", proto.MADMethodSend, 1},
		{"BaseVersion 2", proto.MADMethodGet, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newTestSwitch(t, 4)
			s.SetPortLink(1, true)
			pkt := drMAD(drFields{method: c.method, attr: proto.SMPAttrNodeInfo, hc: 1, hp: 1, initial: []byte{1}})
			pkt[0] = c.base
			if out := ingress(s, 1, smpPacket(0xFFFF, 0xFFFF, pkt)); len(out) != 0 {
				t.Errorf("answered: %v", out)
			}
			if s.Snapshot().Drops.MAD != 1 {
				t.Errorf("drops %+v", s.Snapshot().Drops)
			}
		})
	}
}

func TestSMASetAnswersCurrentAttribute(t *testing.T) {
	s := newTestSwitch(t, 20)
	s.SetPortLink(1, true)

	t.Run("LinearForwardingTable", func(t *testing.T) {
		blk := make([]byte, proto.SMPDataSize)
		for i := range blk {
			blk[i] = byte(i % 21)
		}
		r := sma(t, s, 1, proto.MADMethodSet, proto.SMPAttrLinearForwardingTable, 3, blk)
		if r.Status() != 0 || !bytes.Equal(r.Data(), blk) {
			t.Fatalf("Set answer %#x % x", r.Status(), r.Data())
		}
		if r := sma(t, s, 1, proto.MADMethodGet, proto.SMPAttrLinearForwardingTable, 3, nil); !bytes.Equal(r.Data(), blk) {
			t.Errorf("Get after Set: % x", r.Data())
		}
	})
	t.Run("MulticastForwardingTable drops ports the switch lacks", func(t *testing.T) {
		d := make([]byte, proto.SMPDataSize)
		proto.MulticastForwardingTable(d).SetPortMask(5, 0xFFFF)
		r := sma(t, s, 1, proto.MADMethodSet, proto.SMPAttrMulticastForwardingTable, proto.MFTAttrMod(1, 7), d)
		// Position 1 covers ports 16-31; the switch has 16-20.
		if got := proto.MulticastForwardingTable(r.Data()).PortMask(5); r.Status() != 0 || got != 0x001F {
			t.Errorf("status %#x mask %#x, want 0x001f", r.Status(), got)
		}
		snap := s.Snapshot()
		if len(snap.MFT) != 1 || snap.MFT[0].MLID != 0xC000+7*32+5 || len(snap.MFT[0].Ports) != 5 || snap.MFT[0].Ports[0] != 16 {
			t.Errorf("snapshot MFT %+v", snap.MFT)
		}
	})
	t.Run("P_KeyTable second block", func(t *testing.T) {
		d := make([]byte, proto.SMPDataSize)
		proto.PKeyTable(d).SetPKey(0, 0x8001)
		proto.PKeyTable(d).SetPKey(31, 0x0002)
		r := sma(t, s, 1, proto.MADMethodSet, proto.SMPAttrPKeyTable, 17<<16|1, d)
		if r.Status() != 0 || !bytes.Equal(r.Data(), d) {
			t.Fatalf("Set answer %#x", r.Status())
		}
		r = sma(t, s, 1, proto.MADMethodGet, proto.SMPAttrPKeyTable, 17<<16|0, nil)
		if f := proto.PKeyTable(r.Data()).Fields(); f.PKeys[0] != 0xFFFF || f.PKeys[1] != 0 {
			t.Errorf("block 0 changed: %v", f.PKeys[:2])
		}
		if !s.ports[17].pkeyAllowed(0x0001) || s.ports[17].pkeyAllowed(0x0002) {
			t.Errorf("table not used by enforcement")
		}
	})
	t.Run("SwitchInfo", func(t *testing.T) {
		d := make([]byte, proto.SMPDataSize)
		proto.SwitchInfo(d[:proto.SwitchInfoSize]).Encode(&proto.SwitchInfoFields{
			LinearFDBCap: 1, LinearFDBTop: 0x40, LifeTimeValue: 0x12, MulticastFDBTop: 0xC01F,
			PartitionEnforcementCap: 9, EnhancedPort0: true, // read-only: ignored
		})
		r := sma(t, s, 1, proto.MADMethodSet, proto.SMPAttrSwitchInfo, 0, d)
		got := proto.SwitchInfo(r.Data()[:proto.SwitchInfoSize]).Fields()
		want := proto.SwitchInfoFields{
			LinearFDBCap: DefaultLinearFDBCap, MulticastFDBCap: DefaultMulticastFDBCap,
			LinearFDBTop: 0x40, DefaultMulticastPrimaryPort: 0, DefaultMulticastNotPrimaryPort: 0,
			LifeTimeValue: 0x12, PortStateChange: true, PartitionEnforcementCap: DefaultPartitionEnforcementCap,
			InboundEnforcementCap: true, OutboundEnforcementCap: true,
			FilterRawInboundCap: true, FilterRawOutboundCap: true, MulticastFDBTop: 0xC01F,
		}
		if r.Status() != 0 || got != want {
			t.Errorf("SwitchInfo answer:\n got %+v\nwant %+v", got, want)
		}
	})
	t.Run("port 0 addressing", func(t *testing.T) {
		r := sma(t, s, 1, proto.MADMethodSet, proto.SMPAttrPortInfo, proto.PortInfoAMExtendedSpeeds, portInfoData(proto.PortInfoFields{
			LID: 0x22, MasterSMLID: 1, LMC: 2, MKey: 0xDEAD, GIDPrefix: 0xFE80000000000000,
			PortState: proto.PortStateArmed, // ignored on base port 0
		}))
		pi := proto.PortInfo(r.Data()).Fields()
		if r.Status() != 0 || pi.LID != 0x22 || pi.LMC != 2 || pi.MKey != 0xDEAD || pi.PortState != proto.PortStateActive ||
			pi.CapabilityMask != port0CapabilityMask || pi.LocalPortNum != 1 {
			t.Errorf("port 0 answer %#x %+v", r.Status(), pi)
		}
		// The LMC makes LIDs 0x20-0x23 the switch's.
		if !s.ownLID(0x20) || !s.ownLID(0x23) || s.ownLID(0x24) {
			t.Errorf("LMC not applied")
		}
		// External ports report no LID of their own.
		r = sma(t, s, 1, proto.MADMethodGet, proto.SMPAttrPortInfo, 2, nil)
		if pi := proto.PortInfo(r.Data()).Fields(); pi.LID != 0 || pi.MKey != 0 || pi.VLCap != DefaultVLCap || pi.MTUCap != DefaultMTUCap {
			t.Errorf("port 2: %+v", pi)
		}
		// Multicast LIDs are not port LIDs. From here on a Set needs
		// the M_Key 0xDEAD (TestMKeyProtection); the last one clears it.
		for _, c := range []struct {
			lid    uint16
			status uint16
		}{{0xC000, 0x001C}, {0x22, 0}} {
			out := ingress(s, 1, drPacket(drFields{method: proto.MADMethodSet, attr: proto.SMPAttrPortInfo, hc: 1, hp: 1, initial: []byte{1},
				mkey: 0xDEAD, data: portInfoData(proto.PortInfoFields{LID: c.lid, GIDPrefix: 0xFE80000000000000})}))
			if len(out) != 1 || answerSMP(t, out[0].pkt).Status() != c.status {
				t.Errorf("Set LID %#x with the M_Key: want status %#x", c.lid, c.status)
			}
		}
	})
	t.Run("NodeDescription and GUIDInfo", func(t *testing.T) {
		r := sma(t, s, 1, proto.MADMethodGet, proto.SMPAttrNodeDescription, 0, nil)
		if got := string(proto.NodeDescription(r.Data()).NodeString()); got != "test switch" {
			t.Errorf("NodeDescription %q", got)
		}
		r = sma(t, s, 1, proto.MADMethodSet, proto.SMPAttrGUIDInfo, 0, make([]byte, proto.SMPDataSize))
		if g := proto.GUIDInfo(r.Data()); r.Status() != 0 || g.GUID(0) != testGUID || g.GUID(1) != 0 {
			t.Errorf("GUIDInfo %#x %#x", r.Status(), g.GUID(0))
		}
	})
}

// TestLIDRoutedSMP: `smpquery portinfo <lid>` reaches the switch SMA by
// LID, and the answer goes back by the LFT; a permissive DLID is answered
// out the ingress port.
func TestLIDRoutedSMP(t *testing.T) {
	s := forwardingSwitch(t)
	out := ingress(s, 2, smpPacket(10, 3, lidMAD(proto.MADMethodGet, proto.SMPAttrPortInfo, 0, nil)))
	if len(out) != 1 || out[0].port != 3 {
		t.Fatalf("want the answer on port 3 (LFT for LID 3), got %v", out)
	}
	p, _ := proto.Parse(out[0].pkt, proto.LinkIB)
	if p.LRH.DLID() != 3 || p.LRH.SLID() != 10 {
		t.Errorf("answer LRH DLID %d SLID %d", p.LRH.DLID(), p.LRH.SLID())
	}
	r := answerSMP(t, out[0].pkt)
	if pi := proto.PortInfo(r.Data()).Fields(); r.Status() != 0 || pi.LID != 10 || pi.LocalPortNum != 2 || r.Direction() {
		t.Errorf("status %#x LID %d LocalPortNum %d", r.Status(), pi.LID, pi.LocalPortNum)
	}

	mad := lidMAD(proto.MADMethodGet, proto.SMPAttrNodeInfo, 0, nil)
	proto.SMP(mad).SetMKey(0x1234) // no M_Key protection: accepted
	out = ingress(s, 4, smpPacket(0xFFFF, 0, mad))
	if len(out) != 1 || out[0].port != 4 {
		t.Fatalf("permissive DLID: want the answer on port 4, got %v", out)
	}
	if r := answerSMP(t, out[0].pkt); r.Status() != 0 || proto.NodeInfo(r.Data()).LocalPortNum() != 4 {
		t.Errorf("status %#x", r.Status())
	}
}
