package gpu

import (
	"encoding/binary"
	"math"
)

// Default quiet NaNs: every NaN a float kernel writes (higpu_abi.h).
const (
	nanF32  = 0x7fc00000
	nanF16  = 0x7e00
	nanBF16 = 0x7fc0
)

// dtypeSize returns the element size of a HIGPU_DT_*, or 0.
func dtypeSize(dt uint8) uint64 {
	switch dt {
	case DTF32, DTI32:
		return 4
	case DTF16, DTBF16:
		return 2
	case DTI64:
		return 8
	}
	return 0
}

// F16ToF32 widens an IEEE binary16 to binary32 exactly (subnormals
// included; a NaN stays a NaN, made quiet).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		if mant != 0 {
			return math.Float32frombits(sign | 0x7fc00000 | mant<<13)
		}
		return math.Float32frombits(sign | 0x7f800000)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: mant * 2^-24, normal in binary32.
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// F32ToF16 rounds a binary32 to binary16, to nearest even (overflow to
// infinity, underflow through the subnormals to zero); a NaN becomes the
// default quiet NaN 0x7e00.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return nanF16
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e <= 0 {
		if exp == 0 {
			return sign // binary32 subnormals are below half the least binary16 subnormal
		}
		m := mant | 0x800000
		shift := uint(14 - e)
		if shift > 24 {
			return sign
		}
		q := m >> shift
		r := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if r > half || (r == half && q&1 == 1) {
			q++
		}
		return sign | uint16(q) // q == 0x400 is the least normal
	}
	v := uint32(e)<<10 | mant>>13
	r := mant & 0x1fff
	if r > 0x1000 || (r == 0x1000 && v&1 == 1) {
		v++ // a carry moves into the exponent, as it should
	}
	if v >= 0x7c00 {
		return sign | 0x7c00
	}
	return sign | uint16(v)
}

// BF16ToF32 widens a bfloat16 to binary32 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds a binary32 to bfloat16, to nearest even; a NaN becomes
// the default quiet NaN 0x7fc0.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return nanBF16
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// canonF32 replaces a NaN by the default quiet NaN.
func canonF32(f float32) uint32 {
	if f != f {
		return nanF32
	}
	return math.Float32bits(f)
}

// minMax32 is MIN (max false) or MAX of two binary32 values with the
// header's rules: a NaN gives NaN; MIN(-0, +0) = -0, MAX(-0, +0) = +0.
// It returns which operand wins (0 or 1), or -1 for NaN.
func minMax32(a, b float32, isMax bool) int {
	if a != a || b != b {
		return -1
	}
	if a == b {
		// Equal: only the sign of a zero can differ.
		an := math.Signbit(float64(a))
		if isMax == an {
			return 1
		}
		return 0
	}
	if (a < b) != isMax {
		return 0
	}
	return 1
}

// runFill writes count elements of dtype dt with the bit pattern value
// (its low bytes) into dst. A NaN pattern of a float type is written as
// the type's default quiet NaN.
func runFill(dst []byte, dt uint8, value uint64) {
	switch dt {
	case DTF32:
		v := uint32(value)
		if math.Float32frombits(v) != math.Float32frombits(v) {
			v = nanF32
		}
		fill32(dst, v)
	case DTI32:
		fill32(dst, uint32(value))
	case DTF16:
		v := uint16(value)
		if v&0x7c00 == 0x7c00 && v&0x3ff != 0 {
			v = nanF16
		}
		fill16(dst, v)
	case DTBF16:
		v := uint16(value)
		if v&0x7f80 == 0x7f80 && v&0x7f != 0 {
			v = nanBF16
		}
		fill16(dst, v)
	case DTI64:
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], value)
		fillPattern(dst, b[:])
	}
}

func fill32(dst []byte, v uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	fillPattern(dst, b[:])
}

func fill16(dst []byte, v uint16) {
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], v)
	fillPattern(dst, b[:])
}

// fillPattern repeats p over dst (len(dst) a multiple of len(p)) by
// doubling copies.
func fillPattern(dst, p []byte) {
	if len(dst) == 0 {
		return
	}
	n := copy(dst, p)
	for n < len(dst) {
		n += copy(dst[n:], dst[:n])
	}
}

// pick is the result of a min or max from minMax32's answer m: nan when
// it is -1, x when 0, else y.
func pick[T uint16 | uint32](m int, nan, x, y T) T {
	switch m {
	case -1:
		return nan
	case 0:
		return x
	default:
		return y
	}
}

// runReduce computes dst[i] = a[i] OP b[i] for count elements of dt.
// dst may be a or b (each element is read before it is written).
func runReduce(dst, a, b []byte, dt, op uint8, count uint64) {
	le := binary.LittleEndian
	switch dt {
	case DTF32:
		for i := uint64(0); i < count; i++ {
			x, y := math.Float32frombits(le.Uint32(a[4*i:])), math.Float32frombits(le.Uint32(b[4*i:]))
			var r uint32
			if op == RedSum {
				r = canonF32(x + y)
			} else {
				r = pick(minMax32(x, y, op == RedMax), nanF32, math.Float32bits(x), math.Float32bits(y))
			}
			le.PutUint32(dst[4*i:], r)
		}
	case DTF16, DTBF16:
		widen, narrow, nan := F16ToF32, F32ToF16, uint16(nanF16)
		if dt == DTBF16 {
			widen, narrow, nan = BF16ToF32, F32ToBF16, nanBF16
		}
		for i := uint64(0); i < count; i++ {
			hx, hy := le.Uint16(a[2*i:]), le.Uint16(b[2*i:])
			x, y := widen(hx), widen(hy)
			var r uint16
			if op == RedSum {
				r = narrow(x + y)
			} else {
				r = pick(minMax32(x, y, op == RedMax), nan, hx, hy)
			}
			le.PutUint16(dst[2*i:], r)
		}
	case DTI32:
		for i := uint64(0); i < count; i++ {
			x, y := int32(le.Uint32(a[4*i:])), int32(le.Uint32(b[4*i:]))
			le.PutUint32(dst[4*i:], uint32(reduceInt(int64(x), int64(y), op, true)))
		}
	case DTI64:
		for i := uint64(0); i < count; i++ {
			x, y := int64(le.Uint64(a[8*i:])), int64(le.Uint64(b[8*i:]))
			le.PutUint64(dst[8*i:], uint64(reduceInt(x, y, op, false)))
		}
	}
}

// reduceInt applies op to two's-complement integers; narrow wraps a sum
// to 32 bits (the caller truncates).
func reduceInt(x, y int64, op uint8, narrow bool) int64 {
	switch op {
	case RedMin:
		return min(x, y)
	case RedMax:
		return max(x, y)
	}
	if narrow {
		return int64(int32(x + y))
	}
	return x + y
}
