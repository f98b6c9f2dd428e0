package proto

// Opcode is the BTH opcode (IBA Vol 1 section 9.2.1, table 38). Bits 7-5
// select the transport service, bits 4-0 the operation.
type Opcode uint8

// Transport is the transport service of an opcode.
type Transport uint8

// Transport services (opcode bits 7-5).
const (
	TransportRC  Transport = 0
	TransportUC  Transport = 1
	TransportRD  Transport = 2
	TransportUD  Transport = 3
	TransportCNP Transport = 4
	TransportXRC Transport = 5
)

// Opcodes of the RC, UC and UD services and the RoCEv2 CNP.
const (
	OpRCSendFirst          Opcode = 0x00
	OpRCSendMiddle         Opcode = 0x01
	OpRCSendLast           Opcode = 0x02
	OpRCSendLastImm        Opcode = 0x03
	OpRCSendOnly           Opcode = 0x04
	OpRCSendOnlyImm        Opcode = 0x05
	OpRCWriteFirst         Opcode = 0x06
	OpRCWriteMiddle        Opcode = 0x07
	OpRCWriteLast          Opcode = 0x08
	OpRCWriteLastImm       Opcode = 0x09
	OpRCWriteOnly          Opcode = 0x0A
	OpRCWriteOnlyImm       Opcode = 0x0B
	OpRCReadRequest        Opcode = 0x0C
	OpRCReadResponseFirst  Opcode = 0x0D
	OpRCReadResponseMiddle Opcode = 0x0E
	OpRCReadResponseLast   Opcode = 0x0F
	OpRCReadResponseOnly   Opcode = 0x10
	OpRCAcknowledge        Opcode = 0x11
	OpRCAtomicAcknowledge  Opcode = 0x12
	OpRCCompareSwap        Opcode = 0x13
	OpRCFetchAdd           Opcode = 0x14
	OpRCSendLastInvalidate Opcode = 0x16
	OpRCSendOnlyInvalidate Opcode = 0x17
	// OpRCAtomicWrite is RDMA ATOMIC WRITE (IBA 1.5, 9.4.6): a RETH and
	// 8 bytes of payload, written at once; answered with a zero-length
	// RDMA READ RESPONSE ONLY.
	OpRCAtomicWrite  Opcode = 0x1D
	OpUCSendFirst    Opcode = 0x20
	OpUCSendMiddle   Opcode = 0x21
	OpUCSendLast     Opcode = 0x22
	OpUCSendLastImm  Opcode = 0x23
	OpUCSendOnly     Opcode = 0x24
	OpUCSendOnlyImm  Opcode = 0x25
	OpUCWriteFirst   Opcode = 0x26
	OpUCWriteMiddle  Opcode = 0x27
	OpUCWriteLast    Opcode = 0x28
	OpUCWriteLastImm Opcode = 0x29
	OpUCWriteOnly    Opcode = 0x2A
	OpUCWriteOnlyImm Opcode = 0x2B
	OpUDSendOnly     Opcode = 0x64
	OpUDSendOnlyImm  Opcode = 0x65
	OpCNP            Opcode = 0x81

	// XRC opcodes (IBA 9.2.1 table 38, transport 101b): the RC
	// operations at base 0xA0. Requests carry an XRCETH after the BTH;
	// responses (ACKs, READ responses, atomic ACKs) do not.
	OpXRCSendFirst          Opcode = 0xA0
	OpXRCSendMiddle         Opcode = 0xA1
	OpXRCSendLast           Opcode = 0xA2
	OpXRCSendLastImm        Opcode = 0xA3
	OpXRCSendOnly           Opcode = 0xA4
	OpXRCSendOnlyImm        Opcode = 0xA5
	OpXRCWriteFirst         Opcode = 0xA6
	OpXRCWriteMiddle        Opcode = 0xA7
	OpXRCWriteLast          Opcode = 0xA8
	OpXRCWriteLastImm       Opcode = 0xA9
	OpXRCWriteOnly          Opcode = 0xAA
	OpXRCWriteOnlyImm       Opcode = 0xAB
	OpXRCReadRequest        Opcode = 0xAC
	OpXRCReadResponseFirst  Opcode = 0xAD
	OpXRCReadResponseMiddle Opcode = 0xAE
	OpXRCReadResponseLast   Opcode = 0xAF
	OpXRCReadResponseOnly   Opcode = 0xB0
	OpXRCAcknowledge        Opcode = 0xB1
	OpXRCAtomicAcknowledge  Opcode = 0xB2
	OpXRCCompareSwap        Opcode = 0xB3
	OpXRCFetchAdd           Opcode = 0xB4
	OpXRCSendLastInvalidate Opcode = 0xB6
	OpXRCSendOnlyInvalidate Opcode = 0xB7

	// XRCBase is what an RC opcode gains to become its XRC twin.
	XRCBase = OpXRCSendFirst - OpRCSendFirst
)

