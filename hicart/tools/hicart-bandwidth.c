// SPDX-License-Identifier: MIT
/*
 * hicart-bandwidth - host-to-device, device-to-host and device-to-device
 * copy bandwidth, like CUDA's bandwidthTest, with the host memcpy
 * ceiling measured in the same run: every figure is also printed as a
 * ratio against it. hicart-bandwidth(1).
 *
 * Device copies are timed with events on one stream (the device clock),
 * the host memcpy with CLOCK_MONOTONIC. D2D counts the bytes copied
 * once (bandwidthTest counts them twice, read and write).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hicart.h"
#include "json.h"

#define CHECK(call)                                                                    \
	do {                                                                           \
		hicartError_t e_ = (call);                                             \
		if (e_) {                                                              \
			fprintf(stderr, "hicart-bandwidth: %s: %s\n", #call,          \
				hicartGetErrorString(e_));                             \
			exit(1);                                                       \
		}                                                                      \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* host_ceiling - memcpy GB/s between two host buffers of size bytes. */
static double host_ceiling(void *dst, const void *src, size_t size, int iters)
{
	double t;

	memcpy(dst, src, size);	/* warm-up, faults the pages in */
	t = now_s();
	for (int i = 0; i < iters; i++)
		memcpy(dst, src, size);
	t = now_s() - t;
	/* Keep the copies: the compiler may not drop them. */
	__asm__ volatile("" : : "r"(dst) : "memory");
	return (double)size * iters / t / 1e9;
}

static double dev_copy(void *dst, const void *src, size_t size, hicartMemcpyKind kind, int iters,
		       hicartStream_t s, hicartEvent_t a, hicartEvent_t b)
{
	float ms;

	CHECK(hicartMemcpyAsync(dst, src, size, kind, s));	/* warm-up */
	CHECK(hicartStreamSynchronize(s));
	CHECK(hicartEventRecord(a, s));
	for (int i = 0; i < iters; i++)
		CHECK(hicartMemcpyAsync(dst, src, size, kind, s));
	CHECK(hicartEventRecord(b, s));
	CHECK(hicartEventSynchronize(b));
	CHECK(hicartStreamSynchronize(s));
	CHECK(hicartEventElapsedTime(&ms, a, b));
	if (ms <= 0)
		return 0;
	return (double)size * iters / (ms / 1e3) / 1e9;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hicart-bandwidth [--device N] [--size BYTES] [--iters N] [--pageable] [--json]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "size", required_argument, NULL, 's' },
		{ "iters", required_argument, NULL, 'n' },
		{ "pageable", no_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	size_t size = 32u << 20;
	int iters = 10, dev = 0, pageable = 0, json = 0, c;
	char *h0, *h1;
	void *d0, *d1;
	hicartStream_t s;
	hicartEvent_t a, b;
	hicartDeviceProp prop;
	double ceil, h2d, d2h, d2d;

	while ((c = getopt_long(argc, argv, "d:s:n:pjh", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			dev = atoi(optarg);
			break;
		case 's':
			size = strtoull(optarg, NULL, 0);
			break;
		case 'n':
			iters = atoi(optarg);
			break;
		case 'p':
			pageable = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!size || iters < 1) {
		usage(stderr);
		return 2;
	}
	CHECK(hicartSetDevice(dev));
	CHECK(hicartGetDeviceProperties(&prop, dev));
	if (pageable) {
		h0 = malloc(size);
		h1 = malloc(size);
		if (!h0 || !h1) {
			fprintf(stderr, "hicart-bandwidth: out of host memory\n");
			return 1;
		}
	} else {
		CHECK(hicartMallocHost((void **)&h0, size));
		CHECK(hicartMallocHost((void **)&h1, size));
	}
	memset(h0, 0x5a, size);
	memset(h1, 0, size);
	CHECK(hicartMalloc(&d0, size));
	CHECK(hicartMalloc(&d1, size));
	CHECK(hicartStreamCreate(&s));
	CHECK(hicartEventCreate(&a));
	CHECK(hicartEventCreate(&b));

	ceil = host_ceiling(h1, h0, size, iters);
	h2d = dev_copy(d0, h0, size, hicartMemcpyHostToDevice, iters, s, a, b);
	d2h = dev_copy(h1, d0, size, hicartMemcpyDeviceToHost, iters, s, a, b);
	d2d = dev_copy(d1, d0, size, hicartMemcpyDeviceToDevice, iters, s, a, b);
	if (memcmp(h0, h1, size)) {
		fprintf(stderr, "hicart-bandwidth: data read back differs from what was written\n");
		return 1;
	}

	if (json) {
		printf("{\"device\":%d,\"name\":", prop.gpuId);
		json_str(prop.name);
		printf(",\"size\":%zu,\"iters\":%d,\"host_memory\":\"%s\","
		       "\"gbps\":{\"host_memcpy\":%.3f,\"h2d\":%.3f,\"d2h\":%.3f,\"d2d\":%.3f},"
		       "\"ratio\":{\"h2d\":%.3f,\"d2h\":%.3f,\"d2d\":%.3f}}\n",
		       size, iters, pageable ? "pageable" : "pinned", ceil, h2d,
		       d2h, d2d, h2d / ceil, d2h / ceil, d2d / ceil);
	} else {
		printf("[hicart-bandwidth] GPU %d: %s (%s)\n", prop.gpuId, prop.name, prop.devicePath);
		printf(" Transfer size: %zu bytes, %d iterations, %s host memory\n\n", size, iters,
		       pageable ? "pageable" : "pinned");
		printf(" %-22s %12s %16s\n", "Test", "GB/s", "vs host memcpy");
		printf(" %-22s %12.3f %16.3f\n", "Host memcpy (ceiling)", ceil, 1.0);
		printf(" %-22s %12.3f %16.3f\n", "Host to Device", h2d, h2d / ceil);
		printf(" %-22s %12.3f %16.3f\n", "Device to Host", d2h, d2h / ceil);
		printf(" %-22s %12.3f %16.3f\n", "Device to Device", d2d, d2d / ceil);
		printf("\nResult = PASS\n");
	}
	CHECK(hicartEventDestroy(b));
	CHECK(hicartEventDestroy(a));
	CHECK(hicartStreamDestroy(s));
	CHECK(hicartFree(d1));
	CHECK(hicartFree(d0));
	if (pageable) {
		free(h1);
		free(h0);
	} else {
		CHECK(hicartFreeHost(h1));
		CHECK(hicartFreeHost(h0));
	}
	return 0;
}
