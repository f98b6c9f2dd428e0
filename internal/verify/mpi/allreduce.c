/*
 * hinic-mpi-allreduce: the MPI allreduce of HiNIC's gate (docs/verify.md).
 *
 * Every rank reduces vectors of 64-bit integers of each count from 1 to
 * MAX elements (powers of 4) with MPI_SUM, ITERS times per count. Rank r
 * contributes v[i] = (r + 1) * (i + 1) + iter, so the sum is known in
 * closed form and every element of every result is checked on every rank;
 * MPI_MAX is checked once per count too. Rank 0 prints one line per count:
 *
 *   allreduce count=N bytes=B iters=I us=T busbw_mibs=W
 *
 * (T: time per allreduce; W: the bus bandwidth 2 (n-1)/n * B / T, as
 * NCCL's tests report it), then "allreduce ok" once all ranks agree.
 *
 * Usage: hinic-mpi-allreduce [ITERS [MAX]]   (defaults 20 and 262144)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int rank, n;
	int iters = argc > 1 ? atoi(argv[1]) : 20;
	long max = argc > 2 ? atol(argv[2]) : 262144;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	if (n < 2 || iters < 1 || max < 1) {
		if (rank == 0)
			fprintf(stderr, "hinic-mpi-allreduce: needs 2 ranks or more, ITERS >= 1, MAX >= 1\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	int64_t *in = malloc(max * sizeof *in), *out = malloc(max * sizeof *out);
	if (!in || !out) {
		fprintf(stderr, "hinic-mpi-allreduce: out of memory for %ld elements\n", max);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	/* sum over r of (r + 1) = n (n + 1) / 2 */
	int64_t ranksum = (int64_t)n * (n + 1) / 2;
	long bad = 0;
	for (long count = 1; count <= max; count *= 4) {
		double t = 0;
		for (int it = 0; it < iters; it++) {
			for (long i = 0; i < count; i++)
				in[i] = (int64_t)(rank + 1) * (i + 1) + it;
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			MPI_Allreduce(in, out, (int)count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
			t += MPI_Wtime() - t0;
			for (long i = 0; i < count; i++) {
				int64_t want = ranksum * (i + 1) + (int64_t)n * it;
				if (out[i] != want) {
					if (bad++ < 5)
						printf("allreduce MISMATCH rank %d: count %ld iter %d element %ld is %lld, want %lld\n",
						       rank, count, it, i, (long long)out[i], (long long)want);
				}
			}
		}
		MPI_Allreduce(in, out, (int)count, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
		for (long i = 0; i < count; i++) {
			int64_t want = (int64_t)n * (i + 1) + (iters - 1);
			if (out[i] != want && bad++ < 5)
				printf("allreduce MISMATCH rank %d: MPI_MAX count %ld element %ld is %lld, want %lld\n", rank,
				       count, i, (long long)out[i], (long long)want);
		}
		double per = t / iters;
		double bytes = (double)count * sizeof(int64_t);
		if (rank == 0) {
			printf("allreduce count=%ld bytes=%.0f iters=%d us=%.3f busbw_mibs=%.3f\n", count, bytes, iters,
			       per * 1e6, 2.0 * (n - 1) / n * bytes / per / (1 << 20));
			fflush(stdout);
		}
	}
	long allbad = 0;
	MPI_Allreduce(&bad, &allbad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		if (allbad)
			printf("allreduce FAILED: %ld wrong elements\n", allbad);
		else
			printf("allreduce ok\n");
	}
	free(in);
	free(out);
	MPI_Finalize();
	return allbad ? 2 : 0;
}
