// SPDX-License-Identifier: MIT
/*
 * unit_test.c - libhicart's own logic, no device needed: binary16 and
 * bfloat16 conversions (against the compiler's _Float16 and a
 * nearest-neighbour reference), the CPU reference of the kernels on
 * special values, error names and strings, last-error bookkeeping, and
 * the no-device and wrong-device paths. TAP output; exit 1 on failure.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hicart.h"
#include "ref.h"
#include "tap.h"

static int f32_isnan_bits(uint32_t x)
{
	return (x & 0x7fffffff) > 0x7f800000;
}

/* bf16 nearest-even reference: the nearer of the two neighbours, in double. */
static uint16_t bf16_ref(uint32_t x)
{
	uint32_t sign = x & 0x80000000u, a = x & 0x7fffffff;
	uint32_t lo = a >> 16, hi = lo + 1;
	double v = fabs((double)ref_f32(x));
	double vlo = (double)ref_f32(lo << 16);
	double vhi = hi == 0x7f80 ? ldexp(1.0, 128) : (double)ref_f32(hi << 16);
	uint32_t r;

	if (v - vlo < vhi - v)
		r = lo;
	else if (v - vlo > vhi - v)
		r = hi;
	else
		r = (lo & 1) ? hi : lo;
	return (uint16_t)((sign >> 16) | r);
}

static void test_half(void)
{
	unsigned int bad = 0, badnan = 0;

	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = hicartHalfToFloat((uint16_t)h);
		int nan = (h & 0x7fff) > 0x7c00;

		if (nan) {
			badnan += !isnan(f) || hicartFloatToHalf(f) != 0x7e00;
			continue;
		}
		bad += hicartFloatToHalf(f) != h;
	}
	ok(!bad, "f16: every non-NaN value survives half -> float -> half (%u bad)", bad);
	ok(!badnan, "f16: NaNs widen to NaN and narrow to 0x7e00 (%u bad)", badnan);
#ifdef __FLT16_MANT_DIG__
	{
		unsigned long n = 0;
		uint32_t first = 0;

		bad = 0;
		for (uint64_t x = 0; x <= 0xffffffffu; x += 61) {
			float f = ref_f32((uint32_t)x);
			_Float16 c = (_Float16)f;
			uint16_t want, got = hicartFloatToHalf(f);

			memcpy(&want, &c, 2);
			if (f32_isnan_bits((uint32_t)x))
				want = 0x7e00;
			if (got != want && !bad++)
				first = (uint32_t)x;
			n++;
		}
		ok(!bad, "f16: float -> half matches _Float16 on %lu floats (%u bad, first %#x)", n,
		   bad, first);
		bad = 0;
		for (uint32_t h = 0; h < 0x10000; h++) {
			_Float16 c;
			uint16_t hh = (uint16_t)h;

			memcpy(&c, &hh, 2);
			if ((h & 0x7fff) <= 0x7c00)
				bad += ref_bits((float)c) != ref_bits(hicartHalfToFloat(hh));
		}
		ok(!bad, "f16: half -> float matches _Float16 exactly (%u bad)", bad);
	}
#else
	printf("ok %d # SKIP no _Float16 in this compiler\n", ++t_num);
#endif
	/* Boundaries written out. */
	ok(hicartFloatToHalf(65504.0f) == 0x7bff, "f16: 65504 is the largest finite");
	ok(hicartFloatToHalf(65519.99f) == 0x7bff, "f16: just below 65520 stays finite");
	ok(hicartFloatToHalf(65520.0f) == 0x7c00, "f16: 65520 rounds to infinity");
	ok(hicartFloatToHalf(-INFINITY) == 0xfc00, "f16: -inf");
	ok(hicartFloatToHalf(ldexpf(1, -24)) == 0x0001, "f16: 2^-24 is the least subnormal");
	ok(hicartFloatToHalf(ldexpf(1, -25)) == 0x0000, "f16: 2^-25 ties to even zero");
	ok(hicartFloatToHalf(ldexpf(3, -26)) == 0x0001, "f16: 1.5 * 2^-25 rounds up");
	ok(hicartFloatToHalf(ldexpf(3, -25)) == 0x0002, "f16: 3 * 2^-25 ties to even 2");
	ok(hicartFloatToHalf(-0.0f) == 0x8000, "f16: -0 keeps its sign");
	ok(hicartFloatToHalf(1.0f + ldexpf(1, -11)) == 0x3c00, "f16: 1 + 2^-11 ties to even 1");
	ok(hicartFloatToHalf(1.0f + ldexpf(3, -11)) == 0x3c02, "f16: 1 + 3*2^-11 ties to even up");
}

