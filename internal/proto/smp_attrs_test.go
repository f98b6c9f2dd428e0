package proto

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// madView is what every attribute view offers.
type madView[F any] interface {
	~[]byte
	Encode(*F)
	Fields() F
}

// madAttrCase checks one attribute layout against golden bytes:
//   - Encode(f) into a buffer pre-filled with 0xFF yields golden in the
//     first size bytes, zeroes the reserved bits and leaves the bytes past
//     size alone;
//   - Fields of the golden bytes is f;
//   - decoding all ones and encoding into zeros sets every bit but the
//     reserved ones (no field is forgotten or overlapping);
//   - parse rejects size-1 bytes and cuts longer input to size.
func madAttrCase[V madView[F], F any](t *testing.T, parse func([]byte) (V, error), size int,
	reserved madMask, f F, golden []byte) {
	t.Helper()
	if len(golden) != size {
		t.Fatalf("golden is %d bytes, want %d", len(golden), size)
	}
	buf := madFill(size+8, 0xFF)
	v, err := parse(buf)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if len(v) != size {
		t.Fatalf("parse returned %d bytes, want %d", len(v), size)
	}
	v.Encode(&f)
	if !bytes.Equal(buf[:size], golden) {
		t.Errorf("Encode:\n got %x\nwant %x", buf[:size], golden)
	}
	reserved.checkZero(t, buf[:size])
	if !bytes.Equal(buf[size:], madFill(8, 0xFF)) {
		t.Errorf("Encode wrote past %d bytes: %x", size, buf[size:])
	}
	if got := V(golden).Fields(); !reflect.DeepEqual(got, f) {
		t.Errorf("Fields:\n got %+v\nwant %+v", got, f)
	}

	ones := madFill(size, 0xFF)
	all := V(ones).Fields()
	zeros := make([]byte, size)
	V(zeros).Encode(&all)
	reserved.clearIn(ones)
	if !bytes.Equal(zeros, ones) {
		t.Errorf("all-ones recode:\n got %x\nwant %x", zeros, ones)
	}

	if _, err := parse(make([]byte, size-1)); err != ErrMADTruncated {
		t.Errorf("parse(size-1) err = %v, want ErrMADTruncated", err)
	}
	if _, err := parse(nil); err != ErrMADTruncated {
		t.Errorf("parse(nil) err = %v, want ErrMADTruncated", err)
	}
}

// Reserved bits of each attribute, as Encode zeroes them.
var (
	madSwitchInfoReserved      = madMask{siEnforcement: 0x07, siReserved: 0xFF}
	madPortInfoReserved        = madMask{piMKeyProtLMC: 0x38, piRespTimeValue: 0xE0, piReserved56: 0xFF, piSpeedExtEnabled: 0xE0}
	madPortCountersReserved    = madMask{pcReserved: 0xFF}
	madPortCountersExtReserved = madMask{pceReserved: 0xFF, pceReserved1: 0xFF, pceReserved1 + 1: 0xFF,
		pceReserved1 + 2: 0xFF, pceReserved1 + 3: 0xFF}
	madClassPortInfoReserved = madMask{cpiRedirectQP: 0xFF}
)

