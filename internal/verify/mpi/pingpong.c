/*
 * hinic-mpi-pingpong: the MPI ping-pong of HiNIC's gate (docs/verify.md).
 *
 * Ranks 0 and 1 exchange messages of each size from 1 byte to MAX bytes
 * (powers of 4), ITERS round trips per size after a warm-up. Every
 * message carries a pattern derived from its size, iteration and sender,
 * and the receiver checks every byte, so a corrupted, stale or misrouted
 * message fails the run. Rank 0 prints one line per size:
 *
 *   pingpong bytes=N iters=I lat_us=L bw_mibs=B
 *
 * (L: half the round trip; B: N bytes each way per half round trip), then
 * "pingpong ok". Any mismatch prints "pingpong MISMATCH ..." and aborts.
 *
 * Usage: hinic-mpi-pingpong [ITERS [MAX]]   (defaults 100 and 1048576)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pattern(long size, int iter, int from, long i)
{
	uint32_t x = (uint32_t)(size * 2654435761u) ^ (uint32_t)(iter * 40503u) ^
		     (uint32_t)(from * 0x9e3779b9u) ^ (uint32_t)(i * 2246822519u);
	return (unsigned char)(x ^ (x >> 11) ^ (x >> 23));
}

static void fill(unsigned char *b, long size, int iter, int from)
{
	for (long i = 0; i < size; i++)
		b[i] = pattern(size, iter, from, i);
}

static void check(const unsigned char *b, long size, int iter, int from, int me)
{
	for (long i = 0; i < size; i++) {
		if (b[i] != pattern(size, iter, from, i)) {
			printf("pingpong MISMATCH rank %d: %ld-byte message %d from rank %d, byte %ld is 0x%02x, want 0x%02x\n",
			       me, size, iter, from, i, b[i], pattern(size, iter, from, i));
			fflush(stdout);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
}

int main(int argc, char **argv)
{
	int rank, nranks;
	int iters = argc > 1 ? atoi(argv[1]) : 100;
	long max = argc > 2 ? atol(argv[2]) : 1048576;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks != 2 || iters < 1 || max < 1) {
		if (rank == 0)
			fprintf(stderr, "hinic-mpi-pingpong: needs 2 ranks, ITERS >= 1, MAX >= 1\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	unsigned char *out = malloc(max), *in = malloc(max);
	if (!out || !in) {
		fprintf(stderr, "hinic-mpi-pingpong: out of memory for %ld bytes\n", max);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	int peer = 1 - rank;
	for (long size = 1; size <= max; size *= 4) {
		int warm = iters < 10 ? iters : 10;
		double t0 = 0;
		for (int it = -warm; it < iters; it++) {
			if (it == 0) {
				MPI_Barrier(MPI_COMM_WORLD);
				t0 = MPI_Wtime();
			}
			int tag = (int)(it & 0x7fff);
			if (rank == 0) {
				fill(out, size, it, 0);
				MPI_Send(out, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
				MPI_Recv(in, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				check(in, size, it, 1, rank);
			} else {
				MPI_Recv(in, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				check(in, size, it, 0, rank);
				fill(out, size, it, 1);
				MPI_Send(out, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
			}
		}
		double half = (MPI_Wtime() - t0) / iters / 2;
		if (rank == 0) {
			printf("pingpong bytes=%ld iters=%d lat_us=%.3f bw_mibs=%.3f\n", size, iters, half * 1e6,
			       (double)size / half / (1 << 20));
			fflush(stdout);
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("pingpong ok\n");
	free(out);
	free(in);
	MPI_Finalize();
	return 0;
}
