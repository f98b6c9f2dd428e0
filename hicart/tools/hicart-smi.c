// SPDX-License-Identifier: MIT
/*
 * hicart-smi - list HiGPU devices, their memory, utilisation and the
 * processes that hold a context, like nvidia-smi; `hicart-smi topo`
 * prints how the GPUs connect, like `nvidia-smi topo -m`. hicart-smi(1).
 *
 * Utilisation is the device's engine time (busy_ns) over its clock
 * between two samples --interval apart; several streams running at once
 * can add up to more than 100 %, so it is capped there.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hicart.h"
#include "json.h"

#define SMI_MAX_PROCS	256
#define HICART_TOPO_MAX	8	/* gpu_ids 0..7 */

struct smi_gpu {
	int ordinal;
	hicartDeviceProp prop;
	hicartDeviceStats st;
	double util;			/* percent */
	hicartProcessInfo procs[SMI_MAX_PROCS];
	unsigned int nprocs;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: hicart-smi [-q | --json] [-i GPU] [--interval MS]\n"
		   "       hicart-smi topo [-m] [--json] [--remote ID,...]\n"
		   "  -q, --query      detailed report per GPU\n"
		   "  -j, --json       JSON output\n"
		   "  -i, --id GPU     only this device ordinal\n"
		   "      --interval MS utilisation sample (default 200, 0: none)\n"
		   "  topo             the connection matrix of the GPUs (HiLink or the host)\n"
		   "      --remote IDS gpu_ids of GPUs in other guests on the same HiLink switch\n");
}

/* ---- topo ---- */

struct topo_gpu {
	int dev;		/* ordinal, or -1 for a GPU of another guest */
	int gpu_id;
	int hilink;		/* HiLink ports */
	char name[256];		/* hicartDeviceProp's */
};

/*
 * topo_link - how a reaches b: "X" itself, "HL" one hop through the
 * HiLink switch (both have a port), "SYS" only through the host (copies
 * staged in guest memory) for two local GPUs, "-" no path from this
 * guest (a GPU of another guest without HiLink on this side).
 */
static const char *topo_link(const struct topo_gpu *a, const struct topo_gpu *b)
{
	if (a == b)
		return "X";
	if (a->hilink && b->hilink)
		return "HL";
	return a->dev >= 0 && b->dev >= 0 ? "SYS" : "-";
}

/* smi_count - the number of GPUs in *count: 0, or the exit status after
 * saying why there is none (6: no device).
 */
static int smi_count(int *count)
{
	hicartError_t e = hicartGetDeviceCount(count);

	if (!e)
		return 0;
	fprintf(stderr, "hicart-smi: %s\n", hicartGetErrorString(e));
	return e == hicartErrorNoDevice ? 6 : 1;
}

