// SPDX-License-Identifier: MIT
/*
 * hicart_test - libhicart, higpu.ko and the HiGPU device together, on a
 * guest with /dev/higpuN. TAP output; exit 1 on any failure, 77 (skip)
 * when there is no device.
 *
 * Covers: allocation; every copy kind (sync and async, pageable and
 * pinned, unaligned, across scatter-list pieces, overlapping D2D);
 * memset; streams and events (ordering, query, elapsed time, cross-stream
 * waits); every built-in kernel x dtype x op against the CPU reference
 * (ref.h) including f16/bf16 conversion; and the error paths: a copy
 * beyond an allocation, a freed pointer, memory exhausted, work on
 * another process's and another file's memory, and a process killed
 * while its streams are busy, after which the device must still serve
 * this process's context. With -p, peer access over HiLink between the
 * device and the next one of this guest: enabling at each end, copies
 * both ways checked byte for byte, and the peer errors (not enabled, a
 * bad remote pointer, a peer that is not there).
 *
 * usage: hicart_test [-d DEVICE] [-p] [-v]
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hicart.h"
#include "higpu_abi.h"
#include "higpu_uapi.h"
#include "ref.h"
#include "tap.h"

static int verbose;
static hicartDeviceProp prop;
static int device;

static void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* is - ok() for a call's error, naming both sides when they differ. */
static int is(hicartError_t got, hicartError_t want, const char *what)
{
	if (got == want)
		ok(1, "%s", what);
	else
		ok(0, "%s: got %s, want %s", what, hicartGetErrorName(got), hicartGetErrorName(want));
	return got == want;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fill_random(void *p, size_t n)
{
	unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		c[i] = (unsigned char)rnd();
}

/* ---- allocation ---- */

static void test_alloc(void)
{
	static const size_t sizes[] = { 1, 255, 256, 4096, (1u << 20) + 3 };
	void *p[5];
	int good = 1;

	for (int i = 0; i < 5; i++) {
		hicartError_t e = hicartMalloc(&p[i], sizes[i]);

		good &= e == hicartSuccess && p[i] && ((uintptr_t)p[i] % prop.memAlign) == 0;
	}
	ok(good, "alloc: five sizes, non-null, aligned to %zu", prop.memAlign);
	for (int i = 0; i < 5 && good; i++)
		for (int j = 0; j < i; j++) {
			uintptr_t a = (uintptr_t)p[i], b = (uintptr_t)p[j];

			if (a < b + sizes[j] && b < a + sizes[i])
				good = 0;
		}
	ok(good, "alloc: allocations do not overlap");
	good = 1;
	for (int i = 0; i < 5; i++)
		good &= hicartFree(p[i]) == hicartSuccess;
	ok(good, "alloc: free all");
	ok(hicartMalloc(NULL, 16) == hicartErrorInvalidValue, "alloc: NULL result pointer refused");
	hicartGetLastError();
}

/* ---- copies ---- */

static void test_copies(void)
{
	size_t n = (3u << 20) + 13;
	char *src = malloc(n + 1), *dst = malloc(n + 1), *pin;
	void *d0, *d1;
	hicartStream_t s;
	int okc;

	if (!src || !dst || hicartMalloc(&d0, n) || hicartMalloc(&d1, n) ||
	    hicartMallocHost((void **)&pin, n)) {
		ok(0, "copies: set-up");
		return;
	}
	/* Pageable, starting one byte into a page: pieces and offsets. */
	fill_random(src + 1, n);
	memset(dst, 0, n + 1);
	okc = !hicartMemcpy(d0, src + 1, n, hicartMemcpyHostToDevice) &&
	      !hicartMemcpy(dst + 1, d0, n, hicartMemcpyDeviceToHost) && !memcmp(src + 1, dst + 1, n);
	ok(okc, "copy: H2D and D2H round trip of %zu bytes, pageable, unaligned", n);

	okc = !hicartMemcpy(d1, d0, n, hicartMemcpyDeviceToDevice) &&
	      !hicartMemcpy(pin, d1, n, hicartMemcpyDeviceToHost) && !memcmp(src + 1, pin, n);
	ok(okc, "copy: D2D, read back into pinned memory");

	/* Overlapping D2D in one allocation is a memmove. */
	memmove(src + 1 + 4096 + 7, src + 1, n - 8192);
	okc = !hicartMemcpy((char *)d0 + 4096 + 7, d0, n - 8192, hicartMemcpyDeviceToDevice) &&
	      !hicartMemcpy(dst + 1, d0, n, hicartMemcpyDeviceToHost) && !memcmp(src + 1, dst + 1, n);
	ok(okc, "copy: overlapping D2D is a memmove");

	memset(pin, 0, n);
	okc = !hicartMemcpy(pin, src + 1, n, hicartMemcpyHostToHost) && !memcmp(pin, src + 1, n);
	ok(okc, "copy: host to host");

	fill_random(src, n);
	okc = !hicartMemcpy(d1, src, n, hicartMemcpyDefault) &&
	      !hicartMemcpy(d0, d1, n, hicartMemcpyDefault) &&
	      !hicartMemcpy(dst, d0, n, hicartMemcpyDefault) && !memcmp(src, dst, n);
	ok(okc, "copy: default kind infers H2D, D2D, D2H");

	okc = !hicartMemcpy(dst, d0, 0, hicartMemcpyDeviceToHost);
	ok(okc, "copy: zero bytes is a no-op");

	okc = !hicartStreamCreate(&s);
	fill_random(pin, n);
	okc = okc && !hicartMemcpyAsync(d0, pin, n, hicartMemcpyHostToDevice, s) &&
	      !hicartMemcpyAsync(d1, d0, n, hicartMemcpyDeviceToDevice, s) &&
	      !hicartMemcpyAsync(dst, d1, n, hicartMemcpyDeviceToHost, s) &&
	      !hicartStreamSynchronize(s) && !memcmp(pin, dst, n);
	ok(okc, "copy: async H2D, D2D, D2H in order on one stream");

	okc = !hicartMemset(d0, 0xa5, n) && !hicartMemcpy(dst, d0, n, hicartMemcpyDeviceToHost);
	for (size_t i = 0; okc && i < n; i++)
		okc = (unsigned char)dst[i] == 0xa5;
	ok(okc, "memset: %zu bytes", n);
	okc = !hicartMemsetAsync((char *)d0 + 100, 0x3c, 1000, s) &&
	      !hicartMemcpyAsync(dst, d0, 2000, hicartMemcpyDeviceToHost, s) &&
	      !hicartStreamSynchronize(s);
	for (size_t i = 0; okc && i < 2000; i++)
		okc = (unsigned char)dst[i] == (i >= 100 && i < 1100 ? 0x3c : 0xa5);
	ok(okc, "memset: async, a range inside the allocation");
	hicartStreamDestroy(s);
	hicartFree(d1);
	hicartFree(d0);
	hicartFreeHost(pin);
	free(dst);
	free(src);
}

/* ---- streams and events ---- */

#define NSTREAMS 4

static void test_streams_events(void)
{
	size_t n = 1u << 20;
	hicartStream_t s[NSTREAMS];
	hicartEvent_t a, b, never;
	void *d[NSTREAMS];
	char *h[NSTREAMS], *back = malloc(n);
	int okc = 1;
	float ms = -1;
	hicartError_t e;

	for (int i = 0; i < NSTREAMS; i++) {
		okc &= !hicartStreamCreate(&s[i]) && !hicartMalloc(&d[i], n) &&
		       !hicartMallocHost((void **)&h[i], n);
		if (okc)
			memset(h[i], 'A' + i, n);
	}
	ok(okc, "streams: %d streams with their buffers", NSTREAMS);
	if (!okc || !back)
		return;
	for (int i = 0; i < NSTREAMS; i++) {
		int32_t v = 1000 + i;

		okc &= !hicartMemcpyAsync(d[i], h[i], n, hicartMemcpyHostToDevice, s[i]) &&
		       !hicartFill(d[i], &v, 16, hicartInt32, s[i]);
	}
	for (int i = 0; i < NSTREAMS; i++)
		okc &= !hicartStreamSynchronize(s[i]);
	for (int i = 0; i < NSTREAMS && okc; i++) {
		int32_t v;

		okc = !hicartMemcpy(back, d[i], n, hicartMemcpyDeviceToHost);
		for (int j = 0; okc && j < 16; j++) {
			memcpy(&v, back + 4 * j, 4);
			okc = v == 1000 + i;
		}
		okc = okc && !memcmp(back + 64, h[i] + 64, n - 64);
	}
	ok(okc, "streams: work on each stream runs in order (copy, then fill)");
	ok(hicartStreamQuery(s[0]) == hicartSuccess, "streams: query of an idle stream");

	okc = !hicartEventCreate(&a) && !hicartEventCreate(&b) && !hicartEventCreate(&never);
	ok(okc, "events: create");
	okc = !hicartEventRecord(a, s[0]);
	for (int k = 0; k < 8 && okc; k++)
		okc = !hicartMemcpyAsync(d[1], d[0], n, hicartMemcpyDeviceToDevice, s[0]);
	okc = okc && !hicartEventRecord(b, s[0]) && !hicartEventSynchronize(b);
	ok(okc, "events: record, work, record, synchronize");
	ok(hicartEventQuery(b) == hicartSuccess, "events: query after synchronize is done");
	e = hicartEventElapsedTime(&ms, a, b);
	ok(!e && ms >= 0, "events: elapsed time %.3f ms (%s)", ms, hicartGetErrorName(e));
	ok(hicartEventElapsedTime(&ms, a, never) == hicartErrorInvalidResourceHandle,
	   "events: elapsed time with a never-recorded event is refused");
	ok(hicartEventSynchronize(never) == hicartSuccess,
	   "events: synchronize on a never-recorded event returns at once");
	hicartGetLastError();

	/* Cross-stream: s[1] copies what s[0] made, after waiting on b. */
	memset(h[0], 'Z', n);
	okc = !hicartMemcpyAsync(d[0], h[0], n, hicartMemcpyHostToDevice, s[0]) &&
	      !hicartEventRecord(b, s[0]);
	e = hicartStreamWaitEvent(s[1], b, 0);
	if (e == hicartErrorNotSupported) {
		printf("ok %d # SKIP the device has no cross-stream waits\n", ++t_num);
		hicartGetLastError();
	} else {
		okc = okc && !e && !hicartMemcpyAsync(back, d[0], n, hicartMemcpyDeviceToHost, s[1]) &&
		      !hicartStreamSynchronize(s[1]) && !memcmp(back, h[0], n);
		ok(okc, "events: a stream waits for another stream's event");
	}
	ok(!hicartDeviceSynchronize(), "device synchronize");
	hicartEventDestroy(never);
	hicartEventDestroy(b);
	hicartEventDestroy(a);
	for (int i = 0; i < NSTREAMS; i++) {
		hicartStreamDestroy(s[i]);
		hicartFree(d[i]);
		hicartFreeHost(h[i]);
	}
	free(back);
}

/* ---- built-in kernels ---- */

static const char *dt_name(hicartDataType dt)
{
	static const char *n[] = { "?", "f32", "f16", "bf16", "i32", "i64" };

	return n[dt <= hicartInt64 ? dt : 0];
}

static const char *op_name(hicartReduceOp op)
{
	static const char *n[] = { "?", "sum", "min", "max" };

	return n[op <= hicartReduceMax ? op : 0];
}

/* special - an interesting bit pattern of dtype now and then, else random. */
static void gen_elem(void *p, hicartDataType dt)
{
	static const uint32_t f32s[] = { 0x00000000, 0x80000000, 0x7f800000, 0xff800000,
					 0x7fc00000, 0x7f800001, 0x00000001, 0x807fffff,
					 0x7f7fffff, 0x3f800000 };
	static const uint16_t f16s[] = { 0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01,
					 0x0001, 0x83ff, 0x7bff, 0x3c00 };
	static const uint16_t bf16s[] = { 0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81,
					  0x0001, 0x807f, 0x7f7f, 0x3f80 };
	uint64_t r = rnd();
	int special = (r & 7) == 0;
	unsigned int k = (unsigned int)(r >> 8) % 10;

	switch (dt) {
	case hicartFloat32: {
		uint32_t v = special ? f32s[k] : (uint32_t)(r >> 32);

		/* Mostly ordinary magnitudes, so sums round rather than saturate. */
		if (!special && (r & 0x10))
			v = (v & 0x807fffff) | (uint32_t)(0x70 + (r >> 40) % 0x20) << 23;
		memcpy(p, &v, 4);
		break;
	}
	case hicartFloat16:
	case hicartBfloat16: {
		uint16_t v = special ? (dt == hicartFloat16 ? f16s[k] : bf16s[k]) : (uint16_t)(r >> 32);

		memcpy(p, &v, 2);
		break;
	}
	case hicartInt32: {
		uint32_t v = (uint32_t)(r >> 32);

		memcpy(p, &v, 4);
		break;
	}
	case hicartInt64:
		memcpy(p, &r, 8);
		break;
	}
}

static void test_kernels(void)
{
	static const hicartDataType dts[] = { hicartFloat32, hicartFloat16, hicartBfloat16,
					      hicartInt32, hicartInt64 };
	static const hicartReduceOp ops[] = { hicartReduceSum, hicartReduceMin, hicartReduceMax };
	size_t count = 4099, bytes = count * 8;
	unsigned char *a = malloc(bytes), *b = malloc(bytes), *want = malloc(bytes),
		      *got = malloc(bytes);
	void *da, *db, *dd;

	if (!a || !b || !want || !got || hicartMalloc(&da, bytes) || hicartMalloc(&db, bytes) ||
	    hicartMalloc(&dd, bytes)) {
		ok(0, "kernels: set-up");
		return;
	}
	for (unsigned int t = 0; t < 5; t++) {
		hicartDataType dt = dts[t];
		size_t sz = hicartDataTypeSize(dt);

		for (unsigned int o = 0; o < 3; o++) {
			hicartReduceOp op = ops[o];
			size_t bad = 0, first = 0;
			hicartError_t e;

			for (size_t i = 0; i < count; i++) {
				gen_elem(a + i * sz, dt);
				gen_elem(b + i * sz, dt);
				ref_reduce1(want + i * sz, a + i * sz, b + i * sz, dt, op);
			}
			e = hicartMemcpy(da, a, count * sz, hicartMemcpyHostToDevice);
			if (!e)
				e = hicartMemcpy(db, b, count * sz, hicartMemcpyHostToDevice);
			if (!e)
				e = hicartReduce(dd, da, db, count, dt, op, NULL);
			if (!e)
				e = hicartStreamSynchronize(NULL);
			if (!e)
				e = hicartMemcpy(got, dd, count * sz, hicartMemcpyDeviceToHost);
			for (size_t i = 0; !e && i < count; i++)
				if (memcmp(got + i * sz, want + i * sz, sz) && !bad++)
					first = i;
			if (bad && verbose) {
				uint64_t x = 0, y = 0, g = 0, w = 0;

				memcpy(&x, a + first * sz, sz);
				memcpy(&y, b + first * sz, sz);
				memcpy(&g, got + first * sz, sz);
				memcpy(&w, want + first * sz, sz);
				diag("first bad [%zu]: %#llx %s %#llx = %#llx, want %#llx", first,
				     (unsigned long long)x, op_name(op), (unsigned long long)y,
				     (unsigned long long)g, (unsigned long long)w);
			}
			ok(!e && !bad, "reduce %s %s: %zu elements match the CPU (%zu bad, %s)",
			   dt_name(dt), op_name(op), count, bad, hicartGetErrorName(e));
		}
		/* In place: dst = src0. */
		{
			size_t bad = 0;
			hicartError_t e;

			for (size_t i = 0; i < count; i++) {
				gen_elem(a + i * sz, dt);
				gen_elem(b + i * sz, dt);
				ref_reduce1(want + i * sz, a + i * sz, b + i * sz, dt, hicartReduceSum);
			}
			e = hicartMemcpy(da, a, count * sz, hicartMemcpyHostToDevice);
			if (!e)
				e = hicartMemcpy(db, b, count * sz, hicartMemcpyHostToDevice);
			if (!e)
				e = hicartReduce(da, da, db, count, dt, hicartReduceSum, NULL);
			if (!e)
				e = hicartMemcpy(got, da, count * sz, hicartMemcpyDeviceToHost);
			for (size_t i = 0; !e && i < count; i++)
				bad += memcmp(got + i * sz, want + i * sz, sz) != 0;
			ok(!e && !bad, "reduce %s sum in place (dst = src0) (%zu bad, %s)", dt_name(dt),
			   bad, hicartGetErrorName(e));
		}
		/* Fill with an ordinary value of the type. */
		{
			unsigned char v[8];
			size_t bad = 0;
			hicartError_t e;

			switch (dt) {
			case hicartFloat32: {
				float f = -3.25f;

				memcpy(v, &f, 4);
				break;
			}
			case hicartFloat16: {
				uint16_t h = hicartFloatToHalf(0.1f);

				memcpy(v, &h, 2);
				break;
			}
			case hicartBfloat16: {
				uint16_t h = hicartFloatToBfloat16(-1.0e30f);

				memcpy(v, &h, 2);
				break;
			}
			case hicartInt32: {
				int32_t i = -123456789;

				memcpy(v, &i, 4);
				break;
			}
			case hicartInt64: {
				int64_t i = 0x0123456789abcdefLL;

				memcpy(v, &i, 8);
				break;
			}
			}
			e = hicartMemset(dd, 0xee, bytes);
			if (!e)
				e = hicartFill(dd, v, count - 1, dt, NULL);
			if (!e)
				e = hicartMemcpy(got, dd, count * sz, hicartMemcpyDeviceToHost);
			for (size_t i = 0; !e && i < count - 1; i++)
				bad += memcmp(got + i * sz, v, sz) != 0;
			for (size_t i = (count - 1) * sz; !e && i < count * sz; i++)
				bad += got[i] != 0xee;
			ok(!e && !bad, "fill %s: %zu elements, not one more (%zu bad, %s)", dt_name(dt),
			   count - 1, bad, hicartGetErrorName(e));
		}
	}
	/* f16 and bf16 read back through the runtime's conversions. */
	{
		uint16_t h = hicartFloatToHalf(0.1f), bb = hicartFloatToBfloat16(0.1f), g[2];
		int okc = !hicartFill(dd, &h, 1, hicartFloat16, NULL) &&
			  !hicartFill((char *)dd + 2, &bb, 1, hicartBfloat16, NULL) &&
			  !hicartMemcpy(g, dd, 4, hicartMemcpyDeviceToHost);

		ok(okc && fabsf(hicartHalfToFloat(g[0]) - 0.1f) < 1e-4f &&
		   fabsf(hicartBfloat16ToFloat(g[1]) - 0.1f) < 1e-3f && g[0] == 0x2e66 && g[1] == 0x3dcd,
		   "conversion: 0.1 as f16 %#x and bf16 %#x on the device", g[0], g[1]);
	}
	ok(hicartReduce(dd, da, db, 0, hicartInt32, hicartReduceSum, NULL) == hicartSuccess,
	   "kernels: zero elements is a no-op");
	ok(hicartReduce(dd, da, db, 4, (hicartDataType)0, hicartReduceSum, NULL) ==
	   hicartErrorInvalidValue, "kernels: unknown dtype refused");
	hicartGetLastError();
	hicartFree(dd);
	hicartFree(db);
	hicartFree(da);
	free(a);
	free(b);
	free(want);
	free(got);
}

/* ---- error paths ---- */

static void test_bounds(void)
{
	char buf[8192] = { 0 };
	void *d, *f;

	if (hicartMalloc(&d, 4096) || hicartMalloc(&f, 4096)) {
		ok(0, "bounds: set-up");
		return;
	}
	is(hicartMemcpy(d, buf, 8192, hicartMemcpyHostToDevice), hicartErrorIllegalAddress,
	   "error: H2D beyond the end of an allocation");
	is(hicartMemcpy(buf, (char *)d + 4000, 200, hicartMemcpyDeviceToHost),
	   hicartErrorIllegalAddress, "error: D2H running past the end");
	is(hicartMemset((char *)d + 4095, 0, 2), hicartErrorIllegalAddress,
	   "error: memset past the end");
	is(hicartFill(d, buf, 2048, hicartInt32, NULL), hicartSuccess, "error: launch is queued");
	is(hicartStreamSynchronize(NULL), hicartErrorIllegalAddress,
	   "error: fill past the end reported at stream synchronize");
	is(hicartStreamSynchronize(NULL), hicartSuccess, "error: and only once");
	is(hicartGetLastError(), hicartErrorIllegalAddress,
	   "error: the last error outlives later clean calls, until read");
	is(hicartMemcpy(buf, d, 4096, hicartMemcpyDeviceToHost), hicartSuccess,
	   "error: the allocation itself still works");

	hicartFree(f);
	is(hicartMemcpy(f, buf, 16, hicartMemcpyHostToDevice), hicartErrorIllegalAddress,
	   "error: copy to a freed pointer");
	is(hicartGetLastError(), hicartErrorIllegalAddress, "error: GetLastError returns it");
	is(hicartPeekAtLastError(), hicartSuccess, "error: and clears it");
	is(hicartFree(f), hicartErrorInvalidDevicePointer, "error: freeing twice");
	is(hicartMemcpy(buf, (void *)0x20, 16, hicartMemcpyDeviceToHost), hicartErrorIllegalAddress,
	   "error: D2H from an address that was never allocated");
	hicartGetLastError();
	hicartFree(d);
}

/* ---- peer access (HiLink) ---- */

static void test_peer(void)
{
	int other = (device + 1) % 2, can = -1;
	size_t n = (1u << 20) + 13;
	char *h = malloc(n), *back = malloc(n);
	hicartDeviceProp op;
	hicartStream_t s;
	void *a, *b;

	if (!h || !back || hicartGetDeviceProperties(&op, other) || hicartMalloc(&a, n)) {
		ok(0, "peer: set-up (two devices with HiLink ports)");
		return;
	}
	hicartSetDevice(other);
	if (hicartMalloc(&b, n)) {
		ok(0, "peer: set-up on device %d", other);
		return;
	}
	hicartSetDevice(device);
	is(hicartDeviceCanAccessPeer(&can, device, other), hicartSuccess, "peer: CanAccessPeer");
	ok(can == 1, "peer: device %d can reach device %d over HiLink", device, other);
	is(hicartMemcpyPeer(b, other, a, device, n), hicartErrorPeerAccessNotEnabled,
	   "peer: a copy before EnablePeerAccess");
	is(hicartDeviceEnablePeerAccess(other, 0), hicartSuccess, "peer: enable here");
	is(hicartDeviceEnablePeerAccess(other, 0), hicartErrorPeerAccessAlreadyEnabled,
	   "peer: enable twice");
	is(hicartMemcpyPeer(b, other, a, device, n), hicartErrorPeerAccessNotEnabled,
	   "peer: the peer has not enabled this GPU");
	hicartSetDevice(other);
	is(hicartDeviceEnablePeerAccess(device, 0), hicartSuccess, "peer: enable at the peer");
	hicartSetDevice(device);

	fill_random(h, n);
	is(hicartMemcpy(a, h, n, hicartMemcpyHostToDevice), hicartSuccess, "peer: source filled");
	is(hicartMemcpyPeer(b, other, a, device, n), hicartSuccess, "peer: remote write of 1 MiB + 13");
	hicartSetDevice(other);
	memset(back, 0, n);
	ok(!hicartMemcpy(back, b, n, hicartMemcpyDeviceToHost) && !memcmp(back, h, n),
	   "peer: the peer's memory holds every byte");
	fill_random(h, n);
	hicartMemcpy(b, h, n, hicartMemcpyHostToDevice);
	hicartSetDevice(device);
	is(hicartMemcpyPeer((char *)a + 1, device, (char *)b + 1, hicartRemoteDevice(op.gpuId), n - 1),
	   hicartSuccess, "peer: remote read, unaligned, the peer named by gpu_id");
	memset(back, 0, n);
	ok(!hicartMemcpy(back, a, n, hicartMemcpyDeviceToHost) && !memcmp(back + 1, h + 1, n - 1),
	   "peer: every byte read back");
	if (hicartStreamCreate(&s) == hicartSuccess) {
		is(hicartMemcpyPeerAsync(b, other, a, device, n, s), hicartSuccess, "peer: async write queued");
		is(hicartStreamSynchronize(s), hicartSuccess, "peer: and done at stream synchronize");
		hicartStreamDestroy(s);
	}
	/* Allocations are whole multiples of memAlign: "past the end" is
	 * past the rounded size. */
	is(hicartMemcpyPeer((char *)b + n - 10, other, a, device, prop.memAlign + 10),
	   hicartErrorIllegalAddress, "peer: a remote range past the end of the peer's allocation");
	is(hicartMemcpyPeer(a, device, (char *)b + n + prop.memAlign, other, 16),
	   hicartErrorIllegalAddress, "peer: a remote read outside the peer's allocation");
	is(hicartMemcpyPeer(b, other, (char *)a + prop.memAlign, device, n), hicartErrorIllegalAddress,
	   "peer: a local range past the end");
	is(hicartMemcpyPeer(a, device, b, device, 16), hicartErrorInvalidDevicePointer,
	   "peer: a pointer that is not on the device named");
	{
		/* No port has gpu_id 7 in this rack (unless it does). */
		void *gone = (void *)(uintptr_t)HIGPU_VA_BASE(7);

		if (prop.gpuId != 7 && op.gpuId != 7) {
			is(hicartDeviceEnablePeerAccess(hicartRemoteDevice(7), 0), hicartSuccess,
			   "peer: enabling a GPU that is not there is allowed");
			is(hicartMemcpyPeer(gone, hicartRemoteDevice(7), a, device, 64),
			   hicartErrorDevicesUnavailable, "peer: a copy to a GPU that is not there");
			hicartDeviceDisablePeerAccess(hicartRemoteDevice(7));
		}
	}
	is(hicartDeviceDisablePeerAccess(other), hicartSuccess, "peer: disable");
	is(hicartDeviceDisablePeerAccess(other), hicartErrorPeerAccessNotEnabled, "peer: disable twice");
	is(hicartMemcpyPeer(b, other, a, device, 16), hicartErrorPeerAccessNotEnabled,
	   "peer: a copy after disable");
	hicartGetLastError();
	hicartFree(a);
	hicartSetDevice(other);
	hicartDeviceDisablePeerAccess(device);
	hicartFree(b);
	hicartSetDevice(device);
	free(h);
	free(back);
}

static void test_exhaust(void)
{
	size_t cap = prop.memBudget && prop.memBudget < prop.totalGlobalMem ? prop.memBudget :
									    prop.totalGlobalMem;
	void *big = NULL, *p[4096];
	int n = 0;
	hicartError_t e;

	is(hicartMalloc(&big, cap + (64u << 20)), hicartErrorMemoryAllocation,
	   "error: one allocation larger than the device's memory");
	ok(big == NULL, "error: and no pointer for it");
	do {
		e = hicartMalloc(&p[n], cap / 16 + 4096);
	} while (!e && ++n < 4096);
	is(e, hicartErrorMemoryAllocation, "error: allocating until memory is exhausted");
	diag("%d allocations of %zu bytes fitted", n, cap / 16 + 4096);
	while (n--)
		hicartFree(p[n]);
	e = hicartMalloc(&big, cap / 2);
	is(e, hicartSuccess, "error: after freeing, half the memory can be allocated again");
	hicartFree(big);
	hicartGetLastError();
}

/* ---- another process and another file ---- */

static void test_foreign(void)
{
	int to_parent[2], to_child[2];
	uint64_t addr = 0;
	char c = 0;
	pid_t pid;
	int status = -1, fd;
	int32_t v = 7;

	if (pipe(to_parent) || pipe(to_child)) {
		ok(0, "foreign: pipes");
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		/* The child: its own context, its own allocation, a known pattern. */
		char buf[4096], back[4096];
		void *d = NULL;
		int bad;

		memset(buf, 0x42, sizeof(buf));
		if (hicartSetDevice(device) || hicartMalloc(&d, sizeof(buf)) ||
		    hicartMemcpy(d, buf, sizeof(buf), hicartMemcpyHostToDevice))
			_exit(2);
		addr = (uintptr_t)d;
		if (write(to_parent[1], &addr, sizeof(addr)) != sizeof(addr) ||
		    read(to_child[0], &c, 1) != 1)
			_exit(3);
		bad = hicartMemcpy(back, d, sizeof(back), hicartMemcpyDeviceToHost) ||
		      memcmp(buf, back, sizeof(buf));
		_exit(bad ? 4 : 0);
	}
	if (pid < 0 || read(to_parent[0], &addr, sizeof(addr)) != sizeof(addr)) {
		ok(0, "foreign: child with an allocation");
		return;
	}
	is(hicartFill((void *)(uintptr_t)addr, &v, 256, hicartInt32, NULL), hicartSuccess,
	   "foreign: a launch on another process's memory is queued");
	is(hicartStreamSynchronize(NULL), hicartErrorIllegalAddress,
	   "foreign: and fails with an illegal address");
	is(hicartMemset((void *)(uintptr_t)addr, 0, 64), hicartErrorIllegalAddress,
	   "foreign: memset of another process's memory");
	{
		char buf[64];

		is(hicartMemcpy(buf, (void *)(uintptr_t)addr, 64, hicartMemcpyDeviceToHost),
		   hicartErrorIllegalAddress, "foreign: reading another process's memory");
	}
	hicartGetLastError();
	c = 'x';
	if (write(to_child[1], &c, 1) != 1 || waitpid(pid, &status, 0) != pid)
		status = -1;
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "foreign: the other process's memory is unchanged (child status %#x)", status);
	close(to_parent[0]);
	close(to_parent[1]);
	close(to_child[0]);
	close(to_child[1]);

	/* Another open file of this very process is another context. */
	fd = open(prop.devicePath, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		ok(0, "foreign: open %s: %s", prop.devicePath, strerror(errno));
		return;
	}
	{
		struct higpu_mem_alloc a = { .size = 4096 };
		struct higpu_mem_free f = { 0 };

		if (ioctl(fd, HIGPU_IOC_MEM_ALLOC, &a) || a.status) {
			ok(0, "foreign: alloc in a second file (%s, status %u)", strerror(errno),
			   a.status);
		} else {
			is(hicartFill((void *)(uintptr_t)a.addr, &v, 16, hicartInt32, NULL),
			   hicartSuccess, "foreign: launch on a second file's memory is queued");
			is(hicartDeviceSynchronize(), hicartErrorIllegalAddress,
			   "foreign: and fails: another file is another context");
			f.addr = a.addr;
			ok(!ioctl(fd, HIGPU_IOC_MEM_FREE, &f) && !f.status,
			   "foreign: the second file frees its own allocation");
		}
	}
	close(fd);
	hicartGetLastError();
}

