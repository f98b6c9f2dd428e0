package ibsw

import (
	"bytes"
	"math"
	"testing"

	"github.com/PacketFive/hinic/internal/fabric/ibsw/ibswtest"
	"github.com/PacketFive/hinic/internal/proto"
)

// gmp builds a GMP of class, with the attribute data data.
func gmp(class, classVersion, method uint8, attr uint16, data []byte) []byte {
	mad := make([]byte, proto.MADSize)
	proto.MAD(mad).Encode(&proto.MADFields{
		BaseVersion: proto.MADBaseVersion, MgmtClass: class, ClassVersion: classVersion,
		Method: method, TransactionID: 0xABCDEF, AttributeID: attr,
	})
	copy(mad[proto.PerfMgtDataOffset:], data)
	return mad
}

func portCountersData(f proto.PortCountersFields) []byte {
	d := make([]byte, proto.PortCountersSize)
	proto.PortCounters(d).Encode(&f)
	return d
}

// pmaAsk sends a GMP from LID 3 (port 3) to the switch's LID 10 and returns
// the answer packet, failing unless there is exactly one, on port 3.
func pmaAsk(t *testing.T, s *Switch, pkt []byte) proto.Packet {
	t.Helper()
	out := ingress(s, 3, pkt)
	if len(out) != 1 || out[0].port != 3 {
		t.Fatalf("want one answer on port 3, got %v", out)
	}
	p, err := proto.Parse(out[0].pkt, proto.LinkIB)
	if err != nil || !p.VCRCValid() || !p.ICRCValid() {
		t.Fatalf("answer: %v", err)
	}
	return p
}

