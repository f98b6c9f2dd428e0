package proto

import (
	"encoding/binary"
	"errors"
)

// Sentinel errors returned by the MAD parsers (ParseMAD, ParseSMP,
// ParsePerfMgtMAD and the attribute parsers). They are returned unwrapped, so
// they can be compared with == as well as errors.Is, and no parser allocates.
var (
	// ErrMADTruncated means the input is shorter than the layout requires:
	// a MAD shorter than MADSize, or an attribute buffer shorter than the
	// attribute.
	ErrMADTruncated = errors.New("proto: MAD truncated")
	// ErrMADTooLong means the input is longer than MADSize. A MAD is always
	// exactly 256 bytes; a longer UD payload is not a MAD.
	ErrMADTooLong = errors.New("proto: MAD longer than 256 bytes")
	// ErrMADClass means the MgmtClass does not belong to the layout asked
	// for (for example ParseSMP given a PerfMgt MAD).
	ErrMADClass = errors.New("proto: MAD of another management class")
	// ErrMADMalformed means a field contradicts the layout, for example a
	// directed-route SMP whose HopCount exceeds 63 or whose HopPointer lies
	// beyond HopCount+1.
	ErrMADMalformed = errors.New("proto: malformed MAD")
)

// Common MAD header (IBA Vol 1 section 13.4.2, "Management Datagram
// Format"). Every MAD is 256 bytes: this 24-byte header followed by 232
// bytes of class-specific data.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  BaseVersion  |   MgmtClass   | ClassVersion  |R|   Method    |  0
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Status             |         ClassSpecific         |  4
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         TransactionID                         |  8
//	+                                                               +
//	|                                                               | 12
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          AttributeID          |           Reserved            | 16
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       AttributeModifier                       | 20
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 class data (232 bytes) ...                    | 24..255
//
// Status (IBA 13.4.7, table 112): bit 0 busy, bit 1 redirect required,
// bits 4:2 invalid-field code, bits 14:8 class specific. In a directed-route
// SMP bit 15 is the D (direction) bit and Status has 15 bits; ClassSpecific
// then holds HopPointer (byte 6) and HopCount (byte 7).
const (
	madBaseVersion       = 0
	madMgmtClass         = 1
	madClassVersion      = 2
	madMethod            = 3
	madStatus            = 4
	madClassSpecific     = 6
	madTransactionID     = 8
	madAttributeID       = 16
	madReserved          = 18
	madAttributeModifier = 20

	// Vendor-specific MADs of the classes 0x30-0x4F (IBA 13.4.9.2) carry an
	// RMPP header at 24..35, a reserved byte at 36 and the vendor's OUI at
	// 37..39; vendor data starts at 40.
	madVendorOUI = 37

	// MADSize is the size of every MAD.
	MADSize = 256
	// MADHeaderSize is the size of the common MAD header.
	MADHeaderSize = 24
	// MADDataSize is the size of the class data that follows the header.
	MADDataSize = MADSize - MADHeaderSize
	// MADVendorDataOffset is where the vendor data of a vendor MAD with an
	// OUI (classes 0x30-0x4F) starts.
	MADVendorDataOffset = 40
	// MADBaseVersion is the only BaseVersion defined by the IBA.
	MADBaseVersion = 1
)

// Management classes (IBA 13.4.4, table 107).
const (
	// MgmtClassSubnLID is the LID-routed subnet management class.
	MgmtClassSubnLID = 0x01
	// MgmtClassSubnAdm is the subnet administration class (SA).
	MgmtClassSubnAdm = 0x03
	// MgmtClassPerfMgt is the performance management class (PMA).
	MgmtClassPerfMgt = 0x04
	// MgmtClassBM is the baseboard management class.
	MgmtClassBM = 0x05
	// MgmtClassDevMgt is the device management class.
	MgmtClassDevMgt = 0x06
	// MgmtClassCM is the communication management class.
	MgmtClassCM = 0x07
	// MgmtClassSNMP is the SNMP tunneling class.
	MgmtClassSNMP = 0x08
	// MgmtClassVendorFirst is the first vendor-specific class without an
	// OUI (range 0x09-0x0F).
	MgmtClassVendorFirst = 0x09
	// MgmtClassVendorLast is the last vendor-specific class without an OUI.
	MgmtClassVendorLast = 0x0F
	// MgmtClassCC is the congestion control class.
	MgmtClassCC = 0x21
	// MgmtClassVendorOUIFirst is the first vendor-specific class that
	// carries an OUI (range 0x30-0x4F, IBA 13.4.9.2).
	MgmtClassVendorOUIFirst = 0x30
	// MgmtClassIBPing is the vendor class used by ibping (with OUIOpenIB).
	MgmtClassIBPing = 0x32
	// MgmtClassVendorOUILast is the last vendor-specific class with an OUI.
	MgmtClassVendorOUILast = 0x4F
	// MgmtClassSubnDirectedRoute is the directed-route subnet management
	// class.
	MgmtClassSubnDirectedRoute = 0x81
)