/* ---- a process killed while its streams are busy ---- */

static int proc_listed(pid_t pid)
{
	hicartProcessInfo p[64];
	unsigned int n = 64;

	if (hicartGetDeviceProcesses(device, p, &n))
		return -1;
	for (unsigned int i = 0; i < n; i++)
		if (p[i].pid == pid)
			return 1;
	return 0;
}

static void test_killed(void)
{
	hicartDeviceStats before, after;
	int sync[2];
	char c;
	pid_t pid;
	int status = 0, listed = 1;
	void *mine;
	char pattern[4096], back[4096];

	memset(pattern, 0x6b, sizeof(pattern));
	if (hicartMalloc(&mine, sizeof(pattern)) ||
	    hicartMemcpy(mine, pattern, sizeof(pattern), hicartMemcpyHostToDevice) ||
	    hicartGetDeviceStats(device, &before) || pipe(sync)) {
		ok(0, "killed: set-up");
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		size_t n = 8u << 20;
		hicartStream_t s[2];
		void *d, *e;
		char *h;
		int32_t v = 1;

		if (hicartSetDevice(device) || hicartMalloc(&d, n) || hicartMalloc(&e, n) ||
		    hicartMallocHost((void **)&h, n) || hicartStreamCreate(&s[0]) ||
		    hicartStreamCreate(&s[1]))
			_exit(2);
		for (unsigned long i = 0;; i++) {
			hicartMemcpyAsync(d, h, n, hicartMemcpyHostToDevice, s[i & 1]);
			hicartReduce(e, d, d, n / 4, hicartInt32, hicartReduceSum, s[i & 1]);
			hicartFill(d, &v, n / 4, hicartInt32, s[(i + 1) & 1]);
			hicartMemcpyAsync(h, e, n, hicartMemcpyDeviceToHost, s[i & 1]);
			if (i == 16 && write(sync[1], "r", 1) != 1)
				_exit(3);
		}
	}
	if (pid < 0 || read(sync[0], &c, 1) != 1) {
		ok(0, "killed: child running");
		return;
	}
	ok(proc_listed(pid) == 1, "killed: the busy child is listed among the GPU's processes");
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "killed: child killed mid-stream");
	for (int i = 0; i < 500 && listed; i++) {
		listed = proc_listed(pid);
		if (listed)
			usleep(10000);
	}
	ok(listed == 0, "killed: its context is gone from the process list");
	ok(!hicartGetDeviceStats(device, &after), "killed: the device answers a query");
	ok(after.resetCount == before.resetCount,
	   "killed: the device was not reset for it (reset count %u -> %u)", before.resetCount,
	   after.resetCount);
	ok(!hicartMemcpy(back, mine, sizeof(back), hicartMemcpyDeviceToHost) &&
	   !memcmp(back, pattern, sizeof(back)),
	   "killed: this process's context and memory survived");
	{
		void *d;
		int64_t x = 5, y[16];
		int okc = !hicartMalloc(&d, sizeof(y)) && !hicartFill(d, &x, 16, hicartInt64, NULL) &&
			  !hicartReduce(d, d, d, 16, hicartInt64, hicartReduceSum, NULL) &&
			  !hicartMemcpy(y, d, sizeof(y), hicartMemcpyDeviceToHost);

		for (int i = 0; okc && i < 16; i++)
			okc = y[i] == 10;
		ok(okc, "killed: the device still serves new work");
		hicartFree(d);
	}
	diag("device now: %u contexts, %u allocations, %llu MiB used", after.contexts, after.allocs,
	     (unsigned long long)(after.memUsed >> 20));
	close(sync[0]);
	close(sync[1]);
	hicartFree(mine);
}

