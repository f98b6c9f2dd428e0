// SPDX-License-Identifier: MIT
/*
 * hicart-allreduce - a ring all-reduce (sum) over every GPU of a run, in
 * this guest and others on the same HiLink switch, with peer copies and
 * the built-in reduction kernel; every element is checked exactly
 * against a CPU reference and the figures are reported as nccl-tests
 * does (algbw = size / time, busbw = algbw * 2 (n - 1) / n).
 * hicart-allreduce(1).
 *
 * The ring is the GPUs in gpu_id order; each buffer is cut into n
 * chunks. Reduce-scatter, n - 1 steps: at step s, GPU r pushes chunk
 * (r - s) mod n to GPU r + 1's receive slot s, and GPU r + 1 adds it into
 * its own chunk (own + received). All-gather, n - 1 steps: GPU r pushes
 * chunk (r + 1 - s) mod n, now complete, straight into GPU r + 1's
 * buffer. A push is followed, on the same stream, by a push of the step
 * number into a flag of the receiver's arena; a stream runs in order and
 * a peer write completes only once the data is in the peer's memory, so
 * a receiver that reads the flag has the data. Each operation ends with
 * a barrier (peer.h): nobody writes the next operation's data into a
 * buffer still in use.
 *
 * The order of the additions is fixed by the ring: chunk c is x[c], then
 * x[c+1] + that, then x[c+2] + that ..., each rounded in the element
 * type (bf16: through binary32, as the device does). The reference adds
 * in the same order, so every element must match bit for bit.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hicart.h"
#include "peer.h"

#define CHECK(r, call)                                                                 \
	do {                                                                           \
		hicartError_t e_ = (call);                                             \
		if (e_)                                                                \
			peer_die(r, #call, e_);                                        \
	} while (0)

#define STEP_FLAGS	256	/* arena: the step flag GPU p writes, at 8 * p */
#define SEQ_OFF		PEER_DATA_OFF	/* arena: the step numbers, u64 */

struct ring {
	struct peer_run r;
	int n;			/* GPUs (ranks) */
	size_t max_bytes;
	uint64_t nseq;		/* step numbers in the table */
	uint64_t seq;		/* the last step number used */
	size_t buf_off;		/* arena offset of the buffer */
	size_t slot_off;	/* of receive slot 0 */
	size_t slot_size;
	hicartStream_t stream[PEER_MAX];
};

static uint32_t mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352dU;
	x ^= x >> 15;
	x *= 0x846ca68bU;
	x ^= x >> 16;
	return x;
}

/* input - element i of GPU rank's input for operation op: a float in
 * [-1, 1) with 24 significant bits, so that sums round. */
static float input(int rank, uint32_t op, size_t i)
{
	uint32_t h = mix((uint32_t)i * 0x9e3779b9U ^ mix(op * 131U + (uint32_t)rank));

	return (float)(int32_t)(h >> 8) / 8388608.0f - 1.0f;
}

static size_t esize(hicartDataType t)
{
	return hicartDataTypeSize(t);
}

static void put(void *p, size_t i, hicartDataType t, float v)
{
	if (t == hicartFloat32)
		((float *)p)[i] = v;
	else
		((uint16_t *)p)[i] = hicartFloatToBfloat16(v);
}

/* add - a + b rounded in type t, as the device's REDUCE does. */
static void add_into(void *acc, size_t i, const void *x, hicartDataType t)
{
	if (t == hicartFloat32) {
		volatile float s = ((const float *)x)[i] + ((float *)acc)[i];

		((float *)acc)[i] = s;
	} else {
		volatile float s = hicartBfloat16ToFloat(((const uint16_t *)x)[i]) +
				   hicartBfloat16ToFloat(((uint16_t *)acc)[i]);

		((uint16_t *)acc)[i] = hicartFloatToBfloat16(s);
	}
}

