package proto

import (
	"bytes"
	"math"
	"reflect"
	"testing"
)

var madPerfMgtReserved = madHeaderReserved.with(madSpan(pmaReserved, pmaData))

// madGoldenPortCountersResp is a PMA's GetResp to perfquery for port 1.
func madGoldenPortCountersResp(t testing.TB) []byte {
	return madBuild(t, MADSize,
		0, `01 04 01 81               // BaseVersion 1, PerfMgt, ClassVersion 1, GetResp
		    00 00 00 00               // Status 0, ClassSpecific 0
		    00 00 00 2a 00 00 00 07   // TransactionID
		    00 12 00 00               // AttributeID PortCounters, reserved
		    00 00 00 00               // AttributeModifier 0
		    // bytes 24..63 reserved`,
		64, `00          // reserved
		     01          // PortSelect 1
		     ff ff       // CounterSelect: all
		     00 02       // SymbolErrorCounter 2
		     01          // LinkErrorRecoveryCounter 1
		     03          // LinkDownedCounter 3
		     00 04       // PortRcvErrors 4
		     00 05       // PortRcvRemotePhysicalErrors 5
		     00 06       // PortRcvSwitchRelayErrors 6
		     00 07       // PortXmitDiscards 7
		     08          // PortXmitConstraintErrors 8
		     09          // PortRcvConstraintErrors 9
		     00          // CounterSelect2 0
		     ab          // LocalLinkIntegrityErrors 10, ExcessiveBufferOverrunErrors 11
		     00 0c       // QP1Dropped 12
		     00 0d       // VL15Dropped 13
		     00 00 10 00 // PortXmitData 4096 (x4 octets)
		     00 00 20 00 // PortRcvData 8192 (x4 octets)
		     00 00 00 40 // PortXmitPkts 64
		     00 00 00 80 // PortRcvPkts 128
		     ff ff ff ff // PortXmitWait, saturated`)
}

var madGoldenPortCountersFields = PortCountersFields{
	PortSelect: 1, CounterSelect: 0xFFFF, SymbolErrorCounter: 2, LinkErrorRecoveryCounter: 1,
	LinkDownedCounter: 3, PortRcvErrors: 4, PortRcvRemotePhysicalErrors: 5,
	PortRcvSwitchRelayErrors: 6, PortXmitDiscards: 7, PortXmitConstraintErrors: 8,
	PortRcvConstraintErrors: 9, LocalLinkIntegrityErrors: 10, ExcessiveBufferOverrunErrors: 11,
	QP1Dropped: 12, VL15Dropped: 13, PortXmitData: 4096, PortRcvData: 8192, PortXmitPkts: 64,
	PortRcvPkts: 128, PortXmitWait: math.MaxUint32,
}

func TestParsePerfMgtMAD(t *testing.T) {
	good := madGoldenPortCountersResp(t)
	smp := madGoldenDRGetNodeInfo(t)
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"good", good, nil},
		{"short", good[:200], ErrMADTruncated},
		{"long", append(bytes.Clone(good), 0), ErrMADTooLong},
		{"smp", smp, ErrMADClass},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePerfMgtMAD(tt.in)
			if err != tt.want {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if err != nil && p != nil {
				t.Fatal("view returned with error")
			}
		})
	}
}

func TestPerfMgtMADGolden(t *testing.T) {
	b := madGoldenPortCountersResp(t)
	p, err := ParsePerfMgtMAD(b)
	if err != nil {
		t.Fatal(err)
	}
	if p.Method() != MADMethodGetResp || p.ClassVersion() != PerfMgtClassVersion ||
		p.Status() != 0 || p.TransactionID() != 0x0000002a00000007 ||
		p.AttributeID() != PMAAttrPortCounters || p.AttributeModifier() != 0 {
		t.Errorf("header: %+v", p.Fields())
	}
	if len(p.Data()) != PerfMgtDataSize || &p.Data()[0] != &b[PerfMgtDataOffset] {
		t.Error("Data does not alias bytes 64..255")
	}
	pc, err := ParsePortCounters(p.Data())
	if err != nil {
		t.Fatal(err)
	}
	if got := pc.Fields(); !reflect.DeepEqual(got, madGoldenPortCountersFields) {
		t.Errorf("Fields:\n got %+v\nwant %+v", got, madGoldenPortCountersFields)
	}

	// Re-encode the header over 0xFF: reserved bytes come out zero and the
	// attribute is untouched.
	enc := madFill(MADSize, 0xFF)
	copy(enc[pmaData:], b[pmaData:])
	h := p.Fields()
	PerfMgtMAD(enc).Encode(&h)
	madPerfMgtReserved.checkZero(t, enc)
	if !bytes.Equal(enc, b) {
		t.Errorf("Encode:\n got %x\nwant %x", enc, b)
	}
	if p.MAD().MgmtClass() != MgmtClassPerfMgt {
		t.Error("MAD view")
	}
}

