/* SPDX-License-Identifier: MIT */
/*
 * peer.h - what hicart-p2p and hicart-allreduce share: the GPUs of a run
 * over HiLink (this process's devices and GPUs of other guests), an
 * arena per GPU at a known address, and a barrier through the fabric.
 *
 * No side channel: the processes of a run (one per guest) find each
 * other's memory because each allocates its arena first on a GPU it
 * holds alone, so the arena starts at the GPU's first device address,
 * HIGPU_VA_BASE(gpu_id) (the allocator is first-fit from there). A run
 * whose arena lands elsewhere stops with an error saying so.
 *
 * Arena layout: flags[HIGPU_MAX_GPUS] (u64) at 0, written by the peers
 * (GPU p writes its phase into flags[p] of every other GPU); the GPU's
 * own phase word at PEER_PHASE_OFF, the source of those writes; data
 * from PEER_DATA_OFF.
 */
#ifndef HICART_TOOLS_PEER_H
#define HICART_TOOLS_PEER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hicart.h"
#include "higpu_abi.h"

#define PEER_PHASE_OFF	512
#define PEER_DATA_OFF	4096
#define PEER_MAX	HIGPU_MAX_GPUS

struct peer_gpu {
	int dev;		/* device number: a local ordinal or hicartRemoteDevice(id) */
	int gpu_id;
	int local;
	char *arena;		/* HIGPU_VA_BASE(gpu_id) */
};

struct peer_run {
	const char *tool;
	struct peer_gpu gpu[PEER_MAX];
	int n;			/* all GPUs, ordered by gpu_id */
	unsigned int timeout_s;	/* waiting for the other guests */
};

static inline double peer_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void peer_die(const struct peer_run *r, const char *what, hicartError_t e)
{
	fprintf(stderr, "%s: %s: %s\n", r->tool, what, hicartGetErrorString(e));
	exit(1);
}

/* peer_sort - order the run's GPUs by gpu_id (every process agrees). */
static inline void peer_sort(struct peer_run *r)
{
	for (int i = 1; i < r->n; i++)
		for (int j = i; j > 0 && r->gpu[j].gpu_id < r->gpu[j - 1].gpu_id; j--) {
			struct peer_gpu t = r->gpu[j];

			r->gpu[j] = r->gpu[j - 1];
			r->gpu[j - 1] = t;
		}
}

/*
 * peer_setup - this process's devices and the remote gpu_ids in remote
 * (a comma-separated list, or NULL): the arena of arena_size bytes on
 * each local GPU, and peer access from it to every other GPU of the run.
 */
static inline void peer_setup(struct peer_run *r, const char *remote, size_t arena_size)
{
	int count = 0;
	hicartError_t e = hicartGetDeviceCount(&count);

	if (e)
		peer_die(r, "devices", e);
	r->n = 0;
	for (int d = 0; d < count && r->n < PEER_MAX; d++) {
		hicartDeviceProp p;

		e = hicartGetDeviceProperties(&p, d);
		if (e)
			peer_die(r, "device properties", e);
		r->gpu[r->n++] = (struct peer_gpu){ .dev = d, .gpu_id = p.gpuId, .local = 1 };
	}
	for (const char *s = remote; s && *s;) {
		char *end;
		long id = strtol(s, &end, 10);

		if (end == s || id < 0 || id >= HIGPU_MAX_GPUS || r->n >= PEER_MAX) {
			fprintf(stderr, "%s: --remote %s: want gpu_ids 0..%d, comma-separated\n", r->tool,
				remote, HIGPU_MAX_GPUS - 1);
			exit(2);
		}
		for (int i = 0; i < r->n; i++)
			if (r->gpu[i].gpu_id == id) {
				fprintf(stderr, "%s: gpu_id %ld named twice\n", r->tool, id);
				exit(2);
			}
		r->gpu[r->n++] = (struct peer_gpu){ .dev = hicartRemoteDevice((int)id), .gpu_id = (int)id };
		s = *end == ',' ? end + 1 : end;
	}
	peer_sort(r);
	for (int i = 0; i < r->n; i++)
		r->gpu[i].arena = (char *)(uintptr_t)HIGPU_VA_BASE(r->gpu[i].gpu_id);
	for (int i = 0; i < r->n; i++) {
		struct peer_gpu *g = &r->gpu[i];
		void *a;

		if (!g->local)
			continue;
		hicartSetDevice(g->dev);
		e = hicartMalloc(&a, arena_size);
		if (e)
			peer_die(r, "arena", e);
		if (a != g->arena) {
			fprintf(stderr, "%s: GPU %d: the arena is at %p, not at the GPU's first address %p:"
				" another process holds memory there; run alone on the GPU\n",
				r->tool, g->gpu_id, a, (void *)g->arena);
			exit(1);
		}
		/* The device zeroes new memory: every flag starts at 0. */
		for (int j = 0; j < r->n; j++) {
			if (j == i)
				continue;
			e = hicartDeviceEnablePeerAccess(r->gpu[j].dev, 0);
			if (e && e != hicartErrorPeerAccessAlreadyEnabled)
				peer_die(r, "enable peer access", e);
		}
	}
}