func TestNodeInfo(t *testing.T) {
	golden := madHex(t, `
		01 01 01 02               // BaseVersion 1, ClassVersion 1, NodeType CA, NumPorts 2
		00 02 c9 03 00 a1 b2 c3   // SystemImageGUID
		00 02 c9 03 00 a1 b2 c0   // NodeGUID
		00 02 c9 03 00 a1 b2 c1   // PortGUID
		00 80                     // PartitionCap 128
		10 03                     // DeviceID 0x1003
		00 00 00 a0               // Revision 0xa0
		01                        // LocalPortNum 1
		00 02 c9                  // VendorID 0x0002c9`)
	f := NodeInfoFields{
		BaseVersion: 1, ClassVersion: 1, NodeType: NodeTypeCA, NumPorts: 2,
		SystemImageGUID: 0x0002c90300a1b2c3, NodeGUID: 0x0002c90300a1b2c0,
		PortGUID: 0x0002c90300a1b2c1, PartitionCap: 128, DeviceID: 0x1003,
		Revision: 0xa0, LocalPortNum: 1, VendorID: 0x0002c9,
	}
	madAttrCase(t, ParseNodeInfo, NodeInfoSize, nil, f, golden)

	n := NodeInfo(bytes.Clone(golden))
	n.SetPortGUID(0x0002c90300a1b2c2)
	n.SetLocalPortNum(2)
	if n.PortGUID() != 0x0002c90300a1b2c2 || n.LocalPortNum() != 2 || n.NodeGUID() != f.NodeGUID {
		t.Errorf("setters: %+v", n.Fields())
	}
	// VendorID's upper 8 bits are dropped.
	f.VendorID = 0xFF123456
	n.Encode(&f)
	if n.VendorID() != 0x123456 || n.LocalPortNum() != 1 {
		t.Errorf("VendorID %#x LocalPortNum %d", n.VendorID(), n.LocalPortNum())
	}
}

func TestNodeDescription(t *testing.T) {
	golden := madBuild(t, NodeDescriptionSize,
		0, `68 69 6e 69 63 2d 73 77 30 20 48 69 4e 49 43   // "hinic-sw0 HiNIC"
		    // NUL padding to 64 bytes`)
	madAttrCase(t, ParseNodeDescription, NodeDescriptionSize, nil,
		NodeDescriptionFields{NodeString: "hinic-sw0 HiNIC"}, golden)
	if got := string(NodeDescription(golden).NodeString()); got != "hinic-sw0 HiNIC" {
		t.Errorf("NodeString = %q", got)
	}

	long64 := strings.Repeat("x", 64)
	tests := []struct {
		name   string
		in     string
		stored string
	}{
		{"empty", "", ""},
		{"exactly 64, no terminator", long64, long64},
		{"truncated", long64 + "tail", long64},
		// "é" is 2 bytes; 63 x's + "é" would split it, so it is dropped.
		{"utf8 boundary", strings.Repeat("x", 63) + "é", strings.Repeat("x", 63)},
		{"embedded NUL ends it", "ab\x00cd", "ab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := madFill(NodeDescriptionSize, 0xFF)
			d := NodeDescription(b)
			d.Encode(&NodeDescriptionFields{NodeString: tt.in})
			if got := string(d.NodeString()); got != tt.stored {
				t.Errorf("NodeString = %q, want %q", got, tt.stored)
			}
			if n := len(tt.in); n < NodeDescriptionSize {
				if !bytes.Equal(b[n:], make([]byte, NodeDescriptionSize-n)) {
					t.Errorf("padding not NUL: %x", b)
				}
			}
			if got := d.Fields().NodeString; got != tt.stored {
				t.Errorf("Fields = %q", got)
			}
		})
	}
}

func TestSwitchInfo(t *testing.T) {
	golden := madHex(t, `
		c0 00   // LinearFDBCap 49152
		00 00   // RandomFDBCap 0
		10 00   // MulticastFDBCap 4096
		00 07   // LinearFDBTop 7
		00      // DefaultPort 0
		ff      // DefaultMulticastPrimaryPort 0xFF
		fe      // DefaultMulticastNotPrimaryPort 0xFE
		9d      // LifeTimeValue 19 (10011), PortStateChange 1, OptimizedSLtoVLMappingProgramming 1
		00 01   // LIDsPerPort 1
		00 20   // PartitionEnforcementCap 32
		a8      // InboundEnforcementCap 1, Outbound 0, FilterRawInbound 1, FilterRawOutbound 0, EnhancedPort0 1, rsv 000
		00      // reserved
		c0 3f   // MulticastFDBTop 0xC03F`)
	f := SwitchInfoFields{
		LinearFDBCap: 49152, MulticastFDBCap: 4096, LinearFDBTop: 7,
		DefaultMulticastPrimaryPort: 0xFF, DefaultMulticastNotPrimaryPort: 0xFE,
		LifeTimeValue: 19, PortStateChange: true, OptimizedSLtoVLMappingProgramming: 1,
		LIDsPerPort: 1, PartitionEnforcementCap: 32,
		InboundEnforcementCap: true, FilterRawInboundCap: true, EnhancedPort0: true,
		MulticastFDBTop: 0xC03F,
	}
	madAttrCase(t, ParseSwitchInfo, SwitchInfoSize, madSwitchInfoReserved, f, golden)

	s := SwitchInfo(bytes.Clone(golden))
	s.SetPortStateChange(false)
	if s.PortStateChange() || s.LifeTimeValue() != 19 || s.OptimizedSLtoVLMappingProgramming() != 1 {
		t.Errorf("SetPortStateChange(false): %#02x", s[siLifeTime])
	}
	s.SetPortStateChange(true)
	if !bytes.Equal(s, golden) {
		t.Errorf("SetPortStateChange(true): %x", []byte(s))
	}
}