static int smi_topo(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "remote", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct topo_gpu g[HICART_TOPO_MAX];
	const char *remote = NULL;
	int json = 0, n = 0, count = 0, c;
	hicartError_t e;

	optind = 1;
	while ((c = getopt_long(argc, argv, "mjh", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			break;	/* the matrix is all topo prints, as nvidia-smi topo -m */
		case 'j':
			json = 1;
			break;
		case 'r':
			remote = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	c = smi_count(&count);
	if (c)
		return c;
	for (int i = 0; i < count && n < HICART_TOPO_MAX; i++) {
		hicartDeviceProp p;

		e = hicartGetDeviceProperties(&p, i);
		if (e) {
			fprintf(stderr, "hicart-smi: GPU %d: %s\n", i, hicartGetErrorString(e));
			return 1;
		}
		g[n] = (struct topo_gpu){ .dev = i, .gpu_id = p.gpuId, .hilink = p.hilinkPorts };
		snprintf(g[n++].name, sizeof(g[0].name), "%s", p.name);
	}
	/* Another guest's GPU: reachable only over HiLink, and then only if
	 * this guest has a port; it has one by definition (it is named as
	 * a member of the same fabric). */
	for (const char *s = remote; s && *s;) {
		char *end;
		long id = strtol(s, &end, 10);
		int dup = 0;

		for (int i = 0; i < n; i++)
			dup |= g[i].gpu_id == id;
		if (end == s || id < 0 || id >= HICART_TOPO_MAX || dup || n >= HICART_TOPO_MAX) {
			fprintf(stderr, "hicart-smi: --remote %s: want distinct gpu_ids 0..%d of other guests\n",
				remote, HICART_TOPO_MAX - 1);
			return 2;
		}
		g[n] = (struct topo_gpu){ .dev = -1, .gpu_id = (int)id, .hilink = 1 };
		snprintf(g[n++].name, sizeof(g[0].name), "remote");
		s = *end == ',' ? end + 1 : end;
	}
	if (json) {
		printf("{\"gpus\":[");
		for (int i = 0; i < n; i++) {
			printf("%s{\"gpu_id\":%d,\"ordinal\":%d,\"local\":%s,\"hilink_ports\":%d,\"name\":",
			       i ? "," : "", g[i].gpu_id, g[i].dev, g[i].dev >= 0 ? "true" : "false", g[i].hilink);
			json_str(g[i].name);
			printf("}");
		}
		printf("],\"matrix\":[");
		for (int i = 0; i < n; i++) {
			printf("%s[", i ? "," : "");
			for (int j = 0; j < n; j++)
				printf("%s\"%s\"", j ? "," : "", topo_link(&g[i], &g[j]));
			printf("]");
		}
		printf("]}\n");
		return 0;
	}
	printf("      ");
	for (int j = 0; j < n; j++)
		printf(" GPU%-3d", g[j].gpu_id);
	printf(" Where\n");
	for (int i = 0; i < n; i++) {
		printf("GPU%-3d", g[i].gpu_id);
		for (int j = 0; j < n; j++)
			printf(" %-6s", topo_link(&g[i], &g[j]));
		if (g[i].dev >= 0)
			printf(" /dev/higpu%d (device %d)\n", g[i].gpu_id, g[i].dev);
		else
			printf(" another guest\n");
	}
	printf("\nLegend:\n\n"
	       "  X    = Self\n"
	       "  HL   = Connection through the rack's HiLink switch (one hop, peer copies)\n"
	       "  SYS  = Connection through the host only (no HiLink port on one side)\n"
	       "  -    = No path from this guest\n");
	return 0;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int smi_collect(struct smi_gpu *g, int ordinal, unsigned int interval)
{
	hicartDeviceStats a;
	hicartError_t e;

	memset(g, 0, sizeof(*g));
	g->ordinal = ordinal;
	e = hicartGetDeviceProperties(&g->prop, ordinal);
	if (!e)
		e = hicartGetDeviceStats(ordinal, &a);
	if (e) {
		fprintf(stderr, "hicart-smi: GPU %d: %s\n", ordinal, hicartGetErrorString(e));
		return -1;
	}
	g->st = a;
	if (interval) {
		sleep_ms(interval);
		e = hicartGetDeviceStats(ordinal, &g->st);
		if (e) {
			fprintf(stderr, "hicart-smi: GPU %d: %s\n", ordinal, hicartGetErrorString(e));
			return -1;
		}
		if (g->st.clockNs > a.clockNs) {
			g->util = 100.0 * (double)(g->st.busyNs - a.busyNs) /
				  (double)(g->st.clockNs - a.clockNs);
			if (g->util > 100.0)
				g->util = 100.0;
		}
	}
	g->nprocs = SMI_MAX_PROCS;
	e = hicartGetDeviceProcesses(ordinal, g->procs, &g->nprocs);
	if (e) {
		fprintf(stderr, "hicart-smi: GPU %d processes: %s\n", ordinal,
			hicartGetErrorString(e));
		g->nprocs = 0;
	}
	return 0;
}

static double mib(uint64_t b)
{
	return (double)b / (1024.0 * 1024.0);
}

static void smi_table(const struct smi_gpu *g, int n, int drv)
{
	const char *line = "+-----+----------------------+------------------------+-------+--------+";

	printf("%s\n", line);
	printf("| HICART-SMI %-8s  Driver UAPI %-5d                                 |\n", "1.0",
	       drv / 1000);
	printf("%s\n", line);
	printf("| GPU | Name                 |           Memory-Usage | Util  | Contexts |\n");
	printf("%s\n", line);
	for (int i = 0; i < n; i++)
		printf("| %3d | %-20.20s | %9.0fMiB / %6.0fMiB | %4.0f%% | %8u |\n", g[i].prop.gpuId,
		       g[i].prop.name, mib(g[i].st.memUsed), mib(g[i].st.memTotal), g[i].util,
		       g[i].st.contexts ? g[i].st.contexts - 1 : 0);
	printf("%s\n\n", line);
	printf("+------------------------------------------------------------------------+\n");
	printf("| Processes:                                                             |\n");
	printf("|  GPU    PID  Process name        Ctx  Allocs  In-flight    Memory      |\n");
	printf("+------------------------------------------------------------------------+\n");
	int any = 0;

	for (int i = 0; i < n; i++) {
		for (unsigned int j = 0; j < g[i].nprocs; j++) {
			const hicartProcessInfo *p = &g[i].procs[j];

			any = 1;
			printf("| %4d %6d  %-18.18s %4u %7u %10u %9.0fMiB  |\n", g[i].prop.gpuId,
			       p->pid, p->name, p->ctxId, p->allocs, p->inflight, mib(p->memUsed));
		}
	}
	if (!any)
		printf("|  No running processes found                                            |\n");
	printf("+------------------------------------------------------------------------+\n");
}

static void smi_query(const struct smi_gpu *g, int n)
{
	for (int i = 0; i < n; i++) {
		const hicartDeviceProp *p = &g[i].prop;
		const hicartDeviceStats *s = &g[i].st;

		printf("GPU %d (%s)\n", p->gpuId, p->devicePath);
		printf("    Product Name                  : %s\n", p->name);
		printf("    Device ABI                    : %d.%d\n", p->major, p->minor);
		printf("    HiLink Ports                  : %d\n", p->hilinkPorts);
		printf("    Capabilities                  : %#x\n", p->caps);
		printf("    Memory\n");
		printf("        Total                     : %.0f MiB\n", mib(s->memTotal));
		printf("        Guest Budget              : %.0f MiB\n", mib(p->memBudget));
		printf("        Used                      : %.0f MiB\n", mib(s->memUsed));
		printf("        Largest Free Block        : %.0f MiB\n", mib(s->memFreeLargest));
		printf("        Allocations               : %u\n", s->allocs);
		printf("    Utilization                   : %.0f %%\n", g[i].util);
		printf("    Contexts                      : %u\n", s->contexts ? s->contexts - 1 : 0);
		printf("    Commands In Flight            : %u\n", s->inflight);
		printf("    Commands                      : %llu\n", (unsigned long long)s->commands);
		printf("    Kernels                       : %llu\n", (unsigned long long)s->kernels);
		printf("    Bytes H2D / D2H / D2D         : %llu / %llu / %llu\n",
		       (unsigned long long)s->bytesH2D, (unsigned long long)s->bytesD2H,
		       (unsigned long long)s->bytesD2D);
		printf("    Resets                        : %u\n", s->resetCount);
		printf("    Limits                        : %d streams, %d events per context\n",
		       p->maxStreams, p->maxEvents);
		printf("    Processes                     : %u\n", g[i].nprocs);
		for (unsigned int j = 0; j < g[i].nprocs; j++)
			printf("        %d %s: context %u, %.0f MiB in %u allocations, %u in flight\n",
			       g[i].procs[j].pid, g[i].procs[j].name, g[i].procs[j].ctxId,
			       mib(g[i].procs[j].memUsed), g[i].procs[j].allocs,
			       g[i].procs[j].inflight);
		printf("\n");
	}
}

static void smi_json(const struct smi_gpu *g, int n, int drv)
{
	printf("{\"driver_uapi\":%d,\"gpus\":[", drv / 1000);
	for (int i = 0; i < n; i++) {
		const hicartDeviceProp *p = &g[i].prop;
		const hicartDeviceStats *s = &g[i].st;

		printf("%s{\"ordinal\":%d,\"gpu_id\":%d,\"name\":", i ? "," : "", g[i].ordinal,
		       p->gpuId);
		json_str(p->name);
		printf(",\"device\":");
		json_str(p->devicePath);
		printf(",\"abi\":\"%d.%d\",\"hilink_ports\":%d,\"caps\":%u,"
		       "\"memory\":{\"total\":%llu,\"budget\":%llu,\"used\":%llu,\"largest_free\":%llu,"
		       "\"allocations\":%u},\"utilization\":%.1f,\"contexts\":%u,\"inflight\":%u,"
		       "\"commands\":%llu,\"kernels\":%llu,\"bytes_h2d\":%llu,\"bytes_d2h\":%llu,"
		       "\"bytes_d2d\":%llu,\"resets\":%u,\"processes\":[",
		       p->major, p->minor, p->hilinkPorts, p->caps, (unsigned long long)s->memTotal,
		       (unsigned long long)p->memBudget, (unsigned long long)s->memUsed,
		       (unsigned long long)s->memFreeLargest, s->allocs, g[i].util,
		       s->contexts ? s->contexts - 1 : 0, s->inflight,
		       (unsigned long long)s->commands, (unsigned long long)s->kernels,
		       (unsigned long long)s->bytesH2D, (unsigned long long)s->bytesD2H,
		       (unsigned long long)s->bytesD2D, s->resetCount);
		for (unsigned int j = 0; j < g[i].nprocs; j++) {
			const hicartProcessInfo *q = &g[i].procs[j];

			printf("%s{\"pid\":%d,\"name\":", j ? "," : "", q->pid);
			json_str(q->name);
			printf(",\"context\":%u,\"memory_used\":%llu,\"allocations\":%u,\"inflight\":%u}",
			       q->ctxId, (unsigned long long)q->memUsed, q->allocs, q->inflight);
		}
		printf("]}");
	}
	printf("]}\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "query", no_argument, NULL, 'q' },
		{ "json", no_argument, NULL, 'j' },
		{ "id", required_argument, NULL, 'i' },
		{ "interval", required_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int query = 0, json = 0, only = -1, count = 0, n = 0, drv = 0, c;
	unsigned int interval = 200;
	struct smi_gpu *g;

	if (argc > 1 && !strcmp(argv[1], "topo"))
		return smi_topo(argc - 1, argv + 1);
	while ((c = getopt_long(argc, argv, "qji:h", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			query = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'i':
			only = atoi(optarg);
			break;
		case 'I':
			interval = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	c = smi_count(&count);
	if (c)
		return c;
	if (only >= count) {
		fprintf(stderr, "hicart-smi: no GPU %d (%d found)\n", only, count);
		return 2;
	}
	g = calloc((size_t)count, sizeof(*g));
	if (!g)
		return 1;
	for (int i = 0; i < count; i++) {
		if (only >= 0 && i != only)
			continue;
		if (smi_collect(&g[n], i, interval) == 0)
			n++;
	}
	hicartSetDevice(only >= 0 ? only : 0);
	hicartDriverGetVersion(&drv);
	if (json)
		smi_json(g, n, drv);
	else if (query)
		smi_query(g, n);
	else
		smi_table(g, n, drv);
	free(g);
	return n ? 0 : 1;
}