/* chunk c of count elements among n: first element and count. */
static void chunk(size_t count, int n, int c, size_t *off, size_t *len)
{
	size_t base = count / n, extra = count % n;

	*off = base * c + ((size_t)c < extra ? (size_t)c : extra);
	*len = base + ((size_t)c < extra);
}

static int mod(int a, int n)
{
	return ((a % n) + n) % n;
}

/* wait_flag - until GPU rank's flag from prev says seq. */
static void wait_flag(struct ring *g, int rank, int prev, uint64_t seq)
{
	struct peer_gpu *p = &g->r.gpu[rank];
	double deadline = peer_now() + g->r.timeout_s;
	uint64_t v = 0;

	hicartSetDevice(p->dev);
	for (;;) {
		CHECK(&g->r, hicartMemcpy(&v, p->arena + STEP_FLAGS + 8 * g->r.gpu[prev].gpu_id, 8,
					  hicartMemcpyDeviceToHost));
		if (v >= seq)
			return;
		if (peer_now() > deadline) {
			fprintf(stderr, "hicart-allreduce: GPU %d: no step %llu from GPU %d (at %llu)\n",
				p->gpu_id, (unsigned long long)seq, g->r.gpu[prev].gpu_id,
				(unsigned long long)v);
			exit(1);
		}
	}
}

/* push - n elements of t at element off from rank's buffer to the next
 * rank, at dst_off of its arena, then step flag seq. */
static void push(struct ring *g, int rank, size_t off, size_t cnt, size_t dst_off, hicartDataType t,
		 uint64_t seq)
{
	struct peer_gpu *p = &g->r.gpu[rank], *q = &g->r.gpu[mod(rank + 1, g->n)];
	hicartStream_t s = g->stream[rank];

	hicartSetDevice(p->dev);
	if (cnt)
		CHECK(&g->r, hicartMemcpyPeerAsync(q->arena + dst_off, q->dev,
						   p->arena + g->buf_off + off * esize(t), p->dev,
						   cnt * esize(t), s));
	if (seq > g->nseq) {
		fprintf(stderr, "hicart-allreduce: more steps than the table holds\n");
		exit(1);
	}
	CHECK(&g->r, hicartMemcpyPeerAsync(q->arena + STEP_FLAGS + 8 * p->gpu_id, q->dev,
					   p->arena + SEQ_OFF + 8 * (seq - 1), p->dev, 8, s));
}

