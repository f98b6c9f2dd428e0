// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * ibv_hold - used by TestQEMUIB: opens an RDMA device through
 * libibverbs, allocates a protection domain, creates DIR/held and keeps both
 * until DIR/release exists, so the test can try to unload the driver
 * while a user context is open. Prints HICAIN-HOLD-* markers.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_port_attr port;
	struct ibv_pd *pd;
	char held[256], release[256];
	FILE *f;
	int i, n;

	if (argc != 3) {
		fprintf(stderr, "usage: ibv_hold DEVICE DIR\n");
		return 2;
	}
	list = ibv_get_device_list(&n);
	if (!list) {
		perror("ibv_get_device_list");
		return 1;
	}
	for (i = 0; i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx) {
		fprintf(stderr, "HICAIN-HOLD-FAIL open %s\n", argv[1]);
		return 1;
	}
	if (ibv_query_port(ctx, 1, &port)) {
		fprintf(stderr, "HICAIN-HOLD-FAIL query_port\n");
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		perror("HICAIN-HOLD-FAIL alloc_pd");
		return 1;
	}
	printf("HICAIN-HOLD-READY port_state=%d\n", port.state);
	fflush(stdout);
	snprintf(held, sizeof(held), "%s/held", argv[2]);
	snprintf(release, sizeof(release), "%s/release", argv[2]);
	f = fopen(held, "w");
	if (!f) {
		perror("HICAIN-HOLD-FAIL held");
		return 1;
	}
	fclose(f);
	while (access(release, F_OK))
		usleep(100000);
	if (ibv_dealloc_pd(pd)) {
		fprintf(stderr, "HICAIN-HOLD-FAIL dealloc_pd\n");
		return 1;
	}
	if (ibv_close_device(ctx)) {
		fprintf(stderr, "HICAIN-HOLD-FAIL close\n");
		return 1;
	}
	printf("HICAIN-HOLD-DONE\n");
	return 0;
}
