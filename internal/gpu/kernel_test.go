package gpu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/PacketFive/hinic/internal/gpu"
)

// The reference below is independent of the backend's conversions: a
// half-precision format is decoded with math.Ldexp, sums are exact
// (big.Float) and rounding to nearest even is a search over the
// format's values.

type format struct {
	name       string
	expBits    uint
	mantBits   uint
	defaultNaN uint16
}

var (
	fmtF16  = format{"f16", 5, 10, 0x7e00}
	fmtBF16 = format{"bf16", 8, 7, 0x7fc0}
)

func (f format) maxExp() uint16 { return 1<<f.expBits - 1 }

func (f format) isNaN(h uint16) bool {
	return (h>>f.mantBits)&f.maxExp() == f.maxExp() && h&(1<<f.mantBits-1) != 0
}

func (f format) isInf(h uint16) bool {
	return (h>>f.mantBits)&f.maxExp() == f.maxExp() && h&(1<<f.mantBits-1) == 0
}

// value decodes a finite h exactly.
func (f format) value(h uint16) float64 {
	e := int(h>>f.mantBits) & int(f.maxExp())
	m := float64(h & (1<<f.mantBits - 1))
	bias := 1<<(f.expBits-1) - 1
	var v float64
	if e == 0 {
		v = math.Ldexp(m, 1-bias-int(f.mantBits))
	} else {
		v = math.Ldexp(m+float64(int(1)<<f.mantBits), e-bias-int(f.mantBits))
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

func (f format) maxFinite() uint16 { return (f.maxExp()-1)<<f.mantBits | (1<<f.mantBits - 1) }

// round rounds x (exact) to the format, to nearest even.
func (f format) round(x *big.Float) uint16 {
	var sign uint16
	if x.Sign() < 0 {
		sign = 0x8000
		x = new(big.Float).Neg(x)
	}
	maxH := f.maxFinite()
	maxV := big.NewFloat(f.value(maxH))
	ulp := new(big.Float).Sub(maxV, big.NewFloat(f.value(maxH-1)))
	limit := new(big.Float).Add(maxV, new(big.Float).Quo(ulp, big.NewFloat(2)))
	if x.Cmp(limit) >= 0 {
		return sign | f.maxExp()<<f.mantBits
	}
	// The largest pattern with a value <= x.
	lo, hi := uint16(0), maxH
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if big.NewFloat(f.value(mid)).Cmp(x) <= 0 {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == maxH || big.NewFloat(f.value(lo)).Cmp(x) == 0 {
		return sign | lo
	}
	mid := new(big.Float).Add(big.NewFloat(f.value(lo)), big.NewFloat(f.value(lo+1)))
	mid.Quo(mid, big.NewFloat(2))
	switch x.Cmp(mid) {
	case -1:
		return sign | lo
	case 1:
		return sign | (lo + 1)
	}
	if lo&1 == 0 {
		return sign | lo
	}
	return sign | (lo + 1)
}

func (f format) sum(a, b uint16) uint16 {
	switch {
	case f.isNaN(a) || f.isNaN(b):
		return f.defaultNaN
	case f.isInf(a) && f.isInf(b):
		if a != b {
			return f.defaultNaN
		}
		return a
	case f.isInf(a):
		return a
	case f.isInf(b):
		return b
	}
	x := new(big.Float).SetPrec(2000).SetFloat64(f.value(a))
	x.Add(x, new(big.Float).SetFloat64(f.value(b)))
	if x.Sign() == 0 {
		if a&b&0x8000 != 0 {
			return 0x8000
		}
		return 0
	}
	return f.round(x)
}

func (f format) minMax(a, b uint16, isMax bool) uint16 {
	if f.isNaN(a) || f.isNaN(b) {
		return f.defaultNaN
	}
	va, vb := f.inf(a), f.inf(b)
	switch {
	case va < vb:
		if isMax {
			return b
		}
		return a
	case vb < va:
		if isMax {
			return a
		}
		return b
	}
	// Equal: zeros of two signs.
	if (a&0x8000 != 0) == isMax {
		return b
	}
	return a
}

// inf decodes h, infinities included.
func (f format) inf(h uint16) float64 {
	if f.isInf(h) {
		if h&0x8000 != 0 {
			return math.Inf(-1)
		}
		return math.Inf(1)
	}
	return f.value(h)
}

// refF32 is the binary32 reference: the float64 sum rounded once to
// binary32 is the correctly rounded binary32 sum (53 >= 2*24+2).
// refInt is x OP y for the integer types: a sum wraps.
func refInt[T int32 | int64](x, y T, op uint8) T {
	switch op {
	case gpu.RedMin:
		return min(x, y)
	case gpu.RedMax:
		return max(x, y)
	}
	return x + y
}

func refF32(a, b uint32, op uint8) uint32 {
	x, y := math.Float32frombits(a), math.Float32frombits(b)
	if x != x || y != y {
		return 0x7fc00000
	}
	var r float32
	switch op {
	case gpu.RedSum:
		r = float32(float64(x) + float64(y))
		if r != r {
			return 0x7fc00000
		}
		return math.Float32bits(r)
	case gpu.RedMin:
		if x < y || (x == y && math.Signbit(float64(x))) {
			return a
		}
		return b
	default:
		if x > y || (x == y && !math.Signbit(float64(x))) {
			return a
		}
		return b
	}
}

// specials16 and specials32 are the patterns every kernel test covers:
// zeros, subnormals, the normal range's ends, infinities and NaNs.
var (
	specials16 = map[string][]uint16{
		"f16":  {0, 0x8000, 1, 0x8001, 0x3ff, 0x400, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe00, 0x3c00, 0xbc00, 0x3c01, 0x7bfe},
		"bf16": {0, 0x8000, 1, 0x8001, 0x7f, 0x80, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffc0, 0x3f80, 0xbf80, 0x3f81, 0x7f7e},
	}
	specials32 = []uint32{0, 0x80000000, 1, 0x80000001, 0x7fffff, 0x800000, 0x7f7fffff, 0xff7fffff, 0x7f800000,
		0xff800000, 0x7fc00000, 0x7f800001, 0xffc00000, 0x3f800000, 0xbf800000, 0x33800000, 0x3f800001}
)

// operands returns n pairs: every pair of specials, then random patterns.
func operands16(rnd *rand.Rand, sp []uint16, n int) (a, b []uint16) {
	for _, x := range sp {
		for _, y := range sp {
			a, b = append(a, x), append(b, y)
		}
	}
	for len(a) < n {
		a, b = append(a, uint16(rnd.Uint32())), append(b, uint16(rnd.Uint32()))
		// Near neighbours exercise cancellation and ties.
		x := uint16(rnd.Uint32())
		a, b = append(a, x), append(b, x^0x8000+uint16(rnd.IntN(3)))
	}
	return a, b
}

func operands32(rnd *rand.Rand, n int) (a, b []uint32) {
	for _, x := range specials32 {
		for _, y := range specials32 {
			a, b = append(a, x), append(b, y)
		}
	}
	for len(a) < n {
		a, b = append(a, rnd.Uint32()), append(b, rnd.Uint32())
		x := rnd.Uint32()
		a, b = append(a, x), append(b, x^0x80000000+uint32(rnd.IntN(3)))
	}
	return a, b
}

func TestKernels(t *testing.T) {
	r := liveRig(t, nil, nil)
	g, ctx := r.g, r.ctx
	c := must[uint16](t)(g.CtxCreate(ctx))
	const n = 4096
	rnd := rand.New(rand.NewPCG(3, 4))
	bufs := [3]uint64{}
	for i := range bufs {
		bufs[i] = must[uint64](t)(g.MemAlloc(ctx, c, n*8, 0))
	}
	host := must[uint64](t)(g.Alloc(n*8, 64))
	upload := func(dst uint64, b []byte) {
		t.Helper()
		copy(g.Mem(host, uint64(len(b))), b)
		if err := g.Copy(ctx, gpu.OpCopyH2D, c, dst, host, uint64(len(b)), 0); err != nil {
			t.Fatal(err)
		}
	}
	download := func(src uint64, n uint64) []byte {
		t.Helper()
		if err := g.Copy(ctx, gpu.OpCopyD2H, c, host, src, n, 0); err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), g.Mem(host, n)...)
	}
	launch := func(a gpu.ArgsLaunch) {
		t.Helper()
		cpl, err := g.Do(ctx, gpu.NewCmd(gpu.OpLaunch, c, 0, 0, a))
		if err != nil || cpl.Status != gpu.StOK {
			t.Fatalf("launch %+v: %v %d", a, err, cpl.Status)
		}
	}
	le := binary.LittleEndian
	ops := []struct {
		name string
		op   uint8
	}{{"sum", gpu.RedSum}, {"min", gpu.RedMin}, {"max", gpu.RedMax}}

	for _, dt := range []struct {
		name string
		dt   uint8
		size int
	}{{"f32", gpu.DTF32, 4}, {"f16", gpu.DTF16, 2}, {"bf16", gpu.DTBF16, 2}, {"i32", gpu.DTI32, 4}, {"i64", gpu.DTI64, 8}} {
		for _, op := range ops {
			t.Run(fmt.Sprintf("reduce/%s/%s", dt.name, op.name), func(t *testing.T) {
				var a, b, want []byte
				var count int
				switch dt.dt {
				case gpu.DTF16, gpu.DTBF16:
					f := fmtF16
					if dt.dt == gpu.DTBF16 {
						f = fmtBF16
					}
					x, y := operands16(rnd, specials16[f.name], n)
					x, y = x[:n], y[:n]
					count = n
					for i := range x {
						a, b = le.AppendUint16(a, x[i]), le.AppendUint16(b, y[i])
						var w uint16
						if op.op == gpu.RedSum {
							w = f.sum(x[i], y[i])
						} else {
							w = f.minMax(x[i], y[i], op.op == gpu.RedMax)
						}
						want = le.AppendUint16(want, w)
					}
				case gpu.DTF32:
					x, y := operands32(rnd, n)
					x, y = x[:n], y[:n]
					count = n
					for i := range x {
						a, b = le.AppendUint32(a, x[i]), le.AppendUint32(b, y[i])
						want = le.AppendUint32(want, refF32(x[i], y[i], op.op))
					}
				case gpu.DTI32:
					count = n
					for i := range n {
						x, y := int32(rnd.Uint32()), int32(rnd.Uint32())
						if i < 4 {
							x, y = math.MaxInt32, int32(i) // wraps
						}
						a, b = le.AppendUint32(a, uint32(x)), le.AppendUint32(b, uint32(y))
						want = le.AppendUint32(want, uint32(refInt(x, y, op.op)))
					}
				case gpu.DTI64:
					count = n
					for i := range n {
						x, y := int64(rnd.Uint64()), int64(rnd.Uint64())
						if i < 4 {
							x, y = math.MinInt64, -int64(i)
						}
						a, b = le.AppendUint64(a, uint64(x)), le.AppendUint64(b, uint64(y))
						want = le.AppendUint64(want, uint64(refInt(x, y, op.op)))
					}
				}
				upload(bufs[1], a)
				upload(bufs[2], b)
				launch(gpu.ArgsLaunch{Kernel: gpu.KernelReduce, DType: dt.dt, Op: op.op, Count: uint64(count),
					Dst: bufs[0], Src0: bufs[1], Src1: bufs[2]})
				got := download(bufs[0], uint64(len(want)))
				for i := 0; i < len(want); i += dt.size {
					if string(got[i:i+dt.size]) != string(want[i:i+dt.size]) {
						t.Fatalf("element %d: %x OP %x = %x, want %x", i/dt.size, a[i:i+dt.size], b[i:i+dt.size],
							got[i:i+dt.size], want[i:i+dt.size])
					}
				}
				// In place: dst = src0.
				launch(gpu.ArgsLaunch{Kernel: gpu.KernelReduce, DType: dt.dt, Op: op.op, Count: uint64(count),
					Dst: bufs[1], Src0: bufs[1], Src1: bufs[2]})
				if got := download(bufs[1], uint64(len(want))); string(got) != string(want) {
					t.Error("in-place reduce differs")
				}
			})
		}
		t.Run("fill/"+dt.name, func(t *testing.T) {
			values := map[uint8][][2]uint64{ // value, element written
				gpu.DTF32:  {{0x3f800000, 0x3f800000}, {0x7f800001, 0x7fc00000}, {0x80000001, 0x80000001}},
				gpu.DTF16:  {{0x3c00, 0x3c00}, {0x7c01, 0x7e00}, {0x8001, 0x8001}},
				gpu.DTBF16: {{0x3f80, 0x3f80}, {0xff81, 0x7fc0}, {0x0001, 0x0001}},
				gpu.DTI32:  {{0xdeadbeef, 0xdeadbeef}, {0xffffffff_00000001, 1}},
				gpu.DTI64:  {{0x0123456789abcdef, 0x0123456789abcdef}},
			}[dt.dt]
			for _, v := range values {
				const count = 1001
				launch(gpu.ArgsLaunch{Kernel: gpu.KernelFill, DType: dt.dt, Count: count, Dst: bufs[0] + 256, Value: v[0]})
				got := download(bufs[0], 256+count*uint64(dt.size)+8)
				for i := range count {
					e := got[256+i*dt.size:]
					var x uint64
					switch dt.size {
					case 2:
						x = uint64(le.Uint16(e))
					case 4:
						x = uint64(le.Uint32(e))
					case 8:
						x = le.Uint64(e)
					}
					if x != v[1] {
						t.Fatalf("fill %#x: element %d is %#x, want %#x", v[0], i, x, v[1])
					}
				}
				if tail := got[256+count*dt.size:]; le.Uint64(tail) == v[1] && dt.size == 8 {
					t.Error("fill ran past count")
				}
			}
		})
	}
	if k := g.Header().Kernels; k == 0 {
		t.Error("kernels counter 0")
	}
}

// TestHalfConversions checks every f16 and bf16 pattern both ways, and
// the rounding of random binary32 values against the reference.
func TestHalfConversions(t *testing.T) {
	for _, c := range []struct {
		f      format
		widen  func(uint16) float32
		narrow func(float32) uint16
	}{{fmtF16, gpu.F16ToF32, gpu.F32ToF16}, {fmtBF16, gpu.BF16ToF32, gpu.F32ToBF16}} {
		for h := range 1 << 16 {
			h := uint16(h)
			w := c.widen(h)
			if c.f.isNaN(h) {
				if w == w || c.narrow(w) != c.f.defaultNaN {
					t.Fatalf("%s %#x: NaN widened to %v, back %#x", c.f.name, h, w, c.narrow(w))
				}
				continue
			}
			if float64(w) != c.f.inf(h) || math.Signbit(float64(w)) != (h&0x8000 != 0) {
				t.Fatalf("%s %#x widened to %v, want %v", c.f.name, h, w, c.f.inf(h))
			}
			if back := c.narrow(w); back != h {
				t.Fatalf("%s %#x round trip %#x", c.f.name, h, back)
			}
		}
		rnd := rand.New(rand.NewPCG(5, 6))
		for range 200_000 {
			b := rnd.Uint32()
			if rnd.IntN(2) == 0 {
				// Near the format's range: exponents around its
				// subnormals and its overflow.
				b = b&0x807fffff | uint32(100+rnd.IntN(50))<<23
			}
			x := math.Float32frombits(b)
			if x != x || math.IsInf(float64(x), 0) {
				continue
			}
			var want uint16
			if x == 0 {
				want = uint16(b >> 16 & 0x8000)
			} else {
				want = c.f.round(new(big.Float).SetFloat64(float64(x)))
			}
			if got := c.narrow(x); got != want {
				t.Fatalf("%s: %v (%#x) rounds to %#x, want %#x", c.f.name, x, b, got, want)
			}
		}
	}
}
