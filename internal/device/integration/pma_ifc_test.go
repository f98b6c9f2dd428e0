package integration

import (
	"testing"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
)

// perfMAD is a PerfMgt request of the guest's own port (what the
// kernel's process_mad passes on: sysfs counters, perfquery of the local
// port).
func perfMAD(method uint8, attr uint16, sel uint8, csel uint16) []byte {
	m := make([]byte, proto.MADSize)
	proto.MAD(m).Encode(&proto.MADFields{BaseVersion: proto.MADBaseVersion, MgmtClass: proto.MgmtClassPerfMgt,
		ClassVersion: proto.PerfMgtClassVersion, Method: method, TransactionID: 0x99, AttributeID: attr})
	d := proto.PerfMgtMAD(m).Data()
	switch attr {
	case proto.PMAAttrPortCounters:
		proto.PortCounters(d[:proto.PortCountersSize]).Encode(&proto.PortCountersFields{PortSelect: sel, CounterSelect: csel})
	case proto.PMAAttrPortCountersExtended:
		proto.PortCountersExtended(d[:proto.PortCountersExtendedSize]).Encode(
			&proto.PortCountersExtendedFields{PortSelect: sel, CounterSelect: csel})
	}
	return m
}

// pmaAsk sends a PerfMgt MAD through MAD_IFC and returns the answer,
// which must be a GetResp with status want.
func pmaAsk(t *testing.T, g *guestsim.Guest, mad []byte, want uint16) proto.PerfMgtMAD {
	t.Helper()
	r, err := g.MADIfc(testCtx(t), mad)
	if err != nil || r == nil {
		t.Fatalf("MAD_IFC: answer %v, %v", r != nil, err)
	}
	m := proto.PerfMgtMAD(r)
	if m.Method() != proto.MADMethodGetResp || m.Status() != want || m.TransactionID() != 0x99 {
		t.Fatalf("answer: method %#x status %#x tid %#x, want GetResp, %#x, 0x99", m.Method(), m.Status(), m.TransactionID(), want)
	}
	return m
}

// TestMADIfcPMA: the port's PMA lives in the device (ABI 1.15) and
// answers the host's PerfMgt MADs on RoCE and on InfiniBand alike, as
// mlx4's firmware does: ClassPortInfo, PortCounters and
// PortCountersExtended that follow the traffic, each cleared by its own
// Set only.
func TestMADIfcPMA(t *testing.T) {
	for _, link := range []string{"roce", "ib"} {
		t.Run(link, func(t *testing.T) {
			var tb *testbed
			if link == "ib" {
				tb = newIBTestbed(t, 2)
			} else {
				tb = newTestbed(t, 2)
			}
			g := tb.guests[0]
			cpi := pmaAsk(t, g, perfMAD(proto.MADMethodGet, proto.PMAAttrClassPortInfo, 0, 0), 0)
			if c := proto.ClassPortInfo(cpi.Data()[:proto.ClassPortInfoSize]).Fields(); c.CapabilityMask&proto.PMACapExtendedWidth == 0 {
				t.Fatalf("ClassPortInfo capability mask %#x: no PortCountersExtended", c.CapabilityMask)
			}

			if link == "ib" {
				// No SM here to make the link Active for traffic: the
				// counters stay 0, and the PMA still answers them
				// (the wire path is TestIBSubnetFromAGuest's
				// perfquery).
				pc := proto.PortCounters(pmaAsk(t, g, perfMAD(proto.MADMethodGet, proto.PMAAttrPortCounters, 1, 0), 0).
					Data()[:proto.PortCountersSize]).Fields()
				if pc.PortXmitPkts != 0 || pc.PortSelect != 1 {
					t.Fatalf("PortCounters before any traffic: %+v", pc)
				}
				pmaAsk(t, g, perfMAD(proto.MADMethodGet, proto.PMAAttrPortCounters, 2, 0), proto.MADStatusInvalidField)
				return
			}
			a, b := connectPair(t, tb, false)
			const n = 3000
			fill(t, a.g, a.buf, n, 3)
			b.qp.PostRecv(7, []device.SGE{{Addr: b.buf + 8192, Length: 4096, LKey: b.lkey}})
			a.qp.PostSend(device.SendWQE{WRID: 1, Opcode: uint8(rdma.WRSend), SendFlags: uint16(rdma.SendSignaled)},
				[]device.SGE{{Addr: a.buf, Length: n, LKey: a.lkey}}, nil)
			wantCQE(t, b.rcq, rdma.WCSuccess, rdma.WCRecv, 7)
			wantCQE(t, a.scq, rdma.WCSuccess, rdma.WCSend, 1)

			raw := queryCounters(t, a.g)
			pc := proto.PortCounters(pmaAsk(t, a.g, perfMAD(proto.MADMethodGet, proto.PMAAttrPortCounters, 1, 0), 0).
				Data()[:proto.PortCountersSize]).Fields()
			if uint64(pc.PortXmitPkts) != raw.XmitPkts || uint64(pc.PortXmitData) != raw.XmitData/4 || pc.PortXmitPkts < 3 {
				t.Fatalf("PortCounters %+v, device counters %+v", pc, raw)
			}
			ext := proto.PortCountersExtended(pmaAsk(t, a.g, perfMAD(proto.MADMethodGet, proto.PMAAttrPortCountersExtended, 1, 0), 0).
				Data()[:proto.PortCountersExtendedSize]).Fields()
			if ext.Counters[2] != raw.XmitPkts || ext.Counters[4] != raw.UnicastXmitPkts || ext.Counters[0] != raw.XmitData/4 {
				t.Fatalf("PortCountersExtended %v, device counters %+v", ext.Counters, raw)
			}

			// A PortCounters Set clears PortXmitPkts there, not in the
			// extended view.
			pmaAsk(t, a.g, perfMAD(proto.MADMethodSet, proto.PMAAttrPortCounters, 1, proto.PortCountersSelectPortXmitPkts), 0)
			pc = proto.PortCounters(pmaAsk(t, a.g, perfMAD(proto.MADMethodGet, proto.PMAAttrPortCounters, 1, 0), 0).
				Data()[:proto.PortCountersSize]).Fields()
			ext = proto.PortCountersExtended(pmaAsk(t, a.g, perfMAD(proto.MADMethodGet, proto.PMAAttrPortCountersExtended, 1, 0), 0).
				Data()[:proto.PortCountersExtendedSize]).Fields()
			if pc.PortXmitPkts != 0 || pc.PortXmitData == 0 || ext.Counters[2] != raw.XmitPkts {
				t.Fatalf("after the Set: PortCounters xmit pkts %d data %d, extended xmit pkts %d (want 0, >0, %d)",
					pc.PortXmitPkts, pc.PortXmitData, ext.Counters[2], raw.XmitPkts)
			}
			// Port 2 does not exist; another attribute is unsupported.
			pmaAsk(t, a.g, perfMAD(proto.MADMethodGet, proto.PMAAttrPortCounters, 2, 0), proto.MADStatusInvalidField)
			pmaAsk(t, a.g, perfMAD(proto.MADMethodGet, proto.PMAAttrPortSamplesControl, 1, 0), proto.MADStatusMethodAttrUnsupported)
			// A response is not the PMA's: no answer.
			resp := perfMAD(proto.MADMethodGetResp, proto.PMAAttrPortCounters, 1, 0)
			if r, err := a.g.MADIfc(testCtx(t), resp); r != nil || err != nil {
				t.Fatalf("a response got answer %v, %v", r != nil, err)
			}
		})
	}
}