// madGoldenPortInfoSet is an OpenSM-style directed-route Set PortInfo, one
// hop out, AttributeModifier 0x80000001 (SMSupportsExtendedSpeeds, port 1).
func madGoldenPortInfoSet(t testing.TB) []byte {
	return madBuild(t, MADSize,
		0, `01 81 01 02               // BaseVersion 1, SubnDirectedRoute, ClassVersion 1, Set
		    00 00 00 01               // D=0 Status 0, HopPointer 0, HopCount 1
		    00 00 00 00 00 00 10 01   // TransactionID 0x1001
		    00 15 00 00               // AttributeID PortInfo, reserved
		    80 00 00 01               // AttributeModifier: bit 31 + port 1
		    00 00 00 00 00 00 00 00   // M_Key 0
		    ff ff ff ff               // DrSLID, DrDLID permissive`,
		64, `00 00 00 00 00 00 00 00  // 0  M_Key 0
		     fe 80 00 00 00 00 00 00  // 8  GidPrefix fe80::/64
		     00 05                    // 16 LID 5
		     00 01                    // 18 MasterSMLID 1
		     02 01 00 4c              // 20 CapabilityMask: ClientRereg|CM|SLMapping|Trap|Notice
		     00 00                    // 24 DiagCode 0
		     00 0f                    // 26 M_KeyLeasePeriod 15
		     01                       // 28 LocalPortNum 1
		     03                       // 29 LinkWidthEnabled 1x|4x
		     03                       // 30 LinkWidthSupported 1x|4x
		     02                       // 31 LinkWidthActive 4x
		     73                       // 32 LinkSpeedSupported SDR|DDR|QDR, PortState Armed
		     02                       // 33 PortPhysicalState NoChange, LinkDownDefaultState Polling
		     41                       // 34 M_KeyProtectBits 1, rsv 000, LMC 1
		     47                       // 35 LinkSpeedActive QDR, LinkSpeedEnabled SDR|DDR|QDR
		     50                       // 36 NeighborMTU 4096, MasterSMSL 0
		     40                       // 37 VLCap VL0-7, InitType 0
		     04                       // 38 VLHighLimit 4
		     08                       // 39 VLArbitrationHighCap 8
		     08                       // 40 VLArbitrationLowCap 8
		     05                       // 41 InitTypeReply 0, MTUCap 4096
		     f0                       // 42 VLStallCount 7, HOQLife 16
		     4c                       // 43 OperationalVLs 4, PartEnfInb 1, PartEnfOutb 1, FilterRawInb 0, FilterRawOutb 0
		     00 00                    // 44 M_KeyViolations
		     00 03                    // 46 P_KeyViolations 3
		     00 00                    // 48 Q_KeyViolations
		     80                       // 50 GUIDCap 128
		     92                       // 51 ClientReregister 1, MulticastPKeyTrapSuppressionEnabled 0, SubnetTimeOut 18
		     10                       // 52 rsv 000, RespTimeValue 16
		     88                       // 53 LocalPhyErrors 8, OverrunErrors 8
		     00 00                    // 54 MaxCreditHint
		     00                       // 56 reserved
		     00 01 23                 // 57 LinkRoundTripLatency 0x123
		     00 00                    // 60 CapabilityMask2
		     11                       // 62 LinkSpeedExtActive FDR, LinkSpeedExtSupported FDR
		     01                       // 63 rsv 000, LinkSpeedExtEnabled FDR`,
		128, `00 01                   // InitialPath [_, 1]`)
}