// OUIOpenIB is the OpenIB OUI that ibping puts in its vendor MADs.
const OUIOpenIB = 0x001405

// Methods (IBA 13.4.5, table 108). The values include the R (response) bit,
// so MADMethodGetResp is 0x81.
const (
	// MADMethodGet requests an attribute.
	MADMethodGet = 0x01
	// MADMethodSet writes an attribute; the answer is a GetResp.
	MADMethodSet = 0x02
	// MADMethodSend is a datagram that gets no response.
	MADMethodSend = 0x03
	// MADMethodTrap is an unsolicited notice; the answer is TrapRepress.
	MADMethodTrap = 0x05
	// MADMethodReport forwards an event to a subscriber.
	MADMethodReport = 0x06
	// MADMethodTrapRepress acknowledges a Trap (it has no R bit).
	MADMethodTrapRepress = 0x07
	// MADMethodGetTable requests a table of records (SA).
	MADMethodGetTable = 0x12
	// MADMethodGetTraceTable requests a path trace (SA).
	MADMethodGetTraceTable = 0x13
	// MADMethodGetMulti requests multiple records (SA).
	MADMethodGetMulti = 0x14
	// MADMethodDelete deletes a record (SA).
	MADMethodDelete = 0x15
	// MADMethodResponse is the R bit of the Method byte.
	MADMethodResponse = 0x80
	// MADMethodGetResp answers a Get or a Set.
	MADMethodGetResp = 0x81
	// MADMethodReportResp answers a Report.
	MADMethodReportResp = 0x86
	// MADMethodGetTableResp answers a GetTable or a GetTraceTable.
	MADMethodGetTableResp = 0x92
	// MADMethodGetMultiResp answers a GetMulti.
	MADMethodGetMultiResp = 0x94
	// MADMethodDeleteResp answers a Delete.
	MADMethodDeleteResp = 0x95
)

// Status values (IBA 13.4.7, table 112). Codes 0x0004-0x001C are the 3-bit
// invalid-field code of bits 4:2.
const (
	// MADStatusOK is success.
	MADStatusOK = 0x0000
	// MADStatusBusy asks the requester to retry later (bit 0).
	MADStatusBusy = 0x0001
	// MADStatusRedirect says the request must be redirected (bit 1).
	MADStatusRedirect = 0x0002
	// MADStatusBadVersion: bad BaseVersion or unsupported ClassVersion.
	MADStatusBadVersion = 0x0004
	// MADStatusMethodUnsupported: the method is not supported.
	MADStatusMethodUnsupported = 0x0008
	// MADStatusMethodAttrUnsupported: the method/attribute combination is
	// not supported.
	MADStatusMethodAttrUnsupported = 0x000C
	// MADStatusInvalidField: one or more fields of the attribute or the
	// attribute modifier hold an invalid value.
	MADStatusInvalidField = 0x001C
	// MADStatusInvalidFieldMask masks the invalid-field code (bits 4:2).
	MADStatusInvalidFieldMask = 0x001C
	// MADStatusClassSpecificMask masks the class-specific status bits 14:8.
	MADStatusClassSpecificMask = 0x7F00
)

// Common attribute IDs (IBA 13.4.8), shared by the management classes.
const (
	// MADAttrClassPortInfo is ClassPortInfo (13.4.8.1), defined by every
	// GSI class; the SMP classes have none.
	MADAttrClassPortInfo = 0x0001
	// MADAttrNotice is Notice (13.4.8.2), used by the classes that send
	// traps, SMPs included.
	MADAttrNotice = 0x0002
)

// IsVendorOUIClass reports whether class is a vendor class that carries an
// OUI (0x30-0x4F).
func IsVendorOUIClass(class uint8) bool {
	return class >= MgmtClassVendorOUIFirst && class <= MgmtClassVendorOUILast
}

