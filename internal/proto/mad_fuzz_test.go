package proto

import (
	"bytes"
	"math"
	"reflect"
	"testing"
)

// madFuzzSeeds adds the seeds every MAD fuzz target starts from.
func madFuzzSeeds(f *testing.F) {
	// OpenSM's DR Get NodeInfo, two hops out.
	f.Add(madGoldenDRGetNodeInfo(f))
	// OpenSM's DR Set PortInfo, one hop out, byte 43 = 0x4C.
	f.Add(madGoldenPortInfoSet(f))
	// A PMA's GetResp PortCounters.
	f.Add(madGoldenPortCountersResp(f))
	// A DR SMP with the largest hop count, arrived (HopPointer 64).
	maxHops := madGoldenDRGetNodeInfo(f)
	maxHops[smpHopPointer], maxHops[smpHopCount] = 64, 63
	f.Add(maxHops)
	// A DR SMP with an impossible hop count.
	badHops := madGoldenDRGetNodeInfo(f)
	badHops[smpHopCount] = 200
	f.Add(badHops)
	// All ones, all zeros, and the wrong lengths.
	f.Add(madFill(MADSize, 0xFF))
	f.Add(make([]byte, MADSize))
	f.Add(make([]byte, MADSize-1))
	f.Add(make([]byte, MADSize+1))
	f.Add([]byte{})
}

// madCheckHeaderRecode checks that re-encoding the decoded header of m
// reproduces m, reserved bytes aside.
func madCheckHeaderRecode(t *testing.T, m MAD) {
	h := m.Fields()
	got := bytes.Clone(m)
	MAD(got).Encode(&h)
	want := bytes.Clone(m)
	madHeaderReserved.clearIn(want)
	if !bytes.Equal(got, want) {
		t.Fatalf("header recode:\n got %x\nwant %x", got, want)
	}
}

// madCheckResponse checks MakeResponse on a copy of m: the method turns
// into a response or nothing changes, the TID always survives, and a DR SMP
// gets its D bit.
func madCheckResponse(t *testing.T, m MAD) {
	r := MAD(bytes.Clone(m))
	ok := r.MakeResponse(MADStatusInvalidField)
	if r.TransactionID() != m.TransactionID() || r.AttributeID() != m.AttributeID() ||
		!bytes.Equal(r[madClassSpecific:], m[madClassSpecific:]) {
		t.Fatal("MakeResponse changed more than method and status")
	}
	if !ok {
		if !bytes.Equal(r, m) {
			t.Fatal("MakeResponse reported false but changed the MAD")
		}
		return
	}
	if !r.IsResponse() && r.Method() != MADMethodTrapRepress {
		t.Fatalf("response method %#02x", r.Method())
	}
	if m.MgmtClass() == MgmtClassSubnDirectedRoute && !SMP(r).Direction() {
		t.Fatal("DR response without D")
	}
}

// FuzzParseMAD: ParseMAD never panics, accepts exactly the 256-byte inputs,
// and the header recodes to the same bytes.
func FuzzParseMAD(f *testing.F) {
	madFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMAD(b)
		if (err == nil) != (len(b) == MADSize) {
			t.Fatalf("len %d: err %v", len(b), err)
		}
		if err != nil {
			return
		}
		_ = m.IsResponse()
		_ = m.VendorOUI()
		_ = m.Data()
		madCheckHeaderRecode(t, m)
		madCheckResponse(t, m)
	})
}

// FuzzParseSMP: ParseSMP never panics; what it accepts has safe hop fields
// and recodes (SMP.Fields then SMP.Encode over a copy) to the same bytes,
// reserved bytes aside; SMP data is left to the attribute.
func FuzzParseSMP(f *testing.F) {
	madFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSMP(b)
		if err != nil {
			return
		}
		if s.IsDirectedRoute() {
			if s.HopCount() > SMPMaxHopCount || int(s.HopPointer()) > int(s.HopCount())+1 {
				t.Fatalf("accepted hops %d/%d", s.HopPointer(), s.HopCount())
			}
			_ = s.InitialPath()[s.HopCount()]
			_ = s.ReturnPath()[s.HopCount()]
		}
		fields := s.Fields()
		got := bytes.Clone(s)
		SMP(got).Encode(&fields)
		want := bytes.Clone(s)
		if s.IsDirectedRoute() {
			madSMPDRReserved.clearIn(want)
		} else {
			madSMPLIDReserved.clearIn(want)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("SMP recode:\n got %x\nwant %x", got, want)
		}
		madCheckResponse(t, s.MAD())

		// Setting every field from its getter changes nothing.
		same := SMP(bytes.Clone(s))
		same.SetStatus(s.Status())
		same.SetDirection(s.Direction())
		same.SetHopPointer(s.HopPointer())
		same.SetHopCount(s.HopCount())
		same.SetMKey(s.MKey())
		same.SetDrSLID(s.DrSLID())
		same.SetDrDLID(s.DrDLID())
		same.SetMethod(s.Method())
		same.SetAttributeModifier(s.AttributeModifier())
		if !bytes.Equal(same, s) {
			t.Fatalf("setters from getters changed the SMP:\n got %x\nwant %x", []byte(same), []byte(s))
		}
	})
}

// FuzzParsePerfMgtMAD: ParsePerfMgtMAD never panics and what it accepts
// recodes to the same header bytes, reserved bytes aside.
func FuzzParsePerfMgtMAD(f *testing.F) {
	madFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePerfMgtMAD(b)
		if err != nil {
			return
		}
		h := p.Fields()
		got := bytes.Clone(p)
		PerfMgtMAD(got).Encode(&h)
		want := bytes.Clone(p)
		madPerfMgtReserved.clearIn(want)
		if !bytes.Equal(got, want) {
			t.Fatalf("PerfMgt recode:\n got %x\nwant %x", got, want)
		}
		madCheckResponse(t, p.MAD())
	})
}