/* peer_flag - the flag GPU `from` writes in GPU `on`'s arena. */
static inline char *peer_flag(const struct peer_run *r, int on, int from)
{
	return r->gpu[on].arena + 8 * r->gpu[from].gpu_id;
}

/*
 * peer_announce - each local GPU writes phase into its flag on every
 * other GPU. strict: a write that fails because the peer is not there
 * yet (not enabled, no arena, no guest) is retried until the deadline,
 * any other failure ends the run; else failures are ignored.
 */
static inline void peer_announce(struct peer_run *r, uint64_t phase, int strict, double deadline)
{
	for (int i = 0; i < r->n; i++) {
		struct peer_gpu *g = &r->gpu[i];
		hicartError_t e;

		if (!g->local)
			continue;
		hicartSetDevice(g->dev);
		e = hicartMemcpy(g->arena + PEER_PHASE_OFF, &phase, 8, hicartMemcpyHostToDevice);
		if (e)
			peer_die(r, "barrier", e);
		for (int j = 0; j < r->n; j++) {
			if (j == i)
				continue;
			for (;;) {
				e = hicartMemcpyPeer(peer_flag(r, j, i), r->gpu[j].dev, g->arena + PEER_PHASE_OFF,
						     g->dev, 8);
				if (!e || !strict)
					break;
				if ((e != hicartErrorPeerAccessNotEnabled && e != hicartErrorIllegalAddress &&
				     e != hicartErrorDevicesUnavailable) || peer_now() > deadline) {
					fprintf(stderr, "%s: GPU %d cannot reach GPU %d: %s\n", r->tool,
						g->gpu_id, r->gpu[j].gpu_id, hicartGetErrorString(e));
					exit(1);
				}
				struct timespec ts = { 0, 100 * 1000 * 1000 };

				nanosleep(&ts, NULL);
			}
		}
		hicartGetLastError();
	}
}

/*
 * peer_barrier - every GPU of the run reaches phase: each local GPU
 * announces phase to every other GPU, then waits until every other
 * GPU's flag on each local GPU says phase or more. The first barrier
 * also waits for the other guests to start. While it waits it announces
 * again every half second: a write can land in the arena of the peer's
 * previous run, still alive for a moment after its last barrier, and
 * the peer's new arena would never see it.
 */
static inline void peer_barrier(struct peer_run *r, uint64_t phase)
{
	double deadline = peer_now() + r->timeout_s, again;

	peer_announce(r, phase, 1, deadline);
	again = peer_now() + 0.5;
	for (int i = 0; i < r->n; i++) {
		uint64_t flags[PEER_MAX];
		int missing;

		if (!r->gpu[i].local)
			continue;
		do {
			hicartError_t e;

			hicartSetDevice(r->gpu[i].dev);
			e = hicartMemcpy(flags, r->gpu[i].arena, sizeof(flags), hicartMemcpyDeviceToHost);
			if (e)
				peer_die(r, "barrier", e);
			missing = 0;
			/* A peer is at most one phase ahead; a flag further on is
			 * the last write of the peer's previous run, still on its
			 * way out, and the peer's new run will overwrite it. */
			for (int j = 0; j < r->n; j++) {
				uint64_t f = flags[r->gpu[j].gpu_id];

				missing += j != i && (f < phase || f > phase + 1);
			}
			if (missing && peer_now() > deadline) {
				fprintf(stderr, "%s: GPU %d: %d GPUs did not reach phase %llu\n", r->tool,
					r->gpu[i].gpu_id, missing, (unsigned long long)phase);
				exit(1);
			}
			if (missing && peer_now() > again) {
				peer_announce(r, phase, 0, deadline);
				again = peer_now() + 0.5;
			}
		} while (missing);
	}
}

#endif /* HICART_TOOLS_PEER_H */
