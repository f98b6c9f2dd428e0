package proto

import (
	"bytes"
	"reflect"
	"testing"
)

// madGoldenDRGetNodeInfo returns an OpenSM-style directed-route Get
// NodeInfo, two hops out through port 1 of the SM's node and port 3 of the
// next switch, as OpenSM hands it to the kernel (HopPointer 0).
func madGoldenDRGetNodeInfo(t testing.TB) []byte {
	return madBuild(t, MADSize,
		0, `01 81 01 01               // BaseVersion 1, SubnDirectedRoute, ClassVersion 1, R=0 Get
		    00 00                     // D=0, Status 0
		    00 02                     // HopPointer 0, HopCount 2
		    00 00 00 00 12 34 56 78   // TransactionID 0x12345678
		    00 11 00 00               // AttributeID NodeInfo, reserved
		    00 00 00 00               // AttributeModifier 0
		    00 00 00 00 00 00 00 00   // M_Key 0
		    ff ff ff ff               // DrSLID 0xFFFF, DrDLID 0xFFFF
		    // bytes 36..127 (reserved, SMP data) are zero`,
		128, `00 01 03                // InitialPath: [0] unused, [1] port 1, [2] port 3
		    // rest of InitialPath and all of ReturnPath zero`)
}

// Reserved bytes of the two SMP layouts as SMP.Encode zeroes them.
var (
	madSMPDRReserved  = madHeaderReserved.with(madSpan(smpDRReserved, smpData))
	madSMPLIDReserved = madHeaderReserved.with(madSpan(smpHopPointer, smpHopCount+1),
		madSpan(smpLIDReserved, smpData), madSpan(smpInitialPath, MADSize))
)

func TestSMPGoldenDRGetNodeInfo(t *testing.T) {
	b := madGoldenDRGetNodeInfo(t)
	s, err := ParseSMP(b)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"BaseVersion", uint64(s.BaseVersion()), 1},
		{"MgmtClass", uint64(s.MgmtClass()), MgmtClassSubnDirectedRoute},
		{"ClassVersion", uint64(s.ClassVersion()), SMClassVersion},
		{"Method", uint64(s.Method()), MADMethodGet},
		{"Status", uint64(s.Status()), 0},
		{"HopPointer", uint64(s.HopPointer()), 0},
		{"HopCount", uint64(s.HopCount()), 2},
		{"TransactionID", s.TransactionID(), 0x0000000012345678},
		{"AttributeID", uint64(s.AttributeID()), SMPAttrNodeInfo},
		{"AttributeModifier", uint64(s.AttributeModifier()), 0},
		{"MKey", s.MKey(), 0},
		{"DrSLID", uint64(s.DrSLID()), SMPPermissiveLID},
		{"DrDLID", uint64(s.DrDLID()), SMPPermissiveLID},
		{"InitialPath[1]", uint64(s.InitialPath()[1]), 1},
		{"InitialPath[2]", uint64(s.InitialPath()[2]), 3},
		{"MAD.ClassSpecific", uint64(s.MAD().ClassSpecific()), 0x0002},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if !s.IsDirectedRoute() || s.Direction() || s.IsResponse() {
		t.Errorf("IsDirectedRoute %v Direction %v IsResponse %v",
			s.IsDirectedRoute(), s.Direction(), s.IsResponse())
	}
	if len(s.Data()) != SMPDataSize || !bytes.Equal(s.Data(), make([]byte, SMPDataSize)) {
		t.Error("Data is not 64 zero bytes")
	}
	if len(s.InitialPath()) != SMPPathSize || len(s.ReturnPath()) != SMPPathSize {
		t.Error("path length")
	}
	if !bytes.Equal(s.ReturnPath(), make([]byte, SMPPathSize)) {
		t.Error("ReturnPath not zero")
	}

	// Encoding the same fields gives the same bytes.
	f := SMPFields{
		BaseVersion: 1, MgmtClass: MgmtClassSubnDirectedRoute, ClassVersion: 1,
		Method: MADMethodGet, HopCount: 2, TransactionID: 0x12345678,
		AttributeID: SMPAttrNodeInfo, DrSLID: SMPPermissiveLID, DrDLID: SMPPermissiveLID,
	}
	f.InitialPath[1], f.InitialPath[2] = 1, 3
	if got := s.Fields(); !reflect.DeepEqual(got, f) {
		t.Errorf("Fields = %+v\nwant %+v", got, f)
	}
	enc := madFill(MADSize, 0xFF)
	clear(enc[smpData : smpData+SMPDataSize])
	SMP(enc).Encode(&f)
	if !bytes.Equal(enc, b) {
		t.Errorf("Encode:\n got %x\nwant %x", enc, b)
	}
}