// Header is a set of extension headers that follow the BTH.
type Header uint16

// Extension headers, in the order they follow the BTH.
const (
	// HdrXRCETH is the XRC extended transport header of XRC requests; it
	// comes first, directly after the BTH (IBA 9.3.1.1, 9.3.9).
	HdrXRCETH Header = 1 << iota
	HdrDETH
	HdrRETH
	HdrAtomicETH
	HdrAETH
	HdrAtomicAckETH
	HdrImmDt
	HdrIETH
	// HdrCNPReserved is the 16 reserved bytes after a CNP's BTH.
	HdrCNPReserved
)

// Kind is what an opcode does, independent of its transport.
type Kind uint8

// Operation kinds.
const (
	KindInvalid Kind = iota
	KindSend
	KindWrite
	KindReadRequest
	KindReadResponse
	KindAck
	KindAtomic
	KindAtomicAck
	KindCNP
	KindAtomicWrite // RDMA ATOMIC WRITE (IBA 1.5)
)

// Position is an opcode's place in a multi-packet message.
type Position uint8

// Positions in a message (IBA 9.4.1 FIRST/MIDDLE/LAST/ONLY).
const (
	PosNone Position = iota // ACKs, atomics, READ requests, CNP
	PosFirst
	PosMiddle
	PosLast
	PosOnly
)

// CNPReservedSize is the size of the reserved field that follows the BTH of
// a RoCEv2 CNP (IBTA Annex A17.9.3); it must be zero.
const CNPReservedSize = 16

// OpcodeInfo describes one opcode: its name, the extension headers that
// follow its BTH, whether it carries payload, and its place in a message.
type OpcodeInfo struct {
	Name      string // e.g. "RC_SEND_ONLY"
	Transport Transport
	Kind      Kind
	Position  Position
	Headers   Header
	HeaderLen int  // bytes of extension headers after the BTH
	Payload   bool // whether payload may follow the headers
	Valid     bool
}

// Has reports whether the opcode carries extension header h.
func (i *OpcodeInfo) Has(h Header) bool { return i.Headers&h != 0 }

