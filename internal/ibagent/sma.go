package ibagent

import "github.com/PacketFive/hinic/internal/proto"

// Outcome is what ServeSMP did with a request.
type Outcome uint8

const (
	// Answered: the MAD now holds the answer, to be sent back.
	Answered Outcome = iota
	// Ignored: no answer, for a response, a trap, a method without a
	// response or a BaseVersion other than 1 (whose layout is unknown;
	// Linux ib_mad drops those too).
	Ignored
	// MKeyViolated: dropped by the M_Key check; the node counted the
	// violation (M_KeyViolations) and started the lease.
	MKeyViolated
)

// Node is one SMA's node: its M_Key check and its attributes.
type Node interface {
	// CheckMKey runs the M_Key check of a request with method and key
	// (the rules are proto.MKeyLease's; a node without M_Key protection
	// returns proto.MKeyAllow).
	CheckMKey(method uint8, key uint64) proto.MKeyVerdict
	// Attr answers a Get, or a Set when set, of m's attribute in place
	// in m.Data() and returns the MAD status; maskMKey says that a
	// PortInfo answer carries M_Key 0.
	Attr(m proto.SMP, set, maskMKey bool) uint16
}

// ServeSMP runs an SMA on the request in m (LID-routed or directed
// route, 256 bytes) and turns it into the answer in place.
//
// The answer is a GetResp carrying the full current attribute, for a Set
// as well, with the TransactionID echoed and, for a directed route, the
// D bit set (IBA 13.4.6, 14.2.1.2); every request that gets an answer at
// all gets GetResp, an unsupported method too, as Linux qib's reply()
// does. Statuses: 0x0004 bad ClassVersion, 0x0008 method not supported,
// and whatever Attr returns (0x000C attribute not supported with this
// method, 0x001C bad attribute modifier or field value; a rejected Set
// changes nothing).
//
// The M_Key is checked first, on every request that could get an
// answer. No Bad M_Key trap (IBA 14.2.4.1) is sent: HiNIC's nodes send
// no traps.
func ServeSMP(m proto.SMP, n Node) Outcome {
	if m.BaseVersion() != proto.MADBaseVersion || m.IsResponse() {
		return Ignored
	}
	verdict := n.CheckMKey(m.Method(), m.MKey())
	if verdict == proto.MKeyViolation {
		return MKeyViolated
	}
	var status uint16
	switch method := m.Method(); method {
	case proto.MADMethodGet, proto.MADMethodSet:
		if m.ClassVersion() != proto.SMClassVersion {
			status = proto.MADStatusBadVersion
			break
		}
		status = n.Attr(m, method == proto.MADMethodSet, verdict == proto.MKeyMask)
	case proto.MADMethodTrap, proto.MADMethodTrapRepress:
		return Ignored
	default:
		status = proto.MADStatusMethodUnsupported
	}
	if !m.MakeResponse(status) {
		return Ignored
	}
	m.SetMethod(proto.MADMethodGetResp)
	return Answered
}
