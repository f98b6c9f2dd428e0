/* SPDX-License-Identifier: MIT */
/*
 * ref.h - the CPU reference of the built-in kernels (higpu_abi.h,
 * "Reduction operators"), element by element on raw bits, for
 * hicart_test and the unit test. Deliberately written apart from the
 * device's code: float math is done in binary32 with the conversions of
 * libhicart, NaN results are the type's default quiet NaN, MIN/MAX order
 * -0 below +0.
 */
#ifndef HICART_REF_H
#define HICART_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hicart.h"

static inline float ref_f32(uint32_t x)
{
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

static inline uint32_t ref_bits(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	return x;
}

/* ref_minmax - MIN (max = 0) or MAX of two non-NaN floats, -0 < +0. */
static inline float ref_minmax(float a, float b, int max)
{
	if (a == b && a == 0) {
		int na = signbit(a) != 0;

		/* MIN prefers -0, MAX +0. */
		return max ? (na ? b : a) : (na ? a : b);
	}
	if (max)
		return a > b ? a : b;
	return a < b ? a : b;
}

static inline float ref_op_float(float a, float b, hicartReduceOp op)
{
	volatile float r;

	if (isnan(a) || isnan(b))
		return NAN;
	switch (op) {
	case hicartReduceSum:
		r = a + b;
		return r;
	case hicartReduceMin:
		return ref_minmax(a, b, 0);
	default:
		return ref_minmax(a, b, 1);
	}
}

/* ref_reduce1 - one element: *d = *a op *b, all of dtype (raw bytes). */
static inline void ref_reduce1(void *d, const void *a, const void *b, hicartDataType dt,
			       hicartReduceOp op)
{
	switch (dt) {
	case hicartFloat32: {
		uint32_t x, y, r;
		float f;

		memcpy(&x, a, 4);
		memcpy(&y, b, 4);
		f = ref_op_float(ref_f32(x), ref_f32(y), op);
		r = isnan(f) ? 0x7fc00000u : ref_bits(f);
		memcpy(d, &r, 4);
		break;
	}
	case hicartFloat16:
	case hicartBfloat16: {
		uint16_t x, y, r;
		float fa, fb, f;
		int h = dt == hicartFloat16;

		memcpy(&x, a, 2);
		memcpy(&y, b, 2);
		fa = h ? hicartHalfToFloat(x) : hicartBfloat16ToFloat(x);
		fb = h ? hicartHalfToFloat(y) : hicartBfloat16ToFloat(y);
		f = ref_op_float(fa, fb, op);
		if (isnan(f))
			r = h ? 0x7e00 : 0x7fc0;
		else if (op != hicartReduceSum)
			r = ref_bits(f) == ref_bits(fa) ? x : y;	/* one of the inputs, exactly */
		else
			r = h ? hicartFloatToHalf(f) : hicartFloatToBfloat16(f);
		memcpy(d, &r, 2);
		break;
	}
	case hicartInt32: {
		int32_t x, y, r;

		memcpy(&x, a, 4);
		memcpy(&y, b, 4);
		if (op == hicartReduceSum)
			r = (int32_t)((uint32_t)x + (uint32_t)y);
		else if (op == hicartReduceMin)
			r = x < y ? x : y;
		else
			r = x > y ? x : y;
		memcpy(d, &r, 4);
		break;
	}
	case hicartInt64: {
		int64_t x, y, r;

		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		if (op == hicartReduceSum)
			r = (int64_t)((uint64_t)x + (uint64_t)y);
		else if (op == hicartReduceMin)
			r = x < y ? x : y;
		else
			r = x > y ? x : y;
		memcpy(d, &r, 8);
		break;
	}
	}
}

#endif /* HICART_REF_H */