var opcodeTable = func() (t [256]OpcodeInfo) {
	add := func(op Opcode, name string, k Kind, pos Position, hdrs Header, payload bool) {
		t[op] = OpcodeInfo{
			Name: name, Transport: Transport(op >> 5), Kind: k, Position: pos,
			Headers: hdrs, HeaderLen: headerLen(hdrs), Payload: payload, Valid: true,
		}
	}
	// RC and XRC share the operations and their headers; an XRC request
	// adds the XRCETH (IBA 9.2.1 table 38).
	for _, tr := range []struct {
		base   Opcode
		prefix string
		req    Header
	}{{0x00, "RC_", 0}, {XRCBase, "XRC_", HdrXRCETH}} {
		b, p, x := tr.base, tr.prefix, tr.req
		add(b+0x00, p+"SEND_FIRST", KindSend, PosFirst, x, true)
		add(b+0x01, p+"SEND_MIDDLE", KindSend, PosMiddle, x, true)
		add(b+0x02, p+"SEND_LAST", KindSend, PosLast, x, true)
		add(b+0x03, p+"SEND_LAST_WITH_IMMEDIATE", KindSend, PosLast, x|HdrImmDt, true)
		add(b+0x04, p+"SEND_ONLY", KindSend, PosOnly, x, true)
		add(b+0x05, p+"SEND_ONLY_WITH_IMMEDIATE", KindSend, PosOnly, x|HdrImmDt, true)
		add(b+0x06, p+"RDMA_WRITE_FIRST", KindWrite, PosFirst, x|HdrRETH, true)
		add(b+0x07, p+"RDMA_WRITE_MIDDLE", KindWrite, PosMiddle, x, true)
		add(b+0x08, p+"RDMA_WRITE_LAST", KindWrite, PosLast, x, true)
		add(b+0x09, p+"RDMA_WRITE_LAST_WITH_IMMEDIATE", KindWrite, PosLast, x|HdrImmDt, true)
		add(b+0x0A, p+"RDMA_WRITE_ONLY", KindWrite, PosOnly, x|HdrRETH, true)
		add(b+0x0B, p+"RDMA_WRITE_ONLY_WITH_IMMEDIATE", KindWrite, PosOnly, x|HdrRETH|HdrImmDt, true)
		add(b+0x0C, p+"RDMA_READ_REQUEST", KindReadRequest, PosNone, x|HdrRETH, false)
		add(b+0x0D, p+"RDMA_READ_RESPONSE_FIRST", KindReadResponse, PosFirst, HdrAETH, true)
		add(b+0x0E, p+"RDMA_READ_RESPONSE_MIDDLE", KindReadResponse, PosMiddle, 0, true)
		add(b+0x0F, p+"RDMA_READ_RESPONSE_LAST", KindReadResponse, PosLast, HdrAETH, true)
		add(b+0x10, p+"RDMA_READ_RESPONSE_ONLY", KindReadResponse, PosOnly, HdrAETH, true)
		add(b+0x11, p+"ACKNOWLEDGE", KindAck, PosNone, HdrAETH, false)
		add(b+0x12, p+"ATOMIC_ACKNOWLEDGE", KindAtomicAck, PosNone, HdrAETH|HdrAtomicAckETH, false)
		add(b+0x13, p+"COMPARE_SWAP", KindAtomic, PosNone, x|HdrAtomicETH, false)
		add(b+0x14, p+"FETCH_ADD", KindAtomic, PosNone, x|HdrAtomicETH, false)
		add(b+0x16, p+"SEND_LAST_WITH_INVALIDATE", KindSend, PosLast, x|HdrIETH, true)
		add(b+0x17, p+"SEND_ONLY_WITH_INVALIDATE", KindSend, PosOnly, x|HdrIETH, true)
	}
	// ATOMIC WRITE (IBA 1.5): offered on RC only, as Linux rxe offers
	// it; its XRC twin is not decoded.
	add(OpRCAtomicWrite, "RC_ATOMIC_WRITE", KindAtomicWrite, PosNone, HdrRETH, true)
	{ // UC: SEND and WRITE only (IBA 9.2.1 table 38)
		b, p := Opcode(0x20), "UC_"
		add(b+0x00, p+"SEND_FIRST", KindSend, PosFirst, 0, true)
		add(b+0x01, p+"SEND_MIDDLE", KindSend, PosMiddle, 0, true)
		add(b+0x02, p+"SEND_LAST", KindSend, PosLast, 0, true)
		add(b+0x03, p+"SEND_LAST_WITH_IMMEDIATE", KindSend, PosLast, HdrImmDt, true)
		add(b+0x04, p+"SEND_ONLY", KindSend, PosOnly, 0, true)
		add(b+0x05, p+"SEND_ONLY_WITH_IMMEDIATE", KindSend, PosOnly, HdrImmDt, true)
		add(b+0x06, p+"RDMA_WRITE_FIRST", KindWrite, PosFirst, HdrRETH, true)
		add(b+0x07, p+"RDMA_WRITE_MIDDLE", KindWrite, PosMiddle, 0, true)
		add(b+0x08, p+"RDMA_WRITE_LAST", KindWrite, PosLast, 0, true)
		add(b+0x09, p+"RDMA_WRITE_LAST_WITH_IMMEDIATE", KindWrite, PosLast, HdrImmDt, true)
		add(b+0x0A, p+"RDMA_WRITE_ONLY", KindWrite, PosOnly, HdrRETH, true)
		add(b+0x0B, p+"RDMA_WRITE_ONLY_WITH_IMMEDIATE", KindWrite, PosOnly, HdrRETH|HdrImmDt, true)
	}
	add(OpUDSendOnly, "UD_SEND_ONLY", KindSend, PosOnly, HdrDETH, true)
	add(OpUDSendOnlyImm, "UD_SEND_ONLY_WITH_IMMEDIATE", KindSend, PosOnly, HdrDETH|HdrImmDt, true)
	add(OpCNP, "CNP", KindCNP, PosNone, HdrCNPReserved, false)
	return t
}()

func headerLen(h Header) int {
	n := 0
	for _, x := range [...]struct {
		h    Header
		size int
	}{
		{HdrXRCETH, XRCETHSize}, {HdrDETH, DETHSize}, {HdrRETH, RETHSize}, {HdrAtomicETH, AtomicETHSize},
		{HdrAETH, AETHSize}, {HdrAtomicAckETH, AtomicAckETHSize},
		{HdrImmDt, ImmDtSize}, {HdrIETH, IETHSize}, {HdrCNPReserved, CNPReservedSize},
	} {
		if h&x.h != 0 {
			n += x.size
		}
	}
	return n
}

// Info returns the description of op. For a reserved or unsupported opcode
// it returns an entry whose Valid is false.
func (op Opcode) Info() *OpcodeInfo { return &opcodeTable[op] }

// Valid reports whether op is a known opcode.
func (op Opcode) Valid() bool { return opcodeTable[op].Valid }

// Transport returns the transport service of op.
func (op Opcode) Transport() Transport { return Transport(op >> 5) }

// String returns the opcode's name, or "OPCODE_0xNN" when it is unknown.
func (op Opcode) String() string {
	if i := &opcodeTable[op]; i.Valid {
		return i.Name
	}
	const hex = "0123456789ABCDEF"
	return "OPCODE_0x" + string([]byte{hex[op>>4], hex[op&15]})
}

// String returns the name of the transport service.
func (t Transport) String() string {
	switch t {
	case TransportRC:
		return "RC"
	case TransportUC:
		return "UC"
	case TransportRD:
		return "RD"
	case TransportUD:
		return "UD"
	case TransportCNP:
		return "CNP"
	case TransportXRC:
		return "XRC"
	}
	return "reserved"
}