func TestPerfMgtMADMakeResponse(t *testing.T) {
	b := madGoldenPortCountersResp(t)
	p, _ := ParsePerfMgtMAD(b)
	p.MAD().SetMethod(MADMethodSet)
	if !p.MakeResponse(MADStatusOK) || p.Method() != MADMethodGetResp || p.Status() != 0 {
		t.Errorf("Set -> %#02x status %#x", p.Method(), p.Status())
	}
	if p.MakeResponse(MADStatusOK) {
		t.Error("a response got a response")
	}
	p.MAD().SetMethod(MADMethodGet)
	if !p.MakeResponse(MADStatusMethodAttrUnsupported) ||
		p.Status() != MADStatusMethodAttrUnsupported {
		t.Errorf("status %#x", p.Status())
	}
}

func TestPortCounters(t *testing.T) {
	golden := bytes.Clone(madGoldenPortCountersResp(t)[pmaData : pmaData+PortCountersSize])
	madAttrCase(t, ParsePortCounters, PortCountersSize, madPortCountersReserved,
		madGoldenPortCountersFields, golden)

	// Nibbles are masked, not spilled into the neighbour.
	f := PortCountersFields{LocalLinkIntegrityErrors: 0x1F, ExcessiveBufferOverrunErrors: 0xF2}
	b := make([]byte, PortCountersSize)
	PortCounters(b).Encode(&f)
	if b[pcLinkIntegrityBufferOverrun] != 0xF2 {
		t.Errorf("byte 19 = %#02x, want 0xf2", b[pcLinkIntegrityBufferOverrun])
	}
}

func TestPortCountersExtended(t *testing.T) {
	golden := madHex(t, `
		00 01 00 ff               // reserved, PortSelect 1, CounterSelect 0x00ff
		00 00 00 00               // reserved
		00 00 00 00 00 00 00 0a   // PortXmitData 10 words
		00 00 00 00 00 00 00 14   // PortRcvData 20 words
		00 00 00 00 00 00 00 03   // PortXmitPkts
		00 00 00 00 00 00 00 04   // PortRcvPkts
		00 00 00 00 00 00 00 02   // PortUnicastXmitPkts
		00 00 00 00 00 00 00 03   // PortUnicastRcvPkts
		00 00 00 00 00 00 00 01   // PortMulticastXmitPkts
		01 00 00 00 00 00 00 01   // PortMulticastRcvPkts, top bit used
	`)
	madAttrCase(t, ParsePortCountersExtended, PortCountersExtendedSize, madPortCountersExtReserved,
		PortCountersExtendedFields{PortSelect: 1, CounterSelect: 0xFF,
			Counters: [8]uint64{10, 20, 3, 4, 2, 3, 1, 1<<56 | 1}}, golden)
	if _, err := ParsePortCountersExtended(make([]byte, PortCountersExtendedSize-1)); err == nil {
		t.Error("a short PortCountersExtended parsed")
	}
}