func TestParseSMP(t *testing.T) {
	mk := func(class, hp, hc uint8) []byte {
		b := make([]byte, MADSize)
		b[madBaseVersion], b[madMgmtClass], b[smpHopPointer], b[smpHopCount] = 1, class, hp, hc
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"short", make([]byte, 100), ErrMADTruncated},
		{"long", make([]byte, 300), ErrMADTooLong},
		{"perfmgt", mk(MgmtClassPerfMgt, 0, 0), ErrMADClass},
		{"sa", mk(MgmtClassSubnAdm, 0, 0), ErrMADClass},
		{"lid routed", mk(MgmtClassSubnLID, 0, 0), nil},
		// Bytes 6..7 are reserved in a LID-routed SMP: not checked.
		{"lid routed junk hops", mk(MgmtClassSubnLID, 0xFF, 0xFF), nil},
		{"dr local", mk(MgmtClassSubnDirectedRoute, 0, 0), nil},
		{"dr local arrived", mk(MgmtClassSubnDirectedRoute, 1, 0), nil},
		{"dr max hops", mk(MgmtClassSubnDirectedRoute, 64, 63), nil},
		{"dr hop count 64", mk(MgmtClassSubnDirectedRoute, 0, 64), ErrMADMalformed},
		{"dr hop count 255", mk(MgmtClassSubnDirectedRoute, 0, 255), ErrMADMalformed},
		{"dr hop pointer beyond", mk(MgmtClassSubnDirectedRoute, 4, 2), ErrMADMalformed},
		{"dr hop pointer at end", mk(MgmtClassSubnDirectedRoute, 3, 2), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSMP(tt.in)
			if err != tt.want {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if err != nil && s != nil {
				t.Fatal("view returned with error")
			}
		})
	}
}

func TestSMPMakeResponse(t *testing.T) {
	t.Run("dr get at destination", func(t *testing.T) {
		b := madGoldenDRGetNodeInfo(t)
		s, _ := ParseSMP(b)
		// The SMP has travelled both hops: the switches recorded the ports it
		// entered by, and HopPointer is HopCount+1 at the destination.
		s.SetHopPointer(s.HopCount() + 1)
		s.ReturnPath()[1], s.ReturnPath()[2] = 5, 7
		ni, _ := ParseNodeInfo(s.Data())
		ni.Encode(&NodeInfoFields{BaseVersion: 1, ClassVersion: 1, NodeType: NodeTypeCA,
			NumPorts: 1, NodeGUID: 0x1111, PortGUID: 0x2222, LocalPortNum: 1})
		before := bytes.Clone(b)

		if !s.MakeResponse(MADStatusOK) {
			t.Fatal("MakeResponse = false")
		}
		if !s.Direction() {
			t.Error("D bit not set")
		}
		if s.Method() != MADMethodGetResp || !s.IsResponse() {
			t.Errorf("method %#02x, want 0x81", s.Method())
		}
		if s.TransactionID() != 0x12345678 {
			t.Errorf("TID %#x", s.TransactionID())
		}
		if s.Status() != 0 || s.MAD().Status() != 0x8000 {
			t.Errorf("status %#x raw %#x", s.Status(), s.MAD().Status())
		}
		if s.HopPointer() != 3 || s.HopCount() != 2 {
			t.Errorf("hops %d/%d changed", s.HopPointer(), s.HopCount())
		}
		// Only the Method byte and the D/status bytes change.
		diff := []int{}
		for i := range b {
			if b[i] != before[i] {
				diff = append(diff, i)
			}
		}
		if !reflect.DeepEqual(diff, []int{madMethod, madStatus}) {
			t.Errorf("changed bytes %v, want [3 4]", diff)
		}
	})
	t.Run("dr set with error status", func(t *testing.T) {
		b := madGoldenDRGetNodeInfo(t)
		s, _ := ParseSMP(b)
		s.SetMethod(MADMethodSet)
		if !s.MakeResponse(MADStatusInvalidField) {
			t.Fatal("MakeResponse = false")
		}
		if s.Method() != MADMethodGetResp || !s.Direction() ||
			s.Status() != MADStatusInvalidField {
			t.Errorf("method %#02x D %v status %#x", s.Method(), s.Direction(), s.Status())
		}
	})
	t.Run("lid routed get", func(t *testing.T) {
		s := SMP(make([]byte, MADSize))
		s.Encode(&SMPFields{BaseVersion: 1, MgmtClass: MgmtClassSubnLID, ClassVersion: 1,
			Method: MADMethodGet, TransactionID: 9, AttributeID: SMPAttrPortInfo})
		if !s.MakeResponse(MADStatusMethodAttrUnsupported) {
			t.Fatal("MakeResponse = false")
		}
		if s.Direction() || s.Method() != MADMethodGetResp ||
			s.Status() != MADStatusMethodAttrUnsupported || s.TransactionID() != 9 {
			t.Errorf("%+v", s.Fields())
		}
	})
	t.Run("trap repress", func(t *testing.T) {
		s := SMP(make([]byte, MADSize))
		s.Encode(&SMPFields{BaseVersion: 1, MgmtClass: MgmtClassSubnLID, ClassVersion: 1,
			Method: MADMethodTrap, AttributeID: SMPAttrNotice})
		if !s.MakeResponse(0) || s.Method() != MADMethodTrapRepress {
			t.Errorf("method %#02x", s.Method())
		}
		if s.MakeResponse(0) {
			t.Error("a TrapRepress got a response")
		}
	})
}