/* allreduce - one operation on count elements of t; returns seconds. */
static double allreduce(struct ring *g, size_t count, hicartDataType t)
{
	int n = g->n;
	uint64_t s0 = g->seq;
	double t0 = peer_now();

	/* Reduce-scatter. */
	for (int s = 0; s < n; s++) {
		for (int r = 0; r < n; r++) {
			struct peer_gpu *p = &g->r.gpu[r];
			size_t off, cnt;

			if (!p->local)
				continue;
			if (s > 0) {
				int c = mod(r - s, n);

				wait_flag(g, r, mod(r - 1, n), s0 + (uint64_t)s);
				chunk(count, n, c, &off, &cnt);
				if (cnt) {
					char *b = p->arena + g->buf_off + off * esize(t);

					hicartSetDevice(p->dev);
					CHECK(&g->r, hicartReduce(b, b, p->arena + g->slot_off +
								  (size_t)(s - 1) * g->slot_size,
								  cnt, t, hicartReduceSum, g->stream[r]));
				}
			}
			if (s < n - 1) {
				chunk(count, n, mod(r - s, n), &off, &cnt);
				push(g, r, off, cnt, g->slot_off + (size_t)s * g->slot_size, t, s0 + s + 1);
			}
		}
	}
	g->seq = s0 + n - 1;
	s0 = g->seq;
	/* All-gather. */
	for (int s = 0; s < n; s++) {
		for (int r = 0; r < n; r++) {
			size_t off, cnt;

			if (!g->r.gpu[r].local)
				continue;
			if (s > 0)
				wait_flag(g, r, mod(r - 1, n), s0 + (uint64_t)s);
			if (s < n - 1) {
				chunk(count, n, mod(r + 1 - s, n), &off, &cnt);
				push(g, r, off, cnt, g->buf_off + off * esize(t), t, s0 + s + 1);
			}
		}
	}
	g->seq = s0 + n - 1;
	for (int r = 0; r < n; r++)
		if (g->r.gpu[r].local) {
			hicartSetDevice(g->r.gpu[r].dev);
			CHECK(&g->r, hicartStreamSynchronize(g->stream[r]));
		}
	return peer_now() - t0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hicart-allreduce [--remote ID,...] [--min-bytes N] [--max-bytes N] [--dtype f32|bf16|all]\n"
		   "                        [--iters N] [--timeout S]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "remote", required_argument, NULL, 'r' },
		{ "min-bytes", required_argument, NULL, 'b' },
		{ "max-bytes", required_argument, NULL, 'e' },
		{ "dtype", required_argument, NULL, 'd' },
		{ "iters", required_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ring g = { .r = { .tool = "hicart-allreduce", .timeout_s = 300 }, .max_bytes = 64 << 20 };
	hicartDataType types[2] = { hicartFloat32, hicartBfloat16 };
	const char *remote = NULL, *dtype = "all";
	size_t min_bytes = 4;
	int iters = 1, ntypes = 2, wrong_total = 0, c;
	uint64_t phase = 0, *table;
	uint32_t op = 0;
	void *host, *ref, *in;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			remote = optarg;
			break;
		case 'b':
			min_bytes = strtoull(optarg, NULL, 0);
			break;
		case 'e':
			g.max_bytes = strtoull(optarg, NULL, 0);
			break;
		case 'd':
			dtype = optarg;
			break;
		case 'i':
			iters = atoi(optarg);
			break;
		case 't':
			g.r.timeout_s = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!strcmp(dtype, "f32")) {
		ntypes = 1;
	} else if (!strcmp(dtype, "bf16")) {
		types[0] = hicartBfloat16;
		ntypes = 1;
	} else if (strcmp(dtype, "all")) {
		ntypes = 0;
	}
	if (!ntypes || min_bytes < 4 || g.max_bytes < min_bytes || iters < 1) {
		usage(stderr);
		return 2;
	}
	/* The run's GPUs first (n), then the arena: flags, the step table,
	 * the buffer and n - 1 receive slots of the largest chunk. */
	CHECK(&g.r, hicartGetDeviceCount(&g.n));
	for (const char *s = remote; s && *s; s++)
		g.n += *s == ',' || s == remote;
	if (g.n < 2) {
		fprintf(stderr, "hicart-allreduce: a ring needs two GPUs or more\n");
		return 2;
	}
	{
		int nsizes = 0;

		for (size_t b = min_bytes; b <= g.max_bytes; b *= 2)
			nsizes++;
		g.nseq = (uint64_t)nsizes * ntypes * iters * 2 * (g.n - 1);
	}
	/* The largest chunk: ceil(count / n) elements of at most 4 bytes. */
	g.slot_size = (g.max_bytes / g.n + 8 + 255) / 256 * 256;
	g.buf_off = (SEQ_OFF + g.nseq * 8 + 255) / 256 * 256;
	g.slot_off = g.buf_off + (g.max_bytes + 255) / 256 * 256;
	peer_setup(&g.r, remote, g.slot_off + (size_t)(g.n - 1) * g.slot_size);
	if (g.r.n != g.n) {
		fprintf(stderr, "hicart-allreduce: %d GPUs, expected %d\n", g.r.n, g.n);
		return 1;
	}
	table = malloc(g.nseq * 8);
	host = malloc(g.max_bytes);
	ref = malloc(g.max_bytes);
	in = malloc(g.max_bytes);
	if (!table || !host || !ref || !in) {
		fprintf(stderr, "hicart-allreduce: out of host memory\n");
		return 1;
	}
	for (uint64_t i = 0; i < g.nseq; i++)
		table[i] = i + 1;
	for (int r = 0; r < g.n; r++) {
		struct peer_gpu *p = &g.r.gpu[r];

		if (!p->local)
			continue;
		hicartSetDevice(p->dev);
		CHECK(&g.r, hicartStreamCreate(&g.stream[r]));
		CHECK(&g.r, hicartMemcpy(p->arena + SEQ_OFF, table, g.nseq * 8, hicartMemcpyHostToDevice));
	}
	peer_barrier(&g.r, ++phase);
	printf("# hicart-allreduce: %d GPUs in a ring (gpu_id", g.n);
	for (int r = 0; r < g.n; r++)
		printf(" %d%s", g.r.gpu[r].gpu_id, g.r.gpu[r].local ? "" : "*");
	printf("; * in another guest), sum, %d iteration(s)\n", iters);
	printf("#%12s %12s %6s %6s %10s %9s %9s %7s\n", "size", "count", "type", "redop", "time(us)",
	       "algbw", "busbw", "#wrong");
	printf("#%12s %12s %6s %6s %10s %9s %9s %7s\n", "(B)", "(elements)", "", "", "", "(GB/s)",
	       "(GB/s)", "");
	for (int ti = 0; ti < ntypes; ti++) {
		hicartDataType t = types[ti];

		for (size_t bytes = min_bytes; bytes <= g.max_bytes; bytes *= 2) {
			size_t count = bytes / esize(t);
			double total = 0;
			long wrong = 0;

			for (int it = 0; it < iters; it++, op++) {
				/* Inputs, then the reference in the ring's order. */
				for (int r = 0; r < g.n; r++) {
					struct peer_gpu *p = &g.r.gpu[r];

					if (!p->local)
						continue;
					for (size_t i = 0; i < count; i++)
						put(host, i, t, input(p->gpu_id, op, i));
					hicartSetDevice(p->dev);
					CHECK(&g.r, hicartMemcpy(p->arena + g.buf_off, host, bytes,
								 hicartMemcpyHostToDevice));
				}
				peer_barrier(&g.r, ++phase);
				total += allreduce(&g, count, t);
				peer_barrier(&g.r, ++phase);
				for (int cc = 0; cc < g.n; cc++) {
					size_t off, cnt;

					chunk(count, g.n, cc, &off, &cnt);
					for (size_t i = off; i < off + cnt; i++)
						put(ref, i, t, input(g.r.gpu[cc].gpu_id, op, i));
					for (int k = 1; k < g.n; k++) {
						int src = mod(cc + k, g.n);

						for (size_t i = off; i < off + cnt; i++) {
							put(in, i, t, input(g.r.gpu[src].gpu_id, op, i));
							add_into(ref, i, in, t);
						}
					}
				}
				for (int r = 0; r < g.n; r++) {
					struct peer_gpu *p = &g.r.gpu[r];

					if (!p->local)
						continue;
					hicartSetDevice(p->dev);
					CHECK(&g.r, hicartMemcpy(host, p->arena + g.buf_off, bytes,
								 hicartMemcpyDeviceToHost));
					for (size_t i = 0; i < bytes; i += esize(t))
						wrong += memcmp((char *)host + i, (char *)ref + i, esize(t)) != 0;
				}
			}
			double sec = total / iters, algbw = (double)bytes / sec / 1e9;

			printf(" %12zu %12zu %6s %6s %10.1f %9.4f %9.4f %7ld\n", bytes, count,
			       t == hicartFloat32 ? "float" : "bf16", "sum", sec * 1e6, algbw,
			       algbw * 2.0 * (g.n - 1) / g.n, wrong);
			wrong_total += wrong != 0;
		}
	}
	printf("# Out of bounds values : %d %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
	free(table);
	free(host);
	free(ref);
	free(in);
	return wrong_total ? 1 : 0;
}
