package gpu

import "unsafe"

// Args are the argument structures of a command.
type Args interface {
	ArgsAlloc | ArgsFree | ArgsCopy | ArgsMemset | ArgsLaunch | ArgsEvent | ArgsQuery | ArgsPeer
}

// NewCmd returns a command with its arguments a.
func NewCmd[T Args](op, ctx, stream uint16, tag uint64, a T) Cmd {
	c := Cmd{Opcode: op, CtxID: ctx, StreamID: stream, Tag: tag}
	copy(c.Args[:], unsafe.Slice((*byte)(unsafe.Pointer(&a)), unsafe.Sizeof(a)))
	return c
}

// ArgsOf returns the command's arguments as T.
func ArgsOf[T Args](c *Cmd) T {
	var v T
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v)), c.Args[:])
	return v
}
