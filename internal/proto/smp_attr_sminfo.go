package proto

import (
	"encoding/binary"
)

// SMInfo (IBA 14.2.5.13, table 158), 21 bytes (the rest of the SMP data is
// reserved):
//
//	offset  bits  field
//	     0    64  GUID
//	     8    64  SM_Key
//	    16    32  ActCount
//	    20     4  Priority (7:4)
//	           4  SMState  (3:0)
const (
	smiGUID      = 0
	smiSMKey     = 8
	smiActCount  = 16
	smiPrioState = 20
	smiStateMask = 0x0F
	smiPrioShift = 4

	// SMInfoSize is the size of the defined part of SMInfo.
	SMInfoSize = 21
)

// SMState values (IBA 14.4.1).
const (
	SMStateNotActive   = 0 // not active
	SMStateDiscovering = 1 // discovering
	SMStateStandby     = 2 // standby
	SMStateMaster      = 3 // master
)

// SMInfo is a view of the SMInfo attribute.
type SMInfo []byte

// ParseSMInfo checks that b holds SMInfoSize bytes and returns a view of
// them.
func ParseSMInfo(b []byte) (SMInfo, error) {
	if len(b) < SMInfoSize {
		return nil, ErrMADTruncated
	}
	return SMInfo(b[:SMInfoSize]), nil
}

// GUID returns the port GUID of the SM.
func (s SMInfo) GUID() uint64 { return binary.BigEndian.Uint64(s[smiGUID:]) }

// SMKey returns SM_Key.
func (s SMInfo) SMKey() uint64 { return binary.BigEndian.Uint64(s[smiSMKey:]) }

// ActCount returns the activity counter.
func (s SMInfo) ActCount() uint32 { return binary.BigEndian.Uint32(s[smiActCount:]) }

// Priority returns the 4-bit SM priority.
func (s SMInfo) Priority() uint8 { return s[smiPrioState] >> smiPrioShift }

// SMState returns the SM state (an SMState constant).
func (s SMInfo) SMState() uint8 { return s[smiPrioState] & smiStateMask }

// SetSMKey writes SM_Key (an SM zeroes it in answers to unauthenticated
// requesters).
func (s SMInfo) SetSMKey(key uint64) { binary.BigEndian.PutUint64(s[smiSMKey:], key) }

// SetActCount writes ActCount.
func (s SMInfo) SetActCount(n uint32) { binary.BigEndian.PutUint32(s[smiActCount:], n) }

// SetSMState writes the low 4 bits of state to SMState.
func (s SMInfo) SetSMState(state uint8) { madSetBits(&s[smiPrioState], smiStateMask, state) }

// SMInfoFields holds the fields of SMInfo to encode.
type SMInfoFields struct {
	GUID     uint64 // SM port GUID
	SMKey    uint64 // SM_Key
	ActCount uint32 // activity counter
	Priority uint8  // 4 bits
	SMState  uint8  // 4 bits
}

// Encode writes every field of f; s must hold SMInfoSize bytes.
func (s SMInfo) Encode(f *SMInfoFields) {
	binary.BigEndian.PutUint64(s[smiGUID:], f.GUID)
	binary.BigEndian.PutUint64(s[smiSMKey:], f.SMKey)
	binary.BigEndian.PutUint32(s[smiActCount:], f.ActCount)
	s[smiPrioState] = f.Priority<<smiPrioShift | f.SMState&smiStateMask
}

// Fields decodes the view into an SMInfoFields.
func (s SMInfo) Fields() SMInfoFields {
	return SMInfoFields{
		GUID:     s.GUID(),
		SMKey:    s.SMKey(),
		ActCount: s.ActCount(),
		Priority: s.Priority(),
		SMState:  s.SMState(),
	}
}
