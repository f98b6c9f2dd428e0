package proto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// madHex decodes commented hex: everything from "//" to the end of a line
// is dropped, and so is white space.
func madHex(t testing.TB, s string) []byte {
	t.Helper()
	var clean strings.Builder
	for line := range strings.SplitSeq(s, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		t.Fatalf("bad test hex: %v", err)
	}
	return b
}

// madBuild returns size zero bytes with commented hex placed at offsets:
// parts alternate an int offset and a hex string.
func madBuild(t testing.TB, size int, parts ...any) []byte {
	t.Helper()
	b := make([]byte, size)
	for i := 0; i < len(parts); i += 2 {
		off := parts[i].(int)
		h := madHex(t, parts[i+1].(string))
		if off+len(h) > size {
			t.Fatalf("test hex at %d overruns %d bytes", off, size)
		}
		copy(b[off:], h)
	}
	return b
}

// madFill returns n bytes of value v.
func madFill(n int, v byte) []byte { return bytes.Repeat([]byte{v}, n) }

// madMask describes reserved bits: offset -> mask of reserved bits there.
type madMask map[int]byte

// madSpan returns a mask that reserves whole bytes [from, to).
func madSpan(from, to int) madMask {
	m := madMask{}
	for i := from; i < to; i++ {
		m[i] = 0xFF
	}
	return m
}

// with returns the union of m and others.
func (m madMask) with(others ...madMask) madMask {
	u := madMask{}
	for _, o := range append([]madMask{m}, others...) {
		for k, v := range o {
			u[k] |= v
		}
	}
	return u
}

// clearIn zeroes the reserved bits in b.
func (m madMask) clearIn(b []byte) {
	for off, bits := range m {
		if off < len(b) {
			b[off] &^= bits
		}
	}
}

// checkZero reports reserved bits that are set in b.
func (m madMask) checkZero(t testing.TB, b []byte) {
	t.Helper()
	for off, bits := range m {
		if off < len(b) && b[off]&bits != 0 {
			t.Errorf("reserved bits %#02x of byte %d are set: %#02x", bits, off, b[off])
		}
	}
}

var madHeaderReserved = madSpan(madReserved, madReserved+2)

func TestParseMAD(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"nil", nil, ErrMADTruncated},
		{"header only", make([]byte, MADHeaderSize), ErrMADTruncated},
		{"one short", make([]byte, MADSize-1), ErrMADTruncated},
		{"exact", make([]byte, MADSize), nil},
		{"one long", make([]byte, MADSize+1), ErrMADTooLong},
		// A bad BaseVersion still parses: the agent must answer it.
		{"bad version", madFill(MADSize, 0x77), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMAD(tt.in)
			if err != tt.want {
				t.Fatalf("ParseMAD err = %v, want %v", err, tt.want)
			}
			if err == nil && len(m) != MADSize {
				t.Fatalf("len = %d", len(m))
			}
			if err != nil && m != nil {
				t.Fatalf("view %v returned with error", m)
			}
		})
	}
}

func TestMADEncode(t *testing.T) {
	tests := []struct {
		name string
		f    MADFields
	}{
		{"zero", MADFields{}},
		{"perfquery get", MADFields{
			BaseVersion: MADBaseVersion, MgmtClass: MgmtClassPerfMgt, ClassVersion: 1,
			Method: MADMethodGet, TransactionID: 0x0102030405060708,
			AttributeID: PMAAttrPortCounters,
		}},
		{"all ones", MADFields{
			BaseVersion: 0xFF, MgmtClass: 0xFF, ClassVersion: 0xFF, Method: 0xFF,
			Status: 0xFFFF, ClassSpecific: 0xFFFF, TransactionID: ^uint64(0),
			AttributeID: 0xFFFF, AttributeModifier: 0xFFFFFFFF,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := madFill(MADSize, 0xFF)
			m := MAD(b)
			m.Encode(&tt.f)
			madHeaderReserved.checkZero(t, b)
			if !bytes.Equal(m.Data(), madFill(MADDataSize, 0xFF)) {
				t.Error("Encode touched the class data")
			}
			if got := m.Fields(); !reflect.DeepEqual(got, tt.f) {
				t.Errorf("Fields = %+v, want %+v", got, tt.f)
			}
			if m.IsResponse() != (tt.f.Method&0x80 != 0) {
				t.Error("IsResponse disagrees with the R bit")
			}
		})
	}
}