// MADResponseMethod returns the method of the response to a request with the
// given method (IBA 13.4.5): Get and Set are answered by GetResp, Trap by
// TrapRepress, GetTraceTable by GetTableResp, and the other requests by
// the request method with the R bit set. ok is false for methods that take
// no response: Send, TrapRepress and every response.
func MADResponseMethod(method uint8) (resp uint8, ok bool) {
	switch {
	case method&MADMethodResponse != 0:
		return 0, false
	case method == MADMethodGet, method == MADMethodSet:
		return MADMethodGetResp, true
	case method == MADMethodTrap:
		return MADMethodTrapRepress, true
	case method == MADMethodGetTraceTable:
		return MADMethodGetTableResp, true
	case method == MADMethodSend, method == MADMethodTrapRepress:
		return 0, false
	}
	return method | MADMethodResponse, true
}

// MAD is a view of a 256-byte management datagram (IBA 13.4.2). Obtain one
// with ParseMAD, which checks the length; the accessors then never fail.
type MAD []byte

// ParseMAD checks that b is exactly one MAD (MADSize bytes) and returns a
// view of it. It does not check BaseVersion or ClassVersion: an agent must
// answer a MAD of an unsupported version with MADStatusBadVersion, so it
// needs to see it.
func ParseMAD(b []byte) (MAD, error) {
	switch {
	case len(b) < MADSize:
		return nil, ErrMADTruncated
	case len(b) > MADSize:
		return nil, ErrMADTooLong
	}
	return MAD(b), nil
}

// BaseVersion returns the MAD base version (1).
func (m MAD) BaseVersion() uint8 { return m[madBaseVersion] }

// MgmtClass returns the management class.
func (m MAD) MgmtClass() uint8 { return m[madMgmtClass] }

// ClassVersion returns the version of the management class.
func (m MAD) ClassVersion() uint8 { return m[madClassVersion] }

// Method returns the whole Method byte, R bit included, so that it can be
// compared with the MADMethod constants (a GetResp reads 0x81).
func (m MAD) Method() uint8 { return m[madMethod] }

// IsResponse reports whether the R (response) bit of the Method byte is set.
func (m MAD) IsResponse() bool { return m[madMethod]&MADMethodResponse != 0 }

// Status returns the 16-bit Status field as it is on the wire. For a
// directed-route SMP bit 15 is the D bit; use SMP.Status there.
func (m MAD) Status() uint16 { return binary.BigEndian.Uint16(m[madStatus:]) }

// ClassSpecific returns the 16-bit ClassSpecific field (HopPointer<<8 |
// HopCount in a directed-route SMP).
func (m MAD) ClassSpecific() uint16 { return binary.BigEndian.Uint16(m[madClassSpecific:]) }

// TransactionID returns the 64-bit transaction ID.
func (m MAD) TransactionID() uint64 { return binary.BigEndian.Uint64(m[madTransactionID:]) }

// AttributeID returns the attribute ID.
func (m MAD) AttributeID() uint16 { return binary.BigEndian.Uint16(m[madAttributeID:]) }

// AttributeModifier returns the attribute modifier.
func (m MAD) AttributeModifier() uint32 {
	return binary.BigEndian.Uint32(m[madAttributeModifier:])
}

// Data returns the 232 bytes of class data that follow the header.
func (m MAD) Data() []byte { return m[MADHeaderSize:MADSize] }

// VendorOUI returns the 24-bit OUI of a vendor MAD of the classes 0x30-0x4F
// (bytes 37..39). It is meaningless for other classes.
func (m MAD) VendorOUI() uint32 {
	return madUint24(m[madVendorOUI:])
}

// SetMethod writes the whole Method byte (R bit included).
func (m MAD) SetMethod(method uint8) { m[madMethod] = method }

// SetStatus writes the raw 16-bit Status field.
func (m MAD) SetStatus(status uint16) { binary.BigEndian.PutUint16(m[madStatus:], status) }

// SetClassSpecific writes the ClassSpecific field.
func (m MAD) SetClassSpecific(v uint16) { binary.BigEndian.PutUint16(m[madClassSpecific:], v) }

// SetTransactionID writes the transaction ID.
func (m MAD) SetTransactionID(tid uint64) {
	binary.BigEndian.PutUint64(m[madTransactionID:], tid)
}