var madGoldenPortInfoFields = PortInfoFields{
	GIDPrefix: 0xfe80000000000000, LID: 5, MasterSMLID: 1,
	CapabilityMask: PortCapIsClientReregistrationSupported |
		PortCapIsCommunicationManagementSupported | PortCapIsSLMappingSupported |
		PortCapIsTrapSupported | PortCapIsNoticeSupported,
	MKeyLeasePeriod: 15, LocalPortNum: 1,
	LinkWidthEnabled: LinkWidth1X | LinkWidth4X, LinkWidthSupported: LinkWidth1X | LinkWidth4X,
	LinkWidthActive:    LinkWidth4X,
	LinkSpeedSupported: LinkSpeedSDR | LinkSpeedDDR | LinkSpeedQDR, PortState: PortStateArmed,
	PortPhysicalState: PortPhysStateNoChange, LinkDownDefaultState: PortPhysStatePolling,
	MKeyProtectBits: 1, LMC: 1,
	LinkSpeedActive: LinkSpeedQDR, LinkSpeedEnabled: LinkSpeedSDR | LinkSpeedDDR | LinkSpeedQDR,
	NeighborMTU: IBMTU4096, VLCap: VLCapVL0To7, VLHighLimit: 4,
	VLArbitrationHighCap: 8, VLArbitrationLowCap: 8, MTUCap: IBMTU4096,
	VLStallCount: 7, HOQLife: 16,
	OperationalVLs: VLCapVL0To7, PartitionEnforcementInbound: true, PartitionEnforcementOutbound: true,
	PKeyViolations: 3, GUIDCap: 128, ClientReregister: true, SubnetTimeOut: 18, RespTimeValue: 16,
	LocalPhyErrors: 8, OverrunErrors: 8, LinkRoundTripLatency: 0x123,
	LinkSpeedExtActive: LinkSpeedExtFDR, LinkSpeedExtSupported: LinkSpeedExtFDR,
	LinkSpeedExtEnabled: LinkSpeedExtFDR,
}

func TestPortInfoGoldenSet(t *testing.T) {
	b := madGoldenPortInfoSet(t)
	s, err := ParseSMP(b)
	if err != nil {
		t.Fatal(err)
	}
	if s.Method() != MADMethodSet || s.AttributeID() != SMPAttrPortInfo {
		t.Fatalf("method %#x attribute %#x", s.Method(), s.AttributeID())
	}
	am := s.AttributeModifier()
	if PortInfoPortNumber(am) != 1 || !PortInfoSMSupportsExtendedSpeeds(am) {
		t.Errorf("AM %#x: port %d ext %v", am, PortInfoPortNumber(am),
			PortInfoSMSupportsExtendedSpeeds(am))
	}
	p, err := ParsePortInfo(s.Data())
	if err != nil {
		t.Fatal(err)
	}
	// Byte 43 = 0x4C.
	if p.OperationalVLs() != 4 || !p.PartitionEnforcementInbound() ||
		!p.PartitionEnforcementOutbound() || p.FilterRawInbound() || p.FilterRawOutbound() {
		t.Errorf("byte 43 %#02x: OperVLs %d PartEnfInb %v PartEnfOutb %v FilterRawIn %v FilterRawOut %v",
			p[43], p.OperationalVLs(), p.PartitionEnforcementInbound(),
			p.PartitionEnforcementOutbound(), p.FilterRawInbound(), p.FilterRawOutbound())
	}
	if VLCapNumVLs(p.OperationalVLs()) != 8 || IBMTUBytes(p.NeighborMTU()) != 4096 {
		t.Errorf("VLs %d MTU %d", VLCapNumVLs(p.OperationalVLs()), IBMTUBytes(p.NeighborMTU()))
	}
	if got := p.Fields(); !reflect.DeepEqual(got, madGoldenPortInfoFields) {
		t.Errorf("Fields:\n got %+v\nwant %+v", got, madGoldenPortInfoFields)
	}
}