func TestSMPEncode(t *testing.T) {
	dr := SMPFields{
		BaseVersion: 1, MgmtClass: MgmtClassSubnDirectedRoute, ClassVersion: 1,
		Method: MADMethodGetResp, Status: 0x7F1C, Direction: true, HopPointer: 3, HopCount: 4,
		TransactionID: 0xFEEDFACECAFEBEEF, AttributeID: SMPAttrPortInfo,
		AttributeModifier: PortInfoAttrMod(7, true), MKey: 0x0123456789ABCDEF,
		DrSLID: 0x0001, DrDLID: SMPPermissiveLID,
	}
	for i := range dr.InitialPath {
		dr.InitialPath[i] = byte(i)
		dr.ReturnPath[i] = byte(0xFF - i)
	}
	lid := SMPFields{
		BaseVersion: 1, MgmtClass: MgmtClassSubnLID, ClassVersion: 1,
		Method: MADMethodSet, Status: 0xFFFF, TransactionID: 1,
		AttributeID: SMPAttrLinearForwardingTable, AttributeModifier: 2, MKey: 3,
	}
	// DR-only fields of a LID-routed SMP are ignored by Encode.
	lidJunk := lid
	lidJunk.Direction, lidJunk.HopPointer, lidJunk.HopCount = true, 9, 9
	lidJunk.DrSLID, lidJunk.DrDLID = 5, 6
	lidJunk.InitialPath[1], lidJunk.ReturnPath[1] = 1, 1

	tests := []struct {
		name     string
		f        SMPFields
		want     SMPFields
		reserved madMask
	}{
		{"dr", dr, dr, madSMPDRReserved},
		{"lid", lid, lid, madSMPLIDReserved},
		{"lid ignores dr fields", lidJunk, lid, madSMPLIDReserved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := madFill(MADSize, 0xFF)
			s := SMP(b)
			s.Encode(&tt.f)
			tt.reserved.checkZero(t, b)
			if !bytes.Equal(s.Data(), madFill(SMPDataSize, 0xFF)) {
				t.Error("Encode touched the SMP data")
			}
			if got := s.Fields(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Fields = %+v\nwant %+v", got, tt.want)
			}
			if _, err := ParseSMP(b); err != nil {
				t.Errorf("ParseSMP: %v", err)
			}
		})
	}
	// Every non-reserved bit is driven by some field: decode all ones,
	// encode into zeros, and only the reserved bits (and the data) differ.
	for _, class := range []uint8{MgmtClassSubnDirectedRoute, MgmtClassSubnLID} {
		ones := madFill(MADSize, 0xFF)
		ones[madMgmtClass] = class
		f := SMP(ones).Fields()
		got := make([]byte, MADSize)
		SMP(got).Encode(&f)
		want := bytes.Clone(ones)
		clear(want[smpData : smpData+SMPDataSize])
		if class == MgmtClassSubnDirectedRoute {
			madSMPDRReserved.clearIn(want)
		} else {
			madSMPLIDReserved.clearIn(want)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("class %#02x all-ones recode:\n got %x\nwant %x", class, got, want)
		}
	}
}

func TestSMPSetters(t *testing.T) {
	s := SMP(madGoldenDRGetNodeInfo(t))
	s.SetDirection(true)
	s.SetStatus(0xFFFF)
	if !s.Direction() || s.Status() != 0x7FFF || s.MAD().Status() != 0xFFFF {
		t.Errorf("D %v status %#x", s.Direction(), s.Status())
	}
	s.SetStatus(MADStatusBusy)
	if !s.Direction() || s.Status() != MADStatusBusy {
		t.Errorf("SetStatus lost D: raw %#x", s.MAD().Status())
	}
	s.SetDirection(false)
	if s.Direction() || s.Status() != MADStatusBusy {
		t.Errorf("SetDirection(false): raw %#x", s.MAD().Status())
	}
	s.SetHopPointer(2)
	s.SetHopCount(5)
	s.SetMKey(0xAB)
	s.SetDrSLID(0x10)
	s.SetDrDLID(0x20)
	s.SetAttributeModifier(0x80000003)
	if s.HopPointer() != 2 || s.HopCount() != 5 || s.MKey() != 0xAB || s.DrSLID() != 0x10 ||
		s.DrDLID() != 0x20 || s.AttributeModifier() != 0x80000003 {
		t.Errorf("setters: %+v", s.Fields())
	}

	// A LID-routed SMP has no D bit: Status keeps all 16 bits.
	l := SMP(make([]byte, MADSize))
	l[madMgmtClass] = MgmtClassSubnLID
	l.SetStatus(0x8001)
	if l.Direction() || l.Status() != 0x8001 {
		t.Errorf("LID-routed: D %v status %#x", l.Direction(), l.Status())
	}
}