func TestMADGoldenPerfQuery(t *testing.T) {
	// perfquery's Get PortCounters for port 1 (the PerfMgt data begins at
	// byte 64 with the PortCounters attribute).
	b := madBuild(t, MADSize,
		0, `01 04 01 01               // BaseVersion 1, PerfMgt, ClassVersion 1, Get
		    00 00 00 00               // Status 0, ClassSpecific 0
		    00 00 00 2a 00 00 00 07   // TransactionID
		    00 12 00 00               // AttributeID PortCounters, reserved
		    00 00 00 00               // AttributeModifier 0`,
		64, `00 01 ff ff              // reserved, PortSelect 1, CounterSelect 0xFFFF`)
	m, err := ParseMAD(b)
	if err != nil {
		t.Fatal(err)
	}
	want := MADFields{
		BaseVersion: 1, MgmtClass: MgmtClassPerfMgt, ClassVersion: 1,
		Method: MADMethodGet, TransactionID: 0x0000002a00000007,
		AttributeID: PMAAttrPortCounters,
	}
	if got := m.Fields(); got != want {
		t.Fatalf("Fields = %+v, want %+v", got, want)
	}
	if got := m.Data()[64-MADHeaderSize+1]; got != 1 {
		t.Errorf("PortSelect through Data = %d", got)
	}
	enc := make([]byte, MADSize)
	copy(enc[MADHeaderSize:], b[MADHeaderSize:])
	MAD(enc).Encode(&want)
	if !bytes.Equal(enc, b) {
		t.Errorf("Encode:\n got %x\nwant %x", enc, b)
	}
}

func TestMADResponseMethod(t *testing.T) {
	tests := []struct {
		method uint8
		want   uint8
		ok     bool
	}{
		{MADMethodGet, MADMethodGetResp, true},
		{MADMethodSet, MADMethodGetResp, true},
		{MADMethodSend, 0, false},
		{MADMethodTrap, MADMethodTrapRepress, true},
		{MADMethodReport, MADMethodReportResp, true},
		{MADMethodTrapRepress, 0, false},
		{MADMethodGetTable, MADMethodGetTableResp, true},
		{MADMethodGetTraceTable, MADMethodGetTableResp, true},
		{MADMethodGetMulti, MADMethodGetMultiResp, true},
		{MADMethodDelete, MADMethodDeleteResp, true},
		{MADMethodGetResp, 0, false},
		{MADMethodGetTableResp, 0, false},
		{0x7F, 0xFF, true}, // unknown request: R bit set
	}
	for _, tt := range tests {
		got, ok := MADResponseMethod(tt.method)
		if got != tt.want || ok != tt.ok {
			t.Errorf("MADResponseMethod(%#02x) = %#02x, %v; want %#02x, %v",
				tt.method, got, ok, tt.want, tt.ok)
		}
	}
}