static void test_bf16(void)
{
	unsigned int bad = 0;
	unsigned long n = 0;
	uint32_t first = 0;

	for (uint32_t b = 0; b < 0x10000; b++) {
		float f = hicartBfloat16ToFloat((uint16_t)b);

		if ((b & 0x7fff) > 0x7f80)
			bad += !isnan(f) || hicartFloatToBfloat16(f) != 0x7fc0;
		else
			bad += hicartFloatToBfloat16(f) != b;
	}
	ok(!bad, "bf16: every value survives bf16 -> float -> bf16 (NaN -> 0x7fc0) (%u bad)", bad);
	bad = 0;
	for (uint64_t x = 0; x <= 0xffffffffu; x += 61) {
		uint16_t want, got;

		if (f32_isnan_bits((uint32_t)x))
			continue;
		want = bf16_ref((uint32_t)x);
		got = hicartFloatToBfloat16(ref_f32((uint32_t)x));
		if (got != want && !bad++)
			first = (uint32_t)x;
		n++;
	}
	ok(!bad, "bf16: float -> bf16 is nearest-even on %lu floats (%u bad, first %#x)", n, bad,
	   first);
	ok(hicartFloatToBfloat16(ref_f32(0x3f808000)) == 0x3f80, "bf16: a tie goes to even (down)");
	ok(hicartFloatToBfloat16(ref_f32(0x3f818000)) == 0x3f82, "bf16: a tie goes to even (up)");
	ok(hicartFloatToBfloat16(FLT_MAX) == 0x7f80, "bf16: FLT_MAX rounds to infinity");
	ok(hicartFloatToBfloat16(ref_f32(0x00000001)) == 0x0000, "bf16: the least subnormal rounds to 0");
}

static uint32_t red_f32(uint32_t a, uint32_t b, hicartReduceOp op)
{
	uint32_t r;

	ref_reduce1(&r, &a, &b, hicartFloat32, op);
	return r;
}

static uint16_t red_16(uint16_t a, uint16_t b, hicartDataType dt, hicartReduceOp op)
{
	uint16_t r;

	ref_reduce1(&r, &a, &b, dt, op);
	return r;
}