func TestPMA(t *testing.T) {
	perf := func(method uint8, attr uint16, data []byte) []byte {
		return ibswtest.GMPPacket(10, 3, 0, proto.PKeyDefault, gmp(proto.MgmtClassPerfMgt, 1, method, attr, data))
	}
	for _, c := range []struct {
		name   string
		pkt    []byte
		status uint16
		check  func(t *testing.T, s *Switch, data []byte)
	}{
		{
			name: "ClassPortInfo", pkt: perf(proto.MADMethodGet, proto.PMAAttrClassPortInfo, nil),
			check: func(t *testing.T, s *Switch, d []byte) {
				f := proto.ClassPortInfo(d[:proto.ClassPortInfoSize]).Fields()
				if f.BaseVersion != 1 || f.ClassVersion != 1 || f.CapabilityMask != proto.PMACapAllPortSelect || f.RespTimeValue != 0x12 {
					t.Errorf("%+v", f)
				}
			},
		},
		{
			name: "PortCounters of port 1", pkt: perf(proto.MADMethodGet, proto.PMAAttrPortCounters, portCountersData(proto.PortCountersFields{PortSelect: 1})),
			check: func(t *testing.T, s *Switch, d []byte) {
				f := proto.PortCounters(d[:proto.PortCountersSize]).Fields()
				want := s.ports[1].cnt.pmaFields()
				want.PortSelect = 1
				if f != want || f.PortRcvPkts == 0 {
					t.Errorf("got %+v\nwant %+v", f, want)
				}
			},
		},
		{
			name: "AllPortSelect sums every port", pkt: perf(proto.MADMethodGet, proto.PMAAttrPortCounters, portCountersData(proto.PortCountersFields{PortSelect: 0xFF})),
			check: func(t *testing.T, s *Switch, d []byte) {
				var sum uint64
				for i := range s.ports {
					sum += s.ports[i].cnt.RcvPkts
				}
				if f := proto.PortCounters(d[:proto.PortCountersSize]).Fields(); uint64(f.PortRcvPkts) != sum || f.PortSelect != 0xFF {
					t.Errorf("PortRcvPkts %d, want %d", f.PortRcvPkts, sum)
				}
			},
		},
		{
			name: "Set clears only the selected counters",
			pkt: perf(proto.MADMethodSet, proto.PMAAttrPortCounters, portCountersData(proto.PortCountersFields{
				PortSelect: 1, CounterSelect: proto.PortCountersSelectPortXmitPkts | proto.PortCountersSelectPortXmitData,
			})),
			check: func(t *testing.T, s *Switch, d []byte) {
				f := proto.PortCounters(d[:proto.PortCountersSize]).Fields()
				if f.PortXmitPkts != 0 || f.PortXmitData != 0 || f.PortRcvPkts == 0 {
					t.Errorf("%+v", f)
				}
				if f.CounterSelect != proto.PortCountersSelectPortXmitPkts|proto.PortCountersSelectPortXmitData {
					t.Errorf("CounterSelect not echoed: %#x", f.CounterSelect)
				}
			},
		},
		{name: "PortSelect beyond the ports", pkt: perf(proto.MADMethodGet, proto.PMAAttrPortCounters, portCountersData(proto.PortCountersFields{PortSelect: 5})), status: 0x001C},
		{name: "PortCountersExtended not supported", pkt: perf(proto.MADMethodGet, proto.PMAAttrPortCountersExtended, nil), status: 0x000C},
		{name: "Set ClassPortInfo", pkt: perf(proto.MADMethodSet, proto.PMAAttrClassPortInfo, nil), status: 0x000C},
		{name: "GetTable", pkt: perf(proto.MADMethodGetTable, proto.PMAAttrPortCounters, nil), status: 0x0008},
		{
			name:   "ClassVersion 2",
			pkt:    ibswtest.GMPPacket(10, 3, 0, proto.PKeyDefault, gmp(proto.MgmtClassPerfMgt, 2, proto.MADMethodGet, proto.PMAAttrClassPortInfo, nil)),
			status: 0x0004,
		},
		{
			name:   "ibping (vendor class 0x32): no agent here",
			pkt:    ibswtest.GMPPacket(10, 3, 0, proto.PKeyDefault, gmp(proto.MgmtClassIBPing, 1, proto.MADMethodGet, 0, nil)),
			status: 0x000C,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := forwardingSwitch(t)
			p := pmaAsk(t, s, c.pkt)
			if p.LRH.DLID() != 3 || p.LRH.SLID() != 10 || p.LRH.VL() != 0 || p.BTH.DestQP() != 1 || p.DETH.SrcQP() != 1 || p.DETH.QKey() != 0x80010000 {
				t.Errorf("answer addressing: LRH %d<-%d VL %d, QP %d<-%d Q_Key %#x",
					p.LRH.DLID(), p.LRH.SLID(), p.LRH.VL(), p.BTH.DestQP(), p.DETH.SrcQP(), p.DETH.QKey())
			}
			m := proto.MAD(p.Payload)
			// A GSI agent answers with the method's own response
			// (GetTable: GetTableResp), unlike the SMA.
			wantMethod, _ := proto.MADResponseMethod(proto.MAD(c.pkt[proto.LRHSize+proto.BTHSize+proto.DETHSize:]).Method())
			if m.Method() != wantMethod || m.Status() != c.status || m.TransactionID() != 0xABCDEF {
				t.Fatalf("method %#x status %#x TID %#x, want status %#x", m.Method(), m.Status(), m.TransactionID(), c.status)
			}
			if c.check != nil {
				c.check(t, s, p.Payload[proto.PerfMgtDataOffset:])
			}
		})
	}
}

