// SPDX-License-Identifier: MIT
/*
 * hicart-p2p - peer-to-peer bandwidth and latency over HiLink between
 * every pair of GPUs, like CUDA's p2pBandwidthLatencyTest. hicart-p2p(1).
 *
 * Row i, column j is a copy from GPU i to GPU j, run by GPU i (a remote
 * write); the diagonal is a copy within GPU i (D2D), the ceiling of the
 * device itself measured in the same run. GPUs of other guests
 * (--remote) take part when the same command runs there at the same
 * time: the rows of their GPUs are measured by their guest, and the
 * runs take turns, one source GPU at a time, through barriers over the
 * fabric (peer.h). Bandwidth is timed with events (the device clock):
 * `size` bytes, `iters` times, on one stream; latency is the mean of
 * `iters` copies of 4 bytes, the same way.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hicart.h"
#include "json.h"
#include "peer.h"

#define CHECK(r, call)                                                                 \
	do {                                                                           \
		hicartError_t e_ = (call);                                             \
		if (e_)                                                                \
			peer_die(r, #call, e_);                                        \
	} while (0)

static void usage(FILE *f)
{
	fprintf(f, "usage: hicart-p2p [--remote ID,...] [--size BYTES] [--iters N] [--timeout S] [--json]\n"
		   "  --remote IDS  gpu_ids of GPUs in other guests (they run hicart-p2p too)\n"
		   "  --size BYTES  bytes per bandwidth copy (default 4 MiB)\n"
		   "  --iters N     copies per figure (default 10)\n"
		   "  --timeout S   wait for the other guests (default 120)\n");
}

/* copy - one copy of n bytes from src (on local GPU g) to dst on device
 * ddev, queued on s: a D2D copy within g when ddev is g. */
static hicartError_t copy(struct peer_gpu *g, void *dst, int ddev, const void *src, size_t n, hicartStream_t s)
{
	if (ddev == g->dev)
		return hicartMemcpyAsync(dst, src, n, hicartMemcpyDeviceToDevice, s);
	return hicartMemcpyPeerAsync(dst, ddev, src, g->dev, n, s);
}

/* timed - the mean seconds of iters copies, after one warm-up copy (the
 * first error shows there), timed with events on s. */
static double timed(struct peer_run *r, struct peer_gpu *g, void *dst, int ddev, const void *src, size_t n,
		    int iters, hicartStream_t s)
{
	hicartEvent_t a, b;
	float ms;

	CHECK(r, hicartEventCreate(&a));
	CHECK(r, hicartEventCreate(&b));
	CHECK(r, copy(g, dst, ddev, src, n, s));
	CHECK(r, hicartStreamSynchronize(s));
	CHECK(r, hicartEventRecord(a, s));
	for (int i = 0; i < iters; i++)
		CHECK(r, copy(g, dst, ddev, src, n, s));
	CHECK(r, hicartEventRecord(b, s));
	CHECK(r, hicartStreamSynchronize(s));
	CHECK(r, hicartEventElapsedTime(&ms, a, b));
	hicartEventDestroy(a);
	hicartEventDestroy(b);
	return ms / 1e3 / iters;
}

static void print_matrix(const struct peer_run *r, const char *title, double m[PEER_MAX][PEER_MAX])
{
	printf("%s\n   D\\D", title);
	for (int j = 0; j < r->n; j++)
		printf(" %8d", r->gpu[j].gpu_id);
	printf("\n");
	for (int i = 0; i < r->n; i++) {
		printf("%6d", r->gpu[i].gpu_id);
		for (int j = 0; j < r->n; j++)
			if (m[i][j] < 0)
				printf(" %8s", "-");
			else
				printf(" %8.2f", m[i][j]);
		printf("\n");
	}
}

static void json_matrix(const struct peer_run *r, double m[PEER_MAX][PEER_MAX])
{
	printf("[");
	for (int i = 0; i < r->n; i++) {
		printf("%s[", i ? "," : "");
		for (int j = 0; j < r->n; j++)
			if (m[i][j] < 0)
				printf("%snull", j ? "," : "");
			else
				printf("%s%.4f", j ? "," : "", m[i][j]);
		printf("]");
	}
	printf("]");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "remote", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 's' },
		{ "iters", required_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct peer_run r = { .tool = "hicart-p2p", .timeout_s = 120 };
	double bw[PEER_MAX][PEER_MAX], lat[PEER_MAX][PEER_MAX];
	const char *remote = NULL;
	size_t size = 4 << 20;
	int iters = 10, json = 0, c;
	uint64_t phase = 0;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			remote = optarg;
			break;
		case 's':
			size = strtoull(optarg, NULL, 0);
			break;
		case 'i':
			iters = atoi(optarg);
			break;
		case 't':
			r.timeout_s = (unsigned int)strtoul(optarg, NULL, 10);
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
	/* The arena: flags, then a source and a destination of size bytes. */
	peer_setup(&r, remote, PEER_DATA_OFF + 2 * size);
	peer_barrier(&r, ++phase);
	for (int i = 0; i < r.n; i++) {
		struct peer_gpu *g = &r.gpu[i];

		for (int j = 0; j < r.n; j++)
			bw[i][j] = lat[i][j] = -1;
		if (g->local) {
			char *src = g->arena + PEER_DATA_OFF;
			hicartStream_t s;

			hicartSetDevice(g->dev);
			CHECK(&r, hicartStreamCreate(&s));
			CHECK(&r, hicartMemset(src, 0x5a, size));
			for (int j = 0; j < r.n; j++) {
				/* The second half of the peer's arena: its own source
				 * is not disturbed. */
				char *dst = r.gpu[j].arena + PEER_DATA_OFF + size;
				/* The diagonal (j == i) is a D2D copy within the GPU. */
				double t = timed(&r, g, dst, r.gpu[j].dev, src, size, iters, s);

				bw[i][j] = t > 0 ? (double)size / t / 1e9 : 0;
				lat[i][j] = timed(&r, g, dst, r.gpu[j].dev, src, 4, iters, s) * 1e6;
			}
			CHECK(&r, hicartStreamDestroy(s));
		}
		/* The next source GPU measures on a quiet fabric. */
		peer_barrier(&r, ++phase);
	}
	if (json) {
		printf("{\"size\":%zu,\"iters\":%d,\"gpus\":[", size, iters);
		for (int i = 0; i < r.n; i++)
			printf("%s{\"gpu_id\":%d,\"local\":%s}", i ? "," : "", r.gpu[i].gpu_id,
			       r.gpu[i].local ? "true" : "false");
		printf("],\"bandwidth_gbps\":");
		json_matrix(&r, bw);
		printf(",\"latency_us\":");
		json_matrix(&r, lat);
		printf("}\n");
		return 0;
	}
	printf("P2P (HiLink) copies, %zu bytes x %d; rows are the source GPU (gpu_id), the diagonal\n"
	       "is a copy within the GPU; '-' rows are measured by the other guests.\n\n", size, iters);
	print_matrix(&r, "Unidirectional P2P=Enabled Bandwidth Matrix (GB/s)", bw);
	printf("\n");
	print_matrix(&r, "P2P=Enabled Latency (4-byte copy) Matrix (us)", lat);
	return 0;
}