// madFuzzRecode parses b as one attribute and, if it parses, checks that
// Fields then Encode over a copy reproduces b with reserved bits zeroed,
// never touching the bytes past size. canon, if set, replaces the reserved
// mask (for NodeDescription, whose bytes past the first NUL are not kept).
func madFuzzRecode[V madView[F], F any](t *testing.T, b []byte, parse func([]byte) (V, error),
	size int, reserved madMask, canon func([]byte)) {
	v, err := parse(b)
	if (err == nil) != (len(b) >= size) {
		t.Fatalf("len %d size %d: err %v", len(b), size, err)
	}
	if err != nil {
		return
	}
	if len(v) != size {
		t.Fatalf("view is %d bytes, want %d", len(v), size)
	}
	fields := v.Fields()
	got := bytes.Clone(b)
	V(got[:size]).Encode(&fields)
	want := bytes.Clone(b)
	if canon != nil {
		canon(want[:size])
	} else {
		reserved.clearIn(want[:size])
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("recode:\n got %x\nwant %x", got, want)
	}
	if again := V(got[:size]).Fields(); !reflect.DeepEqual(again, fields) {
		t.Fatalf("Fields after recode:\n got %+v\nwant %+v", again, fields)
	}
}

// FuzzParseAttributes feeds the same bytes to every attribute parser
// (NodeInfo, NodeDescription, SwitchInfo, PortInfo, the forwarding tables,
// P_KeyTable, GUIDInfo, SMInfo, PortCounters, ClassPortInfo): none panics,
// each accepts exactly the inputs long enough, and each recodes to the
// same bytes with its reserved bits zeroed.
func FuzzParseAttributes(f *testing.F) {
	// SMP data of OpenSM's Set PortInfo.
	f.Add(madGoldenPortInfoSet(f)[smpData : smpData+SMPDataSize])
	// PerfMgt data of a PortCounters GetResp, with the rest of the MAD.
	f.Add(madGoldenPortCountersResp(f)[pmaData:])
	// A NodeDescription with a NUL inside and junk after it.
	f.Add(append([]byte("sw\x00junk"), bytes.Repeat([]byte{'x'}, 70)...))
	// A description cut in the middle of a UTF-8 character at byte 64.
	f.Add([]byte(string(bytes.Repeat([]byte{'y'}, 63)) + "é"))
	f.Add(madFill(ClassPortInfoSize, 0xFF))
	f.Add(make([]byte, 20))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		madFuzzRecode(t, b, ParseNodeInfo, NodeInfoSize, nil, nil)
		madFuzzRecode(t, b, ParseNodeDescription, NodeDescriptionSize, nil, func(d []byte) {
			if i := bytes.IndexByte(d, 0); i >= 0 {
				clear(d[i:])
			}
		})
		madFuzzRecode(t, b, ParseSwitchInfo, SwitchInfoSize, madSwitchInfoReserved, nil)
		madFuzzRecode(t, b, ParsePortInfo, PortInfoSize, madPortInfoReserved, nil)
		madFuzzRecode(t, b, ParseLinearForwardingTable, LinearForwardingTableSize, nil, nil)
		madFuzzRecode(t, b, ParseMulticastForwardingTable, MulticastForwardingTableSize, nil, nil)
		madFuzzRecode(t, b, ParsePKeyTable, PKeyTableSize, nil, nil)
		madFuzzRecode(t, b, ParseGUIDInfo, GUIDInfoSize, nil, nil)
		madFuzzRecode(t, b, ParseSMInfo, SMInfoSize, nil, nil)
		madFuzzRecode(t, b, ParsePortCounters, PortCountersSize, madPortCountersReserved, nil)
		madFuzzRecode(t, b, ParsePortCountersExtended, PortCountersExtendedSize, madPortCountersExtReserved, nil)
		madFuzzRecode(t, b, ParseClassPortInfo, ClassPortInfoSize, madClassPortInfoReserved, nil)
	})
}

// FuzzPMACounterAdd: the saturating adds equal min(c+n, max) computed
// without overflow.
func FuzzPMACounterAdd(f *testing.F) {
	f.Add(uint32(0), uint64(0))
	f.Add(uint32(math.MaxUint32-1), uint64(1))
	f.Add(uint32(14), uint64(1))
	f.Add(uint32(1), uint64(math.MaxUint64))
	f.Fuzz(func(t *testing.T, c uint32, n uint64) {
		sat := func(c, n, max uint64) uint64 {
			if c >= max || n >= max-c {
				return max
			}
			return c + n
		}
		if got, want := uint64(PMACounterAdd32(c, n)), sat(uint64(c), n, math.MaxUint32); got != want {
			t.Fatalf("PMACounterAdd32(%d, %d) = %d, want %d", c, n, got, want)
		}
		if got, want := uint64(PMACounterAdd16(uint16(c), n)), sat(uint64(uint16(c)), n, math.MaxUint16); got != want {
			t.Fatalf("PMACounterAdd16(%d, %d) = %d, want %d", uint16(c), n, got, want)
		}
		if got, want := uint64(PMACounterAdd8(uint8(c), n)), sat(uint64(uint8(c)), n, math.MaxUint8); got != want {
			t.Fatalf("PMACounterAdd8(%d, %d) = %d, want %d", uint8(c), n, got, want)
		}
		if got, want := uint64(PMACounterAdd4(uint8(c), n)), sat(uint64(uint8(c)), n, 15); got != want {
			t.Fatalf("PMACounterAdd4(%d, %d) = %d, want %d", uint8(c), n, got, want)
		}
	})
}