// TestPMADrops: GMPs port 0 must not answer.
func TestPMADrops(t *testing.T) {
	mad := gmp(proto.MgmtClassPerfMgt, 1, proto.MADMethodGet, proto.PMAAttrClassPortInfo, nil)
	badQKey := ibswtest.GMPPacket(10, 3, 0, proto.PKeyDefault, mad)
	proto.DETH(badQKey[proto.LRHSize+proto.BTHSize:]).Encode(&proto.DETHFields{QKey: 0x1234, SrcQP: 1})
	badQKey = refreshCRCs(badQKey)
	toQP5 := ibswtest.GMPPacket(10, 3, 0, proto.PKeyDefault, mad)
	proto.BTH(toQP5[proto.LRHSize:]).Encode(&proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: 0xFFFF, DestQP: 5})
	toQP5 = refreshCRCs(toQP5)
	resp := gmp(proto.MgmtClassPerfMgt, 1, proto.MADMethodGetResp, proto.PMAAttrClassPortInfo, nil)
	for _, c := range []struct {
		name string
		pkt  []byte
		drop func(Drops) uint64
	}{
		{"Q_Key not QP1's", badQKey, func(d Drops) uint64 { return d.MAD }},
		{"P_Key not in port 0's table", ibswtest.GMPPacket(10, 3, 0, 0x8002, mad), func(d Drops) uint64 { return d.Partition }},
		{"a response", ibswtest.GMPPacket(10, 3, 0, proto.PKeyDefault, resp), func(d Drops) uint64 { return d.MAD }},
		{"QP other than 0 and 1", toQP5, func(d Drops) uint64 { return d.NoQP }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := forwardingSwitch(t)
			if out := ingress(s, 3, c.pkt); len(out) != 0 {
				t.Fatalf("answered %v", out)
			}
			if c.drop(s.Snapshot().Drops) != 1 {
				t.Errorf("drops %+v", s.Snapshot().Drops)
			}
		})
	}
}

// refreshCRCs recomputes a packet's ICRC and VCRC after a test edited it.
func refreshCRCs(b []byte) []byte {
	icrc := len(b) - proto.VCRCSize - proto.ICRCSize
	proto.PutICRC(b[icrc:], proto.ICRCIB(b[:icrc]))
	proto.PutVCRC(b[icrc+proto.ICRCSize:], proto.VCRC(b[:icrc+proto.ICRCSize]))
	return b
}

// TestPMAWithGRH: a GMP with a GRH is answered with one, GIDs swapped.
func TestPMAWithGRH(t *testing.T) {
	s := forwardingSwitch(t)
	var sgid [16]byte
	copy(sgid[:], []byte{0xFE, 0x80, 7: 0, 8: 0xCA, 15: 0x33})
	f := proto.PacketFields{
		Link:    proto.LinkIB,
		LRH:     proto.LRHFields{DLID: 10, SLID: 3},
		Global:  true,
		GRH:     proto.GRHFields{TClass: 0x20, FlowLabel: 0x12345, HopLmt: 1, SGID: sgid},
		BTH:     proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: 0xFFFF, DestQP: 1},
		DETH:    proto.DETHFields{QKey: 0x80010000, SrcQP: 1},
		Payload: gmp(proto.MgmtClassPerfMgt, 1, proto.MADMethodGet, proto.PMAAttrClassPortInfo, nil),
	}
	pkt := make([]byte, f.Len())
	if _, err := f.Encode(pkt); err != nil {
		t.Fatal(err)
	}
	p := pmaAsk(t, s, pkt)
	if p.GRH == nil || !bytes.Equal(p.GRH.DGID(), sgid[:]) || p.GRH.TClass() != 0x20 || p.GRH.FlowLabel() != 0x12345 {
		t.Fatalf("answer GRH %x", p.GRH)
	}
	if want := []byte{0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0x5E, 0x10, 0, 0, 0, 0, 0x0A, 0x01}; !bytes.Equal(p.GRH.SGID(), want) {
		t.Errorf("SGID % x, want % x", p.GRH.SGID(), want)
	}
}

// TestPMACountersSaturate: the 64-bit counters are reported at the widths
// of PortCounters, stuck at the maximum (IBA 16.1.3.5).
func TestPMACountersSaturate(t *testing.T) {
	c := Counters{XmitData: math.MaxUint32 + 5, RcvPkts: 7, LinkDowned: 300, XmitDiscards: 1 << 20, LocalLinkIntegrityErrors: 16}
	f := c.pmaFields()
	if f.PortXmitData != math.MaxUint32 || f.PortRcvPkts != 7 || f.LinkDownedCounter != 255 || f.PortXmitDiscards != math.MaxUint16 || f.LocalLinkIntegrityErrors != 15 {
		t.Errorf("%+v", f)
	}
}