int main(int argc, char **argv)
{
	int count = 0, peer = 0, c;
	hicartError_t e;

	while ((c = getopt(argc, argv, "d:pv")) != -1) {
		if (c == 'd')
			device = atoi(optarg);
		else if (c == 'p')
			peer = 1;
		else if (c == 'v')
			verbose = 1;
		else {
			fprintf(stderr, "usage: hicart_test [-d DEVICE] [-p] [-v]\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	e = hicartGetDeviceCount(&count);
	if (e == hicartErrorNoDevice) {
		printf("1..0 # SKIP no HiGPU device (%s)\n", hicartGetErrorString(e));
		return 77;
	}
	e = hicartSetDevice(device);
	if (!e)
		e = hicartGetDeviceProperties(&prop, device);
	if (e) {
		printf("not ok 1 - device %d: %s\n1..1\n", device, hicartGetErrorString(e));
		return 1;
	}
	ok(prop.name[0] && prop.totalGlobalMem > 0, "device %d: \"%s\", %zu MiB, gpu_id %d, "
	   "%d HiLink ports, ABI %d.%d", device, prop.name, prop.totalGlobalMem >> 20, prop.gpuId,
	   prop.hilinkPorts, prop.major, prop.minor);
	ok(prop.hilinkPorts >= 0 && prop.memAlign >= 256 &&
	   !(prop.memAlign & (prop.memAlign - 1)), "device: limits are sane");
	if (peer) {
		if (count < 2 || device > 1) {
			printf("not ok 3 - peer: needs devices 0 and 1 (%d found)\n1..3\n", count);
			return 1;
		}
		test_peer();
		return tap_done();
	}
	test_alloc();
	test_copies();
	test_streams_events();
	test_kernels();
	test_bounds();
	test_exhaust();
	test_foreign();
	test_killed();
	return tap_done();
}