func TestPortInfo(t *testing.T) {
	golden := bytes.Clone(madGoldenPortInfoSet(t)[smpData : smpData+SMPDataSize])
	madAttrCase(t, ParsePortInfo, PortInfoSize, madPortInfoReserved, madGoldenPortInfoFields, golden)

	// Distinct sub-byte values in every field, to catch swapped nibbles.
	f := PortInfoFields{
		MKey: 0x0102030405060708, GIDPrefix: 0x1112131415161718, LID: 0x2122,
		MasterSMLID: 0x2324, CapabilityMask: 0x25262728, DiagCode: 0x292A,
		MKeyLeasePeriod: 0x2B2C, LocalPortNum: 0x2D, LinkWidthEnabled: 0x2E,
		LinkWidthSupported: 0x2F, LinkWidthActive: 0x30,
		LinkSpeedSupported: 0x1, PortState: 0x2, PortPhysicalState: 0x3, LinkDownDefaultState: 0x4,
		MKeyProtectBits: 0x2, LMC: 0x5, LinkSpeedActive: 0x6, LinkSpeedEnabled: 0x7,
		NeighborMTU: 0x8, MasterSMSL: 0x9, VLCap: 0xA, InitType: 0xB,
		VLHighLimit: 0x31, VLArbitrationHighCap: 0x32, VLArbitrationLowCap: 0x33,
		InitTypeReply: 0xC, MTUCap: 0xD, VLStallCount: 0x5, HOQLife: 0x13,
		OperationalVLs: 0xE, PartitionEnforcementInbound: false, PartitionEnforcementOutbound: true,
		FilterRawInbound: true, FilterRawOutbound: false,
		MKeyViolations: 0x3435, PKeyViolations: 0x3637, QKeyViolations: 0x3839, GUIDCap: 0x3A,
		ClientReregister: false, MulticastPKeyTrapSuppressionEnabled: 2, SubnetTimeOut: 0x15,
		RespTimeValue: 0x16, LocalPhyErrors: 0xF, OverrunErrors: 0x1, MaxCreditHint: 0x3B3C,
		LinkRoundTripLatency: 0x3D3E3F, CapabilityMask2: 0x4041,
		LinkSpeedExtActive: 0x2, LinkSpeedExtSupported: 0x7, LinkSpeedExtEnabled: 0x1F,
	}
	want := madHex(t, `
		01 02 03 04 05 06 07 08  11 12 13 14 15 16 17 18  // M_Key, GidPrefix
		21 22 23 24 25 26 27 28 29 2a 2b 2c               // LID, MasterSMLID, CapabilityMask, DiagCode, M_KeyLeasePeriod
		2d 2e 2f 30                                       // LocalPortNum, LinkWidthEnabled/Supported/Active
		12 34                                             // 32..33 speed/state, phys/down-default
		85                                                // 34 M_KeyProtectBits 2, rsv 000, LMC 5
		67 89 ab 31 32 33 cd                              // 35..41 nibble pairs and bytes
		b3                                                // 42 VLStallCount 5, HOQLife 0x13
		e6                                                // 43 OperVLs 0xE, PartEnfInb 0, PartEnfOutb 1, FilterRawInb 1, FilterRawOutb 0
		34 35 36 37 38 39 3a                              // 44..50 violations, GUIDCap
		55                                                // 51 ClientReregister 0, MPKTS 2, SubnetTimeOut 0x15
		16 f1 3b 3c 00 3d 3e 3f 40 41                     // 52..61
		27 1f                                             // 62 ExtActive 2, ExtSupported 7; 63 ExtEnabled 0x1F`)
	b := make([]byte, PortInfoSize)
	PortInfo(b).Encode(&f)
	if !bytes.Equal(b, want) {
		t.Errorf("Encode:\n got %x\nwant %x", b, want)
	}
	if got := PortInfo(b).Fields(); !reflect.DeepEqual(got, f) {
		t.Errorf("Fields:\n got %+v\nwant %+v", got, f)
	}

	p := PortInfo(b)
	p.SetPortState(PortStateActive)
	p.SetPortPhysicalState(PortPhysStateLinkUp)
	p.SetLocalPortNum(9)
	p.SetMKey(0)
	p.SetClientReregister(true)
	if p.PortState() != PortStateActive || p.LinkSpeedSupported() != 0x1 ||
		p.PortPhysicalState() != PortPhysStateLinkUp || p.LinkDownDefaultState() != 0x4 ||
		p.LocalPortNum() != 9 || p.MKey() != 0 || !p.ClientReregister() ||
		p.SubnetTimeOut() != 0x15 || p.MulticastPKeyTrapSuppressionEnabled() != 2 {
		t.Errorf("setters: %+v", p.Fields())
	}
}