static void test_ref(void)
{
	int32_t i32a = INT32_MAX, i32b = 1, i32r;
	int64_t i64a = INT64_MIN, i64b = -1, i64r;

	ok(red_f32(0x80000000, 0x00000000, hicartReduceMin) == 0x80000000, "ref: MIN(-0, +0) = -0");
	ok(red_f32(0x00000000, 0x80000000, hicartReduceMin) == 0x80000000, "ref: MIN(+0, -0) = -0");
	ok(red_f32(0x80000000, 0x00000000, hicartReduceMax) == 0x00000000, "ref: MAX(-0, +0) = +0");
	ok(red_f32(0x7f800001, 0x3f800000, hicartReduceMin) == 0x7fc00000,
	   "ref: MIN with a signalling NaN gives the default NaN");
	ok(red_f32(0x3f800000, 0xffc00001, hicartReduceSum) == 0x7fc00000,
	   "ref: SUM with a negative NaN gives the default NaN");
	ok(red_f32(0x7f800000, 0xff800000, hicartReduceSum) == 0x7fc00000, "ref: inf + -inf = NaN");
	ok(red_f32(0x00000001, 0x00000001, hicartReduceSum) == 0x00000002, "ref: subnormals are kept");
	ok(red_16(0x3c00, 0x3c00, hicartFloat16, hicartReduceSum) == 0x4000, "ref: f16 1 + 1 = 2");
	ok(red_16(0x7bff, 0x7bff, hicartFloat16, hicartReduceSum) == 0x7c00, "ref: f16 overflow to inf");
	ok(red_16(0x3c00, 0x0001, hicartFloat16, hicartReduceSum) == 0x3c00,
	   "ref: f16 1 + 2^-24 rounds to 1");
	ok(red_16(0x8000, 0x0000, hicartFloat16, hicartReduceMin) == 0x8000, "ref: f16 MIN(-0, +0) = -0");
	ok(red_16(0x7c01, 0x0000, hicartFloat16, hicartReduceMax) == 0x7e00, "ref: f16 NaN -> 0x7e00");
	ok(red_16(0x3f80, 0x3b80, hicartBfloat16, hicartReduceSum) == 0x3f80,
	   "ref: bf16 1 + 2^-8 ties to even 1");
	ok(red_16(0x3f80, 0x3bc0, hicartBfloat16, hicartReduceSum) == 0x3f81,
	   "ref: bf16 1 + 1.5*2^-8 rounds up");
	ok(red_16(0xff81, 0x3f80, hicartBfloat16, hicartReduceMin) == 0x7fc0, "ref: bf16 NaN -> 0x7fc0");
	ref_reduce1(&i32r, &i32a, &i32b, hicartInt32, hicartReduceSum);
	ok(i32r == INT32_MIN, "ref: i32 SUM wraps");
	ref_reduce1(&i64r, &i64a, &i64b, hicartInt64, hicartReduceSum);
	ok(i64r == INT64_MAX, "ref: i64 SUM wraps");
	ref_reduce1(&i64r, &i64a, &i64b, hicartInt64, hicartReduceMax);
	ok(i64r == -1, "ref: i64 MAX");
}

static void test_errors(void)
{
	static const hicartError_t all[] = {
		hicartSuccess, hicartErrorInvalidValue, hicartErrorMemoryAllocation,
		hicartErrorInitializationError, hicartErrorInvalidDevicePointer,
		hicartErrorInvalidMemcpyDirection, hicartErrorNoDevice, hicartErrorInvalidDevice,
		hicartErrorOperatingSystem, hicartErrorInvalidResourceHandle, hicartErrorNotReady,
		hicartErrorIllegalAddress, hicartErrorLaunchOutOfResources,
		hicartErrorContextIsDestroyed, hicartErrorLaunchFailure, hicartErrorNotSupported,
		hicartErrorTimeout, hicartErrorUnknown, hicartErrorDevicesUnavailable,
		hicartErrorPeerAccessUnsupported, hicartErrorPeerAccessAlreadyEnabled,
		hicartErrorPeerAccessNotEnabled,
	};
	unsigned int n = sizeof(all) / sizeof(all[0]), bad = 0;

	for (unsigned int i = 0; i < n; i++) {
		const char *name = hicartGetErrorName(all[i]);
		const char *text = hicartGetErrorString(all[i]);

		bad += strncmp(name, "hicart", 6) != 0 || !*text ||
		       !strcmp(text, "unrecognized error code");
		for (unsigned int j = 0; j < i; j++)
			bad += !strcmp(text, hicartGetErrorString(all[j]));
	}
	ok(!bad, "errors: %u codes have a name and a distinct string", n);
	ok(!strcmp(hicartGetErrorString((hicartError_t)12345), "unrecognized error code"),
	   "errors: an unknown code is unrecognized");
	ok(!strcmp(hicartGetErrorName(hicartErrorIllegalAddress), "hicartErrorIllegalAddress"),
	   "errors: names are the enum's");
	ok(hicartErrorIllegalAddress == 700 && hicartErrorInvalidValue == 1 &&
	   hicartErrorNotReady == 600, "errors: values are CUDA's");
}