// SetAttributeID writes the attribute ID.
func (m MAD) SetAttributeID(id uint16) { binary.BigEndian.PutUint16(m[madAttributeID:], id) }

// SetAttributeModifier writes the attribute modifier.
func (m MAD) SetAttributeModifier(am uint32) {
	binary.BigEndian.PutUint32(m[madAttributeModifier:], am)
}

// SetVendorOUI writes the 24-bit OUI of a vendor MAD (classes 0x30-0x4F);
// the upper 8 bits of oui are ignored.
func (m MAD) SetVendorOUI(oui uint32) {
	madPutUint24(m[madVendorOUI:], oui)
}

// MakeResponse turns a request into its response in place, as every agent
// must before sending it back (IBA 13.4.5, 14.2.2): the method becomes the
// response method (see MADResponseMethod), Status becomes status, and in a
// directed-route SMP the D bit is set (status then keeps only its low 15
// bits). TransactionID, the attribute, the class data and, for a
// directed-route SMP, HopPointer, HopCount and the paths are kept; the
// returning SMP's HopPointer is stepped by whoever sends it. MakeResponse
// reports false, leaving m untouched, when the method takes no response.
func (m MAD) MakeResponse(status uint16) bool {
	resp, ok := MADResponseMethod(m[madMethod])
	if !ok {
		return false
	}
	m[madMethod] = resp
	if m[madMgmtClass] == MgmtClassSubnDirectedRoute {
		status = status&smpStatusMask | smpDirectionBit
	}
	binary.BigEndian.PutUint16(m[madStatus:], status)
	return true
}

// MADFields holds the fields of a common MAD header to encode.
type MADFields struct {
	// BaseVersion is normally MADBaseVersion.
	BaseVersion uint8
	// MgmtClass is the management class.
	MgmtClass uint8
	// ClassVersion is the class version.
	ClassVersion uint8
	// Method is the whole Method byte, R bit included.
	Method uint8
	// Status is the raw 16-bit status.
	Status uint16
	// ClassSpecific is the raw 16-bit class-specific field.
	ClassSpecific uint16
	// TransactionID is the transaction ID.
	TransactionID uint64
	// AttributeID is the attribute ID.
	AttributeID uint16
	// AttributeModifier is the attribute modifier.
	AttributeModifier uint32
}

// Encode writes every field of f into the 24-byte header and zeroes the
// reserved bytes 18..19; the class data (bytes 24..255) is not touched. m
// must hold at least MADHeaderSize bytes.
func (m MAD) Encode(f *MADFields) {
	m[madBaseVersion] = f.BaseVersion
	m[madMgmtClass] = f.MgmtClass
	m[madClassVersion] = f.ClassVersion
	m[madMethod] = f.Method
	binary.BigEndian.PutUint16(m[madStatus:], f.Status)
	binary.BigEndian.PutUint16(m[madClassSpecific:], f.ClassSpecific)
	binary.BigEndian.PutUint64(m[madTransactionID:], f.TransactionID)
	binary.BigEndian.PutUint16(m[madAttributeID:], f.AttributeID)
	m[madReserved], m[madReserved+1] = 0, 0
	binary.BigEndian.PutUint32(m[madAttributeModifier:], f.AttributeModifier)
}

// Fields decodes the header into a MADFields.
func (m MAD) Fields() MADFields {
	return MADFields{
		BaseVersion:       m.BaseVersion(),
		MgmtClass:         m.MgmtClass(),
		ClassVersion:      m.ClassVersion(),
		Method:            m.Method(),
		Status:            m.Status(),
		ClassSpecific:     m.ClassSpecific(),
		TransactionID:     m.TransactionID(),
		AttributeID:       m.AttributeID(),
		AttributeModifier: m.AttributeModifier(),
	}
}

// madSetBits replaces the bits of *p selected by mask with those of v.
func madSetBits(p *byte, mask, v byte) { *p = *p&^mask | v&mask }

// madBool returns mask if v is true and 0 otherwise.
func madBool(v bool, mask byte) byte {
	if v {
		return mask
	}
	return 0
}

// madUint24 reads a 24-bit big-endian number.
func madUint24(b []byte) uint32 { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }

// madPutUint24 writes the low 24 bits of v big-endian.
func madPutUint24(b []byte, v uint32) {
	b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v)
}