func TestLinearForwardingTableGolden(t *testing.T) {
	// A switch's GetResp for LFT block 0 (LID-routed).
	b := madBuild(t, MADSize,
		0, `01 01 01 81               // BaseVersion 1, SubnLID, ClassVersion 1, GetResp
		    00 00 00 00               // Status 0, reserved
		    00 00 00 00 00 00 00 2a   // TransactionID
		    00 19 00 00               // AttributeID LinearForwardingTable, reserved
		    00 00 00 00               // AttributeModifier: block 0`,
		64, `ff 01 00 03 03 02 05 ff  // LID 0 invalid, 1->1, 2->0, 3->3, 4->3, 5->2, 6->5, 7 drop
		     ff ff ff ff ff ff ff ff  ff ff ff ff ff ff ff ff
		     ff ff ff ff ff ff ff ff  ff ff ff ff ff ff ff ff
		     ff ff ff ff ff ff ff ff  ff ff ff ff ff ff ff ff
		     ff ff ff ff ff ff ff ff  ff ff ff ff ff ff ff ff
		     ff ff ff ff ff ff ff ff  ff ff ff ff ff ff ff ff
		     ff ff ff ff ff ff ff ff  ff ff ff ff ff ff ff ff
		     ff ff ff ff ff ff ff ff  ff ff ff ff ff ff ff ff // LIDs 8..63 drop`)
	s, err := ParseSMP(b)
	if err != nil {
		t.Fatal(err)
	}
	lft, err := ParseLinearForwardingTable(s.Data())
	if err != nil {
		t.Fatal(err)
	}
	block := s.AttributeModifier()
	want := map[uint16]uint8{1: 1, 2: 0, 3: 3, 4: 3, 5: 2, 6: 5, 7: LFTPortDrop, 63: LFTPortDrop}
	for lid, port := range want {
		blk, i := LFTLIDBlock(lid)
		if blk != block || LFTBlockLID(blk, i) != lid {
			t.Errorf("LID %d maps to block %d entry %d", lid, blk, i)
		}
		if got := lft.Port(i); got != port {
			t.Errorf("LID %d -> port %d, want %d", lid, got, port)
		}
	}
	if len(lft.Ports()) != LFTEntriesPerBlock || lft.Ports()[6] != 5 {
		t.Errorf("Ports = %x", lft.Ports())
	}

	var f LinearForwardingTableFields
	for i := range f.Ports {
		f.Ports[i] = LFTPortDrop
	}
	copy(f.Ports[:], []uint8{0xFF, 1, 0, 3, 3, 2, 5})
	madAttrCase(t, ParseLinearForwardingTable, LinearForwardingTableSize, nil, f,
		bytes.Clone(s.Data()))

	lft.SetPort(7, 4)
	if lft.Port(7) != 4 || b[smpData+7] != 4 {
		t.Error("SetPort")
	}
}

func TestLFTBlockMath(t *testing.T) {
	tests := []struct {
		lid   uint16
		block uint32
		i     int
	}{
		{0, 0, 0}, {63, 0, 63}, {64, 1, 0}, {0xBFFF, 767, 63}, {0xFFFF, 1023, 63},
	}
	for _, tt := range tests {
		b, i := LFTLIDBlock(tt.lid)
		if b != tt.block || i != tt.i || LFTBlockLID(b, i) != tt.lid {
			t.Errorf("LID %#x: block %d entry %d", tt.lid, b, i)
		}
	}
}

