package proto

import "errors"

// Sentinel errors returned by the parsers. They are compared with errors.Is;
// parsers return them unwrapped so that the hot path never allocates.
var (
	// ErrTruncated means the input is shorter than its headers require.
	ErrTruncated = errors.New("proto: truncated")
	// ErrMalformed means a length, version or other field contradicts the
	// input (for example an LRH PktLen that does not match the frame).
	ErrMalformed = errors.New("proto: malformed")
	// ErrUnknownOpcode means the BTH carries an opcode that is reserved or
	// not supported, so the extension headers that follow cannot be known.
	ErrUnknownOpcode = errors.New("proto: unknown opcode")
	// ErrShortBuffer means an encoder was given a buffer too small for what
	// it was asked to write.
	ErrShortBuffer = errors.New("proto: buffer too short")
)