func TestMADMakeResponse(t *testing.T) {
	tests := []struct {
		name       string
		class      uint8
		method     uint8
		status     uint16
		ok         bool
		wantMethod uint8
		wantStatus uint16 // raw 16 bits
	}{
		{"pma get", MgmtClassPerfMgt, MADMethodGet, MADStatusOK, true, MADMethodGetResp, 0},
		{"pma set bad attr", MgmtClassPerfMgt, MADMethodSet, MADStatusInvalidField, true,
			MADMethodGetResp, MADStatusInvalidField},
		{"lid smp full status", MgmtClassSubnLID, MADMethodGet, 0x8004, true,
			MADMethodGetResp, 0x8004},
		{"dr smp sets D", MgmtClassSubnDirectedRoute, MADMethodGet, MADStatusBadVersion, true,
			MADMethodGetResp, 0x8000 | MADStatusBadVersion},
		{"dr smp status bit 15 is D", MgmtClassSubnDirectedRoute, MADMethodSet, 0x800C, true,
			MADMethodGetResp, 0x800C},
		{"send", MgmtClassCM, MADMethodSend, 0, false, MADMethodSend, 0x1234},
		{"response", MgmtClassPerfMgt, MADMethodGetResp, 0, false, MADMethodGetResp, 0x1234},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, MADSize)
			m := MAD(b)
			m.Encode(&MADFields{BaseVersion: 1, MgmtClass: tt.class, ClassVersion: 1,
				Method: tt.method, Status: 0x1234, TransactionID: 0xDEADBEEF,
				AttributeID: 0x15, AttributeModifier: 7})
			if got := m.MakeResponse(tt.status); got != tt.ok {
				t.Fatalf("MakeResponse = %v, want %v", got, tt.ok)
			}
			if m.Method() != tt.wantMethod || m.Status() != tt.wantStatus {
				t.Errorf("method %#02x status %#04x, want %#02x %#04x",
					m.Method(), m.Status(), tt.wantMethod, tt.wantStatus)
			}
			if m.TransactionID() != 0xDEADBEEF || m.AttributeID() != 0x15 ||
				m.AttributeModifier() != 7 {
				t.Errorf("TID/attribute changed: %+v", m.Fields())
			}
		})
	}
}

func TestMADVendorOUI(t *testing.T) {
	// An ibping request: vendor class 0x32 with the OpenIB OUI.
	b := madBuild(t, MADSize,
		0, `01 32 01 01               // BaseVersion 1, class 0x32, ClassVersion 1, Get
		    00 00 00 00 00 00 00 00 00 00 00 01 // Status, ClassSpecific, TID 1
		    00 00 00 00 00 00 00 00   // AttributeID 0, reserved, AttributeModifier 0`,
		36, `00 00 14 05              // reserved, OUI 00:14:05`)
	m, err := ParseMAD(b)
	if err != nil {
		t.Fatal(err)
	}
	if !IsVendorOUIClass(m.MgmtClass()) || m.MgmtClass() != MgmtClassIBPing {
		t.Errorf("class %#02x", m.MgmtClass())
	}
	if m.VendorOUI() != OUIOpenIB {
		t.Errorf("VendorOUI = %#06x", m.VendorOUI())
	}
	m.SetVendorOUI(0xAA123456)
	if m.VendorOUI() != 0x123456 || b[36] != 0 {
		t.Errorf("SetVendorOUI: %#06x, byte 36 %#02x", m.VendorOUI(), b[36])
	}
	for _, c := range []uint8{0x2F, 0x50, MgmtClassVendorFirst, MgmtClassSubnDirectedRoute} {
		if IsVendorOUIClass(c) {
			t.Errorf("IsVendorOUIClass(%#02x) = true", c)
		}
	}
}

func TestMADSetters(t *testing.T) {
	m := MAD(make([]byte, MADSize))
	m.SetMethod(MADMethodSet)
	m.SetStatus(0xA55A)
	m.SetClassSpecific(0x0102)
	m.SetTransactionID(0x1122334455667788)
	m.SetAttributeID(SMPAttrSMInfo)
	m.SetAttributeModifier(0xCAFEF00D)
	want := MADFields{Method: MADMethodSet, Status: 0xA55A, ClassSpecific: 0x0102,
		TransactionID: 0x1122334455667788, AttributeID: SMPAttrSMInfo,
		AttributeModifier: 0xCAFEF00D}
	if got := m.Fields(); got != want {
		t.Errorf("Fields = %+v, want %+v", got, want)
	}
}

// madSink keeps accessor results alive so the compiler cannot drop the
// calls in TestAccessorsDoNotAllocate.
var (
	madSinkU64   uint64
	madSinkBytes []byte
	madSinkBool  bool
)

