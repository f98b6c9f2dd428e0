package rdma_test

import (
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/clock/clocktest"
	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/rdma"
	"github.com/PacketFive/hinic/internal/rdma/rdmatest"
)

const (
	nicMKey      = 0x0FEDCBA987654321
	nicWrongMKey = 0x0FEDCBA987654320
	nicLID       = 5
)

// frameSink keeps the frames a device sends.
type frameSink struct{ frames [][]byte }

func (s *frameSink) Deliver(f []byte) { s.frames = append(s.frames, append([]byte(nil), f...)) }

// mkeyNIC is an IB device at static LID 5 whose wire the test drives: it
// injects SMPs as an SM one hop away would send them and reads the
// answers.
type mkeyNIC struct {
	t    *testing.T
	clk  *clocktest.Fake
	link *rdmatest.Link
	n    *ibNode
	sink *frameSink
}

func newMKeyNIC(t *testing.T) *mkeyNIC {
	m := &mkeyNIC{t: t, clk: clocktest.New(), link: rdmatest.NewLink(1, rdmatest.Faults{}), sink: &frameSink{}}
	m.n = newIBNode(t, m.link.B(), m.clk, 0x0248_4eff_fe00_0e00, nicLID)
	m.link.Connect(m.sink, m.n.dev)
	return m
}

// ask delivers an SMP (directed route, one hop, or LID-routed to LID 5)
// and returns the answer, or nil when the device sent none.
func (m *mkeyNIC) ask(directed bool, method uint8, attr uint16, key uint64, data []byte) proto.SMP {
	m.t.Helper()
	f := proto.SMPFields{BaseVersion: proto.MADBaseVersion, MgmtClass: proto.MgmtClassSubnLID,
		ClassVersion: proto.SMClassVersion, Method: method, TransactionID: 77, AttributeID: attr, MKey: key}
	lrh := proto.LRHFields{VL: 15, DLID: nicLID, SLID: 1}
	if directed {
		f.MgmtClass = proto.MgmtClassSubnDirectedRoute
		f.DrSLID, f.DrDLID = proto.SMPPermissiveLID, proto.SMPPermissiveLID
		f.HopCount, f.HopPointer = 1, 1
		f.InitialPath[1] = 1
		lrh.DLID, lrh.SLID = proto.LIDPermissive, proto.LIDPermissive
	}
	mad := make([]byte, proto.MADSize)
	proto.SMP(mad).Encode(&f)
	copy(proto.SMP(mad).Data(), data)
	m.sink.frames = nil
	m.n.dev.Deliver(ibFrame(m.t, proto.PacketFields{LRH: lrh,
		BTH: proto.BTHFields{Opcode: proto.OpUDSendOnly, PKey: 0xFFFF, DestQP: 0}, Payload: mad}))
	rdmatest.Settle([]*rdma.Device{m.n.dev}, m.link)
	switch len(m.sink.frames) {
	case 0:
		return nil
	case 1:
	default:
		m.t.Fatalf("%d answers", len(m.sink.frames))
	}
	pkt, err := proto.Parse(m.sink.frames[0], proto.LinkIB)
	if err != nil || pkt.BTH == nil {
		m.t.Fatalf("answer does not parse: %v", err)
	}
	r := proto.SMP(pkt.Payload)
	if r.Method() != proto.MADMethodGetResp || r.TransactionID() != 77 {
		m.t.Fatalf("answer method %#x tid %d", r.Method(), r.TransactionID())
	}
	return r
}

// portInfo reads PortInfo with the right M_Key.
func (m *mkeyNIC) portInfo() proto.PortInfoFields {
	m.t.Helper()
	r := m.ask(true, proto.MADMethodGet, proto.SMPAttrPortInfo, nicMKey, nil)
	if r == nil || r.Status() != 0 {
		m.t.Fatal("Get PortInfo with the right M_Key not answered")
	}
	return proto.PortInfo(r.Data()).Fields()
}

// setPortInfo sends a PortInfo Set of pi with key and reports whether it
// was answered with status 0.
func (m *mkeyNIC) setPortInfo(directed bool, key uint64, pi proto.PortInfoFields) bool {
	m.t.Helper()
	pi.PortState = proto.PortStateNoChange
	b := make([]byte, proto.SMPDataSize)
	proto.PortInfo(b).Encode(&pi)
	r := m.ask(directed, proto.MADMethodSet, proto.SMPAttrPortInfo, key, b)
	return r != nil && r.Status() == 0
}

// protect gives the port nicMKey at level prot with the lease, as an SM
// does while the port's M_Key is still 0.
func (m *mkeyNIC) protect(prot uint8, lease uint16) {
	m.t.Helper()
	pi := m.portInfo()
	pi.MKey, pi.MKeyProtectBits, pi.MKeyLeasePeriod = nicMKey, prot, lease
	if !m.setPortInfo(true, 0, pi) {
		m.t.Fatal("setting the M_Key refused")
	}
	if got := m.portInfo(); got.MKey != nicMKey || got.MKeyProtectBits != prot || got.MKeyLeasePeriod != lease {
		m.t.Fatalf("M_Key state after the Set: %+v", got)
	}
}