func TestMulticastForwardingTable(t *testing.T) {
	golden := madBuild(t, MulticastForwardingTableSize,
		0, `00 06    // entry 0 (MLID 0xC000+32*block): ports 1, 2 of the slice
		    80 01    // entry 1: ports 0 and 15 of the slice
		    // entries 2..30 empty`,
		62, `ff ff   // entry 31: all 16 ports`)
	var f MulticastForwardingTableFields
	f.PortMasks[0], f.PortMasks[1], f.PortMasks[31] = 0x0006, 0x8001, 0xFFFF
	madAttrCase(t, ParseMulticastForwardingTable, MulticastForwardingTableSize, nil, f, golden)

	m := MulticastForwardingTable(bytes.Clone(golden))
	m.SetPortMask(2, 0x1234)
	if m.PortMask(2) != 0x1234 || m.PortMask(1) != 0x8001 {
		t.Error("SetPortMask")
	}
}

func TestMFTAttrMod(t *testing.T) {
	tests := []struct {
		position uint8
		block    uint16
		am       uint32
	}{
		{0, 0, 0x00000000},
		{1, 2, 0x10000002},
		{15, 0x1FF, 0xF00001FF},
	}
	for _, tt := range tests {
		if got := MFTAttrMod(tt.position, tt.block); got != tt.am {
			t.Errorf("MFTAttrMod(%d, %d) = %#08x, want %#08x", tt.position, tt.block, got, tt.am)
		}
		p, b := MFTAttrModParts(tt.am)
		if p != tt.position || b != tt.block {
			t.Errorf("MFTAttrModParts(%#08x) = %d, %d", tt.am, p, b)
		}
	}
	// Reserved bits 27:9 are ignored; excess input bits are dropped.
	if p, b := MFTAttrModParts(0x2FFFFE05); p != 2 || b != 0x005 {
		t.Errorf("reserved bits leaked: %d %d", p, b)
	}
	if got := MFTAttrMod(0x1F, 0xFFFF); got != 0xF00001FF {
		t.Errorf("MFTAttrMod masks: %#08x", got)
	}
	for _, mlid := range []uint16{0xC000, 0xC01F, 0xC020, 0xFFFE} {
		b, i, ok := MFTMLIDBlock(mlid)
		if !ok || MFTBlockMLID(b, i) != mlid {
			t.Errorf("MLID %#x -> block %d entry %d ok %v", mlid, b, i, ok)
		}
	}
	if b, i, ok := MFTMLIDBlock(0xC040); b != 2 || i != 0 || !ok {
		t.Errorf("MLID 0xC040 -> %d %d %v", b, i, ok)
	}
	if _, _, ok := MFTMLIDBlock(0xBFFF); ok {
		t.Error("unicast LID accepted as MLID")
	}
}

func TestPKeyTable(t *testing.T) {
	golden := madBuild(t, PKeyTableSize,
		0, `ff ff   // default P_Key, full member
		    80 01   // P_Key 0x0001, full member
		    7f ff   // default P_Key, limited member`,
		62, `12 34   // entry 31`)
	var f PKeyTableFields
	f.PKeys[0], f.PKeys[1], f.PKeys[2], f.PKeys[31] = 0xFFFF, 0x8001, 0x7FFF, 0x1234
	madAttrCase(t, ParsePKeyTable, PKeyTableSize, nil, f, golden)

	p := PKeyTable(bytes.Clone(golden))
	if p.PKey(1)&PKeyMembershipFull == 0 || p.PKey(1)&PKeyBaseMask != 1 ||
		p.PKey(2)&PKeyMembershipFull != 0 {
		t.Error("membership bits")
	}
	p.SetPKey(3, 0x8002)
	if p.PKey(3) != 0x8002 {
		t.Error("SetPKey")
	}

	if am := PKeyTableAttrMod(5, 1); am != 0x00050001 {
		t.Errorf("PKeyTableAttrMod = %#08x", am)
	}
	if port, block := PKeyTableAttrModParts(0x00240003); port != 0x24 || block != 3 {
		t.Errorf("PKeyTableAttrModParts = %d, %d", port, block)
	}
}

