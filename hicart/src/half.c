// SPDX-License-Identifier: MIT
/*
 * half.c - binary16 and bfloat16 conversions, rounding to nearest even
 * as the device's kernels do (higpu_abi.h, reduction operators). A NaN
 * becomes the type's default quiet NaN, as every NaN a kernel writes.
 */
#include <string.h>

#include "hicart.h"

static uint32_t f32_bits(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	return x;
}

static float f32_from(uint32_t x)
{
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

uint16_t hicartFloatToHalf(float f)
{
	uint32_t x = f32_bits(f);
	uint32_t sign = (x >> 16) & 0x8000;
	uint32_t abs = x & 0x7fffffff;
	uint32_t r, rem;

	if (abs > 0x7f800000)
		return 0x7e00;
	/* 65520 and above round to infinity (65504 is odd: ties go up). */
	if (abs >= 0x477ff000)
		return sign | 0x7c00;
	if (abs < 0x38800000) {
		/* Below 2^-14: a subnormal, in units of 2^-24. */
		uint32_t e = abs >> 23, m, shift, half;

		if (abs < 0x33000000)
			return sign;
		m = (abs & 0x7fffff) | 0x800000;
		shift = 126 - e;
		r = m >> shift;
		rem = m & ((1u << shift) - 1);
		half = 1u << (shift - 1);
		if (rem > half || (rem == half && (r & 1)))
			r++;
		return sign | r;
	}
	r = (abs >> 13) - (112u << 10);
	rem = abs & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
		r++;
	return sign | r;
}

float hicartHalfToFloat(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f;
	uint32_t m = h & 0x3ff;

	if (e == 0x1f)
		return f32_from(sign | 0x7f800000 | (m << 13));
	if (e)
		return f32_from(sign | ((e + 112) << 23) | (m << 13));
	if (!m)
		return f32_from(sign);
	/* Subnormal: m * 2^-24, normalised. */
	e = 113;
	while (!(m & 0x400)) {
		m <<= 1;
		e--;
	}
	return f32_from(sign | (e << 23) | ((m & 0x3ff) << 13));
}

uint16_t hicartFloatToBfloat16(float f)
{
	uint32_t x = f32_bits(f);

	if ((x & 0x7fffffff) > 0x7f800000)
		return 0x7fc0;
	/* Round to nearest even; a carry into the exponent is right (to inf too). */
	x += 0x7fff + ((x >> 16) & 1);
	return x >> 16;
}

float hicartBfloat16ToFloat(uint16_t b)
{
	return f32_from((uint32_t)b << 16);
}