func TestAccessorsDoNotAllocate(t *testing.T) {
	b := madGoldenDRGetNodeInfo(t)
	pb := madBuild(t, MADSize, 0, `01 04 01 81`)
	allocs := testing.AllocsPerRun(100, func() {
		s, err := ParseSMP(b)
		if err != nil {
			panic(err)
		}
		m := s.MAD()
		madSinkU64 = m.TransactionID() + uint64(m.AttributeID()) + uint64(m.AttributeModifier()) +
			uint64(m.Status()) + uint64(m.ClassSpecific()) + uint64(m.VendorOUI())
		madSinkU64 += uint64(s.Status()) + uint64(s.HopPointer()) + uint64(s.HopCount()) +
			s.MKey() + uint64(s.DrSLID()) + uint64(s.DrDLID())
		madSinkBool = s.Direction() && s.IsDirectedRoute()
		madSinkBytes = s.InitialPath()
		madSinkBytes = s.ReturnPath()
		madSinkBytes = m.Data()
		ni, _ := ParseNodeInfo(s.Data())
		madSinkU64 += ni.NodeGUID() + ni.PortGUID() + uint64(ni.VendorID())
		pi, _ := ParsePortInfo(s.Data())
		madSinkU64 += pi.GIDPrefix() + uint64(pi.PortState()) + uint64(pi.LinkRoundTripLatency())
		nd, _ := ParseNodeDescription(s.Data())
		madSinkBytes = nd.NodeString()
		lft, _ := ParseLinearForwardingTable(s.Data())
		madSinkBytes = lft.Ports()
		gi, _ := ParseGUIDInfo(s.Data())
		madSinkU64 += gi.GUID(7)
		p, err := ParsePerfMgtMAD(pb)
		if err != nil {
			panic(err)
		}
		pc, _ := ParsePortCounters(p.Data())
		madSinkU64 += uint64(pc.PortXmitData()) + uint64(pc.ExcessiveBufferOverrunErrors())
		cpi, _ := ParseClassPortInfo(p.Data())
		madSinkBytes = cpi.RedirectGID()
		madSinkU64 += uint64(cpi.TrapQP())
		f := pi.Fields()
		madSinkU64 += uint64(f.LID)
	})
	if allocs != 0 {
		t.Errorf("accessors allocated %v times per run", allocs)
	}
}

func TestMADErrorsAreDistinct(t *testing.T) {
	errs := []error{ErrMADTruncated, ErrMADTooLong, ErrMADClass, ErrMADMalformed}
	for i, a := range errs {
		for j, b := range errs {
			if (i == j) != errors.Is(a, b) {
				t.Errorf("errors.Is(%v, %v) = %v", a, b, errors.Is(a, b))
			}
		}
	}
}

func BenchmarkParseMAD(b *testing.B) {
	buf := madGoldenDRGetNodeInfo(b)
	b.ReportAllocs()
	b.SetBytes(MADSize)
	var sum uint64
	for b.Loop() {
		m, err := ParseMAD(buf)
		if err != nil {
			b.Fatal(err)
		}
		sum += m.TransactionID() + uint64(m.AttributeID()) + uint64(m.MgmtClass()) +
			uint64(m.AttributeModifier())
	}
	madSinkU64 = sum
}

func BenchmarkParseSMPNodeInfo(b *testing.B) {
	buf := madGoldenDRGetNodeInfo(b)
	b.ReportAllocs()
	b.SetBytes(MADSize)
	var sum uint64
	for b.Loop() {
		s, err := ParseSMP(buf)
		if err != nil {
			b.Fatal(err)
		}
		ni, err := ParseNodeInfo(s.Data())
		if err != nil {
			b.Fatal(err)
		}
		sum += s.TransactionID() + uint64(s.HopCount()) + uint64(s.InitialPath()[1]) +
			ni.NodeGUID()
	}
	madSinkU64 = sum
}