func TestGUIDInfo(t *testing.T) {
	golden := madBuild(t, GUIDInfoSize,
		0, `00 02 c9 03 00 a1 b2 c1   // GUID 0: the port GUID`,
		56, `00 00 00 00 00 00 00 07  // GUID 7`)
	var f GUIDInfoFields
	f.GUIDs[0], f.GUIDs[7] = 0x0002c90300a1b2c1, 7
	madAttrCase(t, ParseGUIDInfo, GUIDInfoSize, nil, f, golden)

	g := GUIDInfo(bytes.Clone(golden))
	g.SetGUID(1, 0xAA)
	if g.GUID(1) != 0xAA || g.GUID(0) != f.GUIDs[0] {
		t.Error("SetGUID")
	}
}

func TestSMInfo(t *testing.T) {
	golden := madHex(t, `
		00 02 c9 03 00 a1 b2 c1   // GUID
		00 00 00 00 00 00 00 01   // SM_Key 1
		00 00 01 00               // ActCount 256
		e3                        // Priority 14, SMState master`)
	f := SMInfoFields{GUID: 0x0002c90300a1b2c1, SMKey: 1, ActCount: 256, Priority: 14,
		SMState: SMStateMaster}
	madAttrCase(t, ParseSMInfo, SMInfoSize, nil, f, golden)

	s := SMInfo(bytes.Clone(golden))
	s.SetSMKey(0)
	s.SetActCount(257)
	s.SetSMState(SMStateStandby)
	if s.SMKey() != 0 || s.ActCount() != 257 || s.SMState() != SMStateStandby || s.Priority() != 14 {
		t.Errorf("setters: %+v", s.Fields())
	}
}

func TestPortInfoAttrMod(t *testing.T) {
	tests := []struct {
		am   uint32
		port uint8
		ext  bool
	}{
		{0x00000001, 1, false},
		{0x80000001, 1, true},
		{0x80000024, 36, true},
		{0x7FFFFF02, 2, false}, // reserved bits ignored
	}
	for _, tt := range tests {
		if PortInfoPortNumber(tt.am) != tt.port || PortInfoSMSupportsExtendedSpeeds(tt.am) != tt.ext {
			t.Errorf("AM %#08x: port %d ext %v", tt.am, PortInfoPortNumber(tt.am),
				PortInfoSMSupportsExtendedSpeeds(tt.am))
		}
	}
	if PortInfoAttrMod(3, true) != 0x80000003 || PortInfoAttrMod(3, false) != 3 {
		t.Error("PortInfoAttrMod")
	}
}

func TestIBMTU(t *testing.T) {
	for mtu, size := range map[uint8]int{IBMTU256: 256, IBMTU512: 512, IBMTU1024: 1024,
		IBMTU2048: 2048, IBMTU4096: 4096} {
		if IBMTUBytes(mtu) != size || IBMTUEnum(size) != mtu {
			t.Errorf("MTU %d <-> %d: %d, %d", mtu, size, IBMTUBytes(mtu), IBMTUEnum(size))
		}
	}
	for _, mtu := range []uint8{0, 6, 15, 255} {
		if IBMTUBytes(mtu) != 0 {
			t.Errorf("IBMTUBytes(%d) = %d", mtu, IBMTUBytes(mtu))
		}
	}
	for _, size := range []int{0, 128, 1500, 4095, 8192, -1} {
		if IBMTUEnum(size) != 0 {
			t.Errorf("IBMTUEnum(%d) = %d", size, IBMTUEnum(size))
		}
	}
}

func TestVLCapNumVLs(t *testing.T) {
	want := map[uint8]int{0: 0, VLCapVL0: 1, VLCapVL0To1: 2, VLCapVL0To3: 4, VLCapVL0To7: 8,
		VLCapVL0To14: 15, 6: 0, 15: 0}
	for v, n := range want {
		if got := VLCapNumVLs(v); got != n {
			t.Errorf("VLCapNumVLs(%d) = %d, want %d", v, got, n)
		}
	}
}
