package ibsw

import (
	"testing"

	"github.com/PacketFive/hinic/internal/fabric/ibsw/ibswtest"
	"github.com/PacketFive/hinic/internal/proto"
)

// Fuzz modes: which CRCs to repair after mutation, so that the fuzzer gets
// past the link-level checks into the relay, the directed-route walk and
// the agents.
const (
	fuzzFixICRC = 1 << iota
	fuzzFixVCRC
)

// fixCRCs repairs the ICRC and/or VCRC of a mutated packet where its
// length allows.
func fixCRCs(pkt []byte, mode uint8) {
	if len(pkt) < proto.LRHSize+proto.VCRCSize {
		return
	}
	end := len(pkt) - proto.VCRCSize
	if mode&fuzzFixICRC != 0 {
		hdrs := proto.LRHSize + proto.BTHSize
		if proto.LRH(pkt).LNH() == proto.LNHIBAGlobal {
			hdrs += proto.GRHSize
		}
		if lnh := proto.LRH(pkt).LNH(); lnh >= proto.LNHIBALocal && end-proto.ICRCSize >= hdrs {
			proto.PutICRC(pkt[end-proto.ICRCSize:], proto.ICRCIB(pkt[:end-proto.ICRCSize]))
		}
	}
	if mode&fuzzFixVCRC != 0 {
		proto.PutVCRC(pkt[end:], proto.VCRC(pkt[:end]))
	}
}

// FuzzIngress feeds arbitrary packets to a programmed switch (LID 10,
// ports 1-3 Active, port 4 in Init) on arbitrary ports. Properties: no
// panic; every emitted packet goes to an external port (1..NumPorts) and
// is no longer than the input or, for an answer the switch builds, the
// largest answer.
func FuzzIngress(f *testing.F) {
	all := uint8(fuzzFixICRC | fuzzFixVCRC)
	// Unicast, multicast and raw data.
	f.Add(uint8(1), uint8(0), dataPacket(2, 1, 0, 0, 0xFFFF, 64))
	f.Add(uint8(1), uint8(0), dataPacket(0xC001, 1, 0, 0, 0xFFFF, 32))
	// Directed route: to the switch, through it, and on the way back.
	f.Add(uint8(2), all, drPacket(drFields{method: proto.MADMethodGet, attr: proto.SMPAttrNodeInfo, hc: 1, hp: 1, initial: []byte{1}}))
	f.Add(uint8(2), all, drPacket(drFields{method: proto.MADMethodSet, attr: proto.SMPAttrPortInfo, am: 0x80000004, hc: 1, hp: 1, initial: []byte{1},
		data: portInfoData(proto.PortInfoFields{PortState: proto.PortStateArmed})}))
	f.Add(uint8(3), all, drPacket(drFields{method: proto.MADMethodGet, attr: proto.SMPAttrNodeInfo, hc: 3, hp: 1, initial: []byte{1, 2, 1}}))
	f.Add(uint8(3), all, drPacket(drFields{method: proto.MADMethodGetResp, dir: true, hc: 3, hp: 2, initial: []byte{1, 3, 1}, ret: []byte{2, 3, 1}}))
	f.Add(uint8(1), all, drPacket(drFields{method: proto.MADMethodSet, attr: proto.SMPAttrMulticastForwardingTable, am: 0x10000001, hc: 1, hp: 1, initial: []byte{1}}))
	// An SM setting an M_Key with protection, and an SMP carrying one.
	f.Add(uint8(2), all, drPacket(drFields{method: proto.MADMethodSet, attr: proto.SMPAttrPortInfo, hc: 1, hp: 1, initial: []byte{1},
		data: portInfoData(proto.PortInfoFields{LID: 10, MKey: 0x77, MKeyProtectBits: 3, MKeyLeasePeriod: 1})}))
	f.Add(uint8(2), all, drPacket(drFields{method: proto.MADMethodTrapRepress, attr: proto.SMPAttrPortInfo, hc: 1, hp: 1, initial: []byte{1}, mkey: 0x77}))
	// LID-routed SMP and PMA GMP to the switch's LID.
	f.Add(uint8(3), all, smpPacket(10, 3, lidMAD(proto.MADMethodGet, proto.SMPAttrPortInfo, 2, nil)))
	f.Add(uint8(3), all, ibswtest.GMPPacket(10, 3, 0, 0xFFFF,
		gmp(proto.MgmtClassPerfMgt, 1, proto.MADMethodSet, proto.PMAAttrPortCounters, portCountersData(proto.PortCountersFields{PortSelect: 0xFF, CounterSelect: 0xFFFF}))))
	f.Add(uint8(0), uint8(0), []byte{})
	f.Add(uint8(9), all, []byte{0xF0, 0x02, 0xFF, 0xFF, 0x00, 0x02, 0xFF, 0xFF, 0, 0})

	f.Fuzz(func(t *testing.T, in, mode uint8, pkt []byte) {
		s := forwardingSwitch(t)
		fixCRCs(pkt, mode)
		limit := max(len(pkt), MaxResponseSize)
		s.Ingress(int(in%8), pkt, func(out int, b []byte) {
			if out < 1 || out > s.NumPorts() {
				t.Fatalf("emitted on port %d", out)
			}
			if len(b) > limit {
				t.Fatalf("emitted %d bytes from a %d-byte input", len(b), len(pkt))
			}
		})
		_ = s.Snapshot()
	})
}