// TestNICMKeyProtection: the NIC's SMA drops wrong-key Sets at every level
// (directed, LID-routed and from the host alike), answers wrong-key Gets
// in full at level 0 and with M_Key 0 at level 1, drops them at levels 2
// and 3, counts each violation, and obeys the right key.
func TestNICMKeyProtection(t *testing.T) {
	for prot := range uint8(4) {
		t.Run(string(rune('0'+prot)), func(t *testing.T) {
			m := newMKeyNIC(t)
			m.protect(prot, 0)
			viol := uint16(0)
			pi := m.portInfo()
			moved := pi
			moved.LID = 9

			for _, directed := range []bool{true, false} {
				if m.setPortInfo(directed, nicWrongMKey, moved) {
					t.Errorf("wrong-key Set (directed %v) accepted", directed)
				}
				viol++
			}
			// The host's own SMI (ib_mad's process_mad) gets no
			// exemption.
			local := make([]byte, proto.MADSize)
			proto.SMP(local).Encode(&proto.SMPFields{BaseVersion: proto.MADBaseVersion, MgmtClass: proto.MgmtClassSubnLID,
				ClassVersion: proto.SMClassVersion, Method: proto.MADMethodSet, AttributeID: proto.SMPAttrPortInfo, MKey: nicWrongMKey})
			proto.PortInfo(proto.SMP(local).Data()).Encode(&moved)
			if r, err := m.n.dev.LocalSMP(local); err != nil || r != nil {
				t.Errorf("wrong-key local Set: answer %v, %v", r != nil, err)
			}
			viol++
			if m.n.dev.QueryPort().LID != nicLID {
				t.Fatalf("wrong-key Set changed the LID")
			}

			r := m.ask(false, proto.MADMethodGet, proto.SMPAttrPortInfo, nicWrongMKey, nil)
			switch prot {
			case 0:
				if r == nil || proto.PortInfo(r.Data()).MKey() != nicMKey {
					t.Errorf("level 0 Get: want the answer with the M_Key (answered %v)", r != nil)
				}
			case 1:
				if r == nil || proto.PortInfo(r.Data()).MKey() != 0 || proto.PortInfo(r.Data()).LID() != nicLID {
					t.Errorf("level 1 Get: want the answer with M_Key 0 (answered %v)", r != nil)
				}
			default:
				if r != nil {
					t.Errorf("level %d wrong-key Get answered", prot)
				}
				viol++
			}
			r = m.ask(true, proto.MADMethodGet, proto.SMPAttrNodeInfo, nicWrongMKey, nil)
			if (r == nil) != (prot >= 2) {
				t.Errorf("level %d wrong-key Get NodeInfo answered %v", prot, r != nil)
			}
			if prot >= 2 {
				viol++
			}

			if got := m.portInfo(); got.MKeyViolations != viol || got.MKey != nicMKey || got.MKeyProtectBits != prot {
				t.Errorf("after the violations: M_KeyViolations %d (want %d), %+v", got.MKeyViolations, viol, got)
			}
			if c := m.n.dev.Counters(); c.SMPMKeyDrops != uint64(viol) {
				t.Errorf("SMPMKeyDrops %d, want %d", c.SMPMKeyDrops, viol)
			}
			moved.MKeyViolations = 0 // the SM resets the counter
			if !m.setPortInfo(false, nicMKey, moved) || m.n.dev.QueryPort().LID != 9 {
				t.Fatal("right-key Set not applied")
			}
			if got := m.portInfo(); got.MKeyViolations != 0 {
				t.Errorf("M_KeyViolations %d after the SM reset it", got.MKeyViolations)
			}
		})
	}
}

// TestNICMKeyLease: after a violation, M_KeyLeasePeriod seconds without a
// right-key SMP drop the protection to level 0 (the M_Key stays); a
// right-key SMP in time stops the lease.
func TestNICMKeyLease(t *testing.T) {
	wrongGet := func(m *mkeyNIC) proto.SMP {
		return m.ask(true, proto.MADMethodGet, proto.SMPAttrPortInfo, nicWrongMKey, nil)
	}
	t.Run("expires", func(t *testing.T) {
		m := newMKeyNIC(t)
		m.protect(3, 10)
		if wrongGet(m) != nil {
			t.Fatal("level 3 wrong-key Get answered")
		}
		m.clk.Advance(9 * time.Second)
		if wrongGet(m) != nil {
			t.Fatal("answered before the lease ran out")
		}
		m.clk.Advance(time.Second)
		r := wrongGet(m)
		if r == nil {
			t.Fatal("wrong-key Get dropped after the lease ran out")
		}
		if pi := proto.PortInfo(r.Data()).Fields(); pi.MKey != nicMKey || pi.MKeyProtectBits != 0 || pi.MKeyViolations != 2 {
			t.Errorf("after the lease: key %#x protect %d violations %d", pi.MKey, pi.MKeyProtectBits, pi.MKeyViolations)
		}
		pi := m.portInfo()
		pi.LID = 9
		if m.setPortInfo(true, nicWrongMKey, pi) {
			t.Error("wrong-key Set accepted at level 0")
		}
	})
	t.Run("right key in time", func(t *testing.T) {
		m := newMKeyNIC(t)
		m.protect(2, 10)
		wrongGet(m)
		m.clk.Advance(5 * time.Second)
		m.portInfo()
		m.clk.Advance(time.Hour)
		if wrongGet(m) != nil {
			t.Error("protection dropped although the right key came in time")
		}
	})
}

// TestNICMKeyZero: with M_Key 0 (the power-on value, and OpenSM's default)
// SMPs with any M_Key are answered, whatever the protection bits.
func TestNICMKeyZero(t *testing.T) {
	m := newMKeyNIC(t)
	pi := m.portInfo()
	pi.MKeyProtectBits = 3
	if !m.setPortInfo(true, nicWrongMKey, pi) {
		t.Fatal("Set refused with M_Key 0")
	}
	if r := m.ask(false, proto.MADMethodGet, proto.SMPAttrNodeInfo, nicWrongMKey, nil); r == nil {
		t.Fatal("Get refused with M_Key 0")
	}
	if m.portInfo().MKeyViolations != 0 || m.n.dev.Counters().SMPMKeyDrops != 0 {
		t.Error("violations counted with M_Key 0")
	}
}