static void test_nodevice(const char *dir)
{
	char prefix[512], path[600];
	void *p = (void *)1;
	int n = -1;
	char a[8] = "abcdefg", b[8] = { 0 };
	FILE *f;

	/* A "device node" that is a plain file: found, but no ioctls. */
	snprintf(prefix, sizeof(prefix), "%s/higpu", dir);
	snprintf(path, sizeof(path), "%s3", prefix);
	f = fopen(path, "w");
	if (f)
		fclose(f);
	setenv("HICART_DEVICE_PREFIX", prefix, 1);
	ok(hicartGetDeviceCount(&n) == hicartSuccess && n == 1, "devices: one node found (%d)", n);
	ok(hicartSetDevice(1) == hicartErrorInvalidDevice, "devices: ordinal 1 is invalid");
	ok(hicartPeekAtLastError() == hicartErrorInvalidDevice, "errors: Peek sees the last error");
	ok(hicartGetLastError() == hicartErrorInvalidDevice, "errors: Get returns it");
	ok(hicartGetLastError() == hicartSuccess, "errors: and clears it");
	ok(hicartMalloc(&p, 4096) == hicartErrorInitializationError && p == NULL,
	   "devices: a node that answers no ioctl is an initialization error");
	ok(hicartMemcpy(b, a, sizeof(a), hicartMemcpyHostToHost) == hicartSuccess &&
	   !memcmp(a, b, sizeof(a)), "memcpy: host to host needs no device");
	ok(hicartMemcpy(b, a, sizeof(a), hicartMemcpyDefault) == hicartSuccess,
	   "memcpy: default between host pointers is host to host");
	ok(hicartMemcpy(b, a, sizeof(a), (hicartMemcpyKind)7) == hicartErrorInvalidMemcpyDirection,
	   "memcpy: an unknown kind is refused");
	ok(hicartFree((void *)0x10000000000ULL) == hicartErrorInvalidDevicePointer,
	   "free: a pointer never allocated is invalid");
	ok(hicartFree(NULL) == hicartSuccess, "free: NULL is fine");
	ok(hicartMallocHost(&p, 1 << 20) == hicartSuccess && p, "host: MallocHost");
	ok(hicartFreeHost(p) == hicartSuccess, "host: FreeHost");
	ok(hicartFreeHost(p) == hicartErrorInvalidValue, "host: FreeHost twice is refused");
	ok(hicartDataTypeSize(hicartBfloat16) == 2 && hicartDataTypeSize(hicartInt64) == 8 &&
	   hicartDataTypeSize((hicartDataType)9) == 0, "kernels: element sizes");
	ok(hicartReduce(p, p, p, 4, hicartFloat32, (hicartReduceOp)0, NULL) ==
	   hicartErrorInvalidValue, "kernels: an unknown operator is refused before any device call");
	ok(hicartMemcpyPeer((void *)0x50000000000ULL, hicartRemoteDevice(4), (void *)0x60000000000ULL,
			    hicartRemoteDevice(5), 8) == hicartErrorInvalidDevice,
	   "peer: a copy between two remote GPUs is refused");
	ok(hicartMemcpyPeer((void *)0x50000000000ULL, hicartRemoteDevice(8), (void *)0x40000000000ULL,
			    0, 8) == hicartErrorInvalidDevice, "peer: gpu_id 8 is no device");
	ok(hicartMemcpyPeer((void *)0x60000000000ULL, hicartRemoteDevice(4), (void *)0x40000000000ULL,
			    0, 8) == hicartErrorInvalidDevicePointer,
	   "peer: a pointer that does not name its device is refused before any device call");
	ok(hicartMemcpyPeer(NULL, hicartRemoteDevice(4), NULL, 0, 0) == hicartSuccess,
	   "peer: a copy of 0 bytes does nothing");
	ok(hicartDeviceCanAccessPeer(NULL, 0, 1) == hicartErrorInvalidValue &&
	   hicartDeviceCanAccessPeer(&n, 0, 1) == hicartErrorInvalidDevice,
	   "peer: CanAccessPeer checks its arguments");
	ok(hicartDeviceEnablePeerAccess(hicartRemoteDevice(4), 1) == hicartErrorInvalidValue,
	   "peer: EnablePeerAccess takes no flags");
	unlink(path);
}

int main(void)
{
	char dir[] = "/tmp/hicart-unit-XXXXXX";

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_half();
	test_bf16();
	test_ref();
	test_errors();
	test_nodevice(dir);
	rmdir(dir);
	return tap_done();
}