func TestClassPortInfo(t *testing.T) {
	golden := madHex(t, `
		01 01                     // BaseVersion 1, ClassVersion 1
		13 00                     // CapabilityMask: AllPortSelect|ExtendedWidth|XmitWait
		00 00 00 72               // CapabilityMask2 3, RespTimeValue 18
		fe 80 00 00 00 00 00 00 00 02 c9 03 00 a1 b2 c1 // RedirectGID
		12 34 56 78               // RedirectTC 0x12, RedirectSL 3, RedirectFL 0x45678
		00 07                     // RedirectLID 7
		ff ff                     // RedirectP_Key
		00 00 00 01               // rsv, RedirectQP 1
		80 01 00 00               // RedirectQ_Key
		fe 80 00 00 00 00 00 00 00 00 00 00 00 00 00 01 // TrapGID
		00 f0 00 01               // TrapTC 0, TrapSL 15, TrapFL 1
		00 01                     // TrapLID 1
		7f ff                     // TrapP_Key
		ff 00 00 01               // TrapHL 255, TrapQP 1
		80 01 00 00               // TrapQ_Key`)
	f := ClassPortInfoFields{
		BaseVersion: 1, ClassVersion: 1,
		CapabilityMask:  PMACapAllPortSelect | PMACapExtendedWidth | PMACapPortCountersXmitWait,
		CapabilityMask2: 3, RespTimeValue: 18,
		RedirectGID: [16]byte{0xfe, 0x80, 8: 0x00, 0x02, 0xc9, 0x03, 0x00, 0xa1, 0xb2, 0xc1},
		RedirectTC:  0x12, RedirectSL: 3, RedirectFL: 0x45678, RedirectLID: 7,
		RedirectPKey: 0xFFFF, RedirectQP: 1, RedirectQKey: 0x80010000,
		TrapGID: [16]byte{0xfe, 0x80, 15: 0x01},
		TrapSL:  15, TrapFL: 1, TrapLID: 1, TrapPKey: 0x7FFF, TrapHL: 255, TrapQP: 1,
		TrapQKey: 0x80010000,
	}
	madAttrCase(t, ParseClassPortInfo, ClassPortInfoSize, madClassPortInfoReserved, f, golden)

	c := ClassPortInfo(golden)
	if !bytes.Equal(c.RedirectGID(), f.RedirectGID[:]) || !bytes.Equal(c.TrapGID(), f.TrapGID[:]) {
		t.Error("GID accessors")
	}

	// Over-wide inputs are masked to their fields.
	wide := ClassPortInfoFields{CapabilityMask2: 0xFFFFFFFF, RespTimeValue: 0xFF,
		RedirectSL: 0xFF, RedirectFL: 0xFFFFFFFF, RedirectQP: 0xFFFFFFFF,
		TrapSL: 0xFF, TrapFL: 0xFFFFFFFF, TrapQP: 0xFFFFFFFF}
	b := make([]byte, ClassPortInfoSize)
	ClassPortInfo(b).Encode(&wide)
	got := ClassPortInfo(b)
	if got.CapabilityMask2() != 0x7FFFFFF || got.RespTimeValue() != 0x1F ||
		got.RedirectTC() != 0 || got.RedirectSL() != 0xF || got.RedirectFL() != 0xFFFFF ||
		b[cpiRedirectQP] != 0 || got.RedirectQP() != 0xFFFFFF ||
		got.TrapTC() != 0 || got.TrapHL() != 0 || got.TrapQP() != 0xFFFFFF {
		t.Errorf("masking: %x", b)
	}
}

func TestPMACounterAdd(t *testing.T) {
	t.Run("32", func(t *testing.T) {
		tests := []struct {
			c    uint32
			n    uint64
			want uint32
		}{
			{0, 0, 0}, {1, 2, 3}, {math.MaxUint32 - 1, 1, math.MaxUint32},
			{math.MaxUint32 - 1, 2, math.MaxUint32}, {math.MaxUint32, 1, math.MaxUint32},
			{5, math.MaxUint64, math.MaxUint32}, {0, 1 << 32, math.MaxUint32},
		}
		for _, tt := range tests {
			if got := PMACounterAdd32(tt.c, tt.n); got != tt.want {
				t.Errorf("PMACounterAdd32(%d, %d) = %d, want %d", tt.c, tt.n, got, tt.want)
			}
		}
	})
	t.Run("16", func(t *testing.T) {
		tests := []struct {
			c    uint16
			n    uint64
			want uint16
		}{
			{0, 0, 0}, {1, 2, 3}, {0xFFFE, 1, 0xFFFF}, {0xFFFE, 2, 0xFFFF},
			{0xFFFF, 0, 0xFFFF}, {0, 70000, 0xFFFF}, {3, math.MaxUint64, 0xFFFF},
		}
		for _, tt := range tests {
			if got := PMACounterAdd16(tt.c, tt.n); got != tt.want {
				t.Errorf("PMACounterAdd16(%d, %d) = %d, want %d", tt.c, tt.n, got, tt.want)
			}
		}
	})
	t.Run("8", func(t *testing.T) {
		tests := []struct {
			c    uint8
			n    uint64
			want uint8
		}{
			{0, 0, 0}, {1, 2, 3}, {254, 1, 255}, {254, 2, 255}, {255, 0, 255}, {0, 256, 255},
		}
		for _, tt := range tests {
			if got := PMACounterAdd8(tt.c, tt.n); got != tt.want {
				t.Errorf("PMACounterAdd8(%d, %d) = %d, want %d", tt.c, tt.n, got, tt.want)
			}
		}
	})
	t.Run("4", func(t *testing.T) {
		tests := []struct {
			c    uint8
			n    uint64
			want uint8
		}{
			{0, 0, 0}, {1, 2, 3}, {14, 1, 15}, {14, 2, 15}, {15, 0, 15}, {0, 16, 15},
			{0, 15, 15}, {200, 0, 15}, {0, math.MaxUint64, 15},
		}
		for _, tt := range tests {
			if got := PMACounterAdd4(tt.c, tt.n); got != tt.want {
				t.Errorf("PMACounterAdd4(%d, %d) = %d, want %d", tt.c, tt.n, got, tt.want)
			}
		}
	})
}
