// SPDX-License-Identifier: MIT
/*
 * runtime.c - libhicart over /dev/higpu<gpu_id> (higpu_uapi.h).
 *
 * One open file per GPU per process is the device context, opened on
 * first use. Device pointers are the device addresses the driver hands
 * out; the runtime keeps a table of this process's allocations only to
 * tell the kind of a hicartMemcpyDefault copy and which GPU a pointer
 * belongs to. The device checks every address itself.
 *
 * Thread safety: every call may be made from any thread. The device
 * table is filled once (pthread_once); each device's state is under its
 * mutex. The current device and the last error are per thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hicart.h"
#include "higpu_abi.h"
#include "higpu_uapi.h"

/* hicart.h spells the device's values without including its headers. */
static_assert(hicartFloat32 == HIGPU_DT_F32 && hicartFloat16 == HIGPU_DT_F16 &&
	      hicartBfloat16 == HIGPU_DT_BF16 && hicartInt32 == HIGPU_DT_I32 &&
	      hicartInt64 == HIGPU_DT_I64, "hicartDataType is HIGPU_DT_*");
static_assert(hicartReduceSum == HIGPU_RED_SUM && hicartReduceMin == HIGPU_RED_MIN &&
	      hicartReduceMax == HIGPU_RED_MAX, "hicartReduceOp is HIGPU_RED_*");

struct rt_alloc {
	uint64_t addr;
	uint64_t size;
};

struct rt_dev {
	int gpu_id;
	char path[32];
	int fd;				/* -1: no context yet */
	pthread_mutex_t lock;		/* all below */
	struct higpu_query q;		/* identity and limits, at open */
	struct rt_alloc *allocs;
	size_t nallocs;
	size_t cap;
	hicartError_t deferred;		/* an async failure seen by Free */
};

struct hicartStream {
	int dev;
	uint32_t id;
};

struct hicartEvent {
	int dev;
	uint32_t id;
};

struct rt_host {
	void *ptr;
	size_t len;
};

static struct {
	pthread_once_t once;
	int ndev;
	struct rt_dev dev[HIGPU_MAX_GPUS];
	pthread_mutex_t host_lock;
	struct rt_host *host;
	size_t nhost;
	size_t hostcap;
} rt = { .once = PTHREAD_ONCE_INIT, .host_lock = PTHREAD_MUTEX_INITIALIZER };

static _Thread_local int rt_cur;
static _Thread_local hicartError_t rt_last;

static hicartError_t rt_fail(hicartError_t e)
{
	if (e != hicartSuccess)
		rt_last = e;
	return e;
}

/* rt_errno - an ioctl's own failure (higpu_uapi.h, Ioctl results). */
static hicartError_t rt_errno(int e)
{
	switch (e) {
	case 0:
		return hicartSuccess;
	case EINVAL:
	case EFAULT:
	case ERANGE:
		return hicartErrorInvalidValue;
	case ENOMEM:
	case ENOSPC:
		return hicartErrorMemoryAllocation;
	case EBUSY:
		return hicartErrorLaunchOutOfResources;
	case ETIMEDOUT:
		return hicartErrorTimeout;
	case EAGAIN:
		return hicartErrorNotReady;
	case EIO:
		return hicartErrorContextIsDestroyed;
	case ENODEV:
	case ENOENT:
	case ENXIO:
		return hicartErrorNoDevice;
	case EOPNOTSUPP:
		return hicartErrorNotSupported;
	case ENOTTY:
		return hicartErrorInitializationError;
	}
	return hicartErrorOperatingSystem;
}

/* rt_status - a completion status of the device (higpu_abi.h HIGPU_ST_*). */
static hicartError_t rt_status(uint32_t st)
{
	switch (st) {
	case HIGPU_ST_OK:
		return hicartSuccess;
	case HIGPU_ST_EACCES:
		return hicartErrorIllegalAddress;
	case HIGPU_ST_EFAULT:
	case HIGPU_ST_EINVAL:
		return hicartErrorInvalidValue;
	case HIGPU_ST_ENOMEM:
	case HIGPU_ST_ENOSPC:
		return hicartErrorMemoryAllocation;
	case HIGPU_ST_ENOENT:
		return hicartErrorInvalidResourceHandle;
	case HIGPU_ST_EOPNOTSUPP:
		return hicartErrorNotSupported;
	case HIGPU_ST_ECANCELED:
		return hicartErrorContextIsDestroyed;
	case HIGPU_ST_EPERM:
		return hicartErrorPeerAccessNotEnabled;
	case HIGPU_ST_EEXIST:
		return hicartErrorPeerAccessAlreadyEnabled;
	case HIGPU_ST_EHOSTUNREACH:
		return hicartErrorDevicesUnavailable;
	}
	return hicartErrorLaunchFailure;
}

static void rt_atfork_prepare(void)
{
	for (int i = 0; i < rt.ndev; i++)
		pthread_mutex_lock(&rt.dev[i].lock);
}

static void rt_atfork_parent(void)
{
	for (int i = rt.ndev - 1; i >= 0; i--)
		pthread_mutex_unlock(&rt.dev[i].lock);
}

/* The child has no context: the parent's files are the parent's. */
static void rt_atfork_child(void)
{
	for (int i = rt.ndev - 1; i >= 0; i--) {
		struct rt_dev *d = &rt.dev[i];

		if (d->fd >= 0)
			close(d->fd);
		d->fd = -1;
		d->nallocs = 0;
		d->deferred = hicartSuccess;
		pthread_mutex_unlock(&d->lock);
	}
}

static void rt_init(void)
{
	const char *prefix = getenv("HICART_DEVICE_PREFIX");

	if (!prefix || !*prefix)
		prefix = HIGPU_DEV_PREFIX;
	for (int id = 0; id < HIGPU_MAX_GPUS; id++) {
		struct rt_dev *d = &rt.dev[rt.ndev];

		snprintf(d->path, sizeof(d->path), "%s%d", prefix, id);
		if (access(d->path, F_OK))
			continue;
		d->gpu_id = id;
		d->fd = -1;
		pthread_mutex_init(&d->lock, NULL);
		rt.ndev++;
	}
	pthread_atfork(rt_atfork_prepare, rt_atfork_parent, rt_atfork_child);
}

static int rt_count(void)
{
	pthread_once(&rt.once, rt_init);
	return rt.ndev;
}

/* rt_open_locked - the device's context, opened on first use. */
static hicartError_t rt_open_locked(struct rt_dev *d)
{
	struct higpu_version v;
	int fd;

	if (d->fd >= 0)
		return hicartSuccess;
	fd = open(d->path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOSPC ? hicartErrorLaunchOutOfResources :
		       errno == EACCES ? hicartErrorOperatingSystem : rt_errno(errno);
	if (ioctl(fd, HIGPU_IOC_GET_VERSION, &v) || v.uapi_version != HIGPU_UAPI_VERSION ||
	    ioctl(fd, HIGPU_IOC_QUERY, &d->q)) {
		close(fd);
		return hicartErrorInitializationError;
	}
	d->fd = fd;
	return hicartSuccess;
}

/* rt_dev_get - device n with its context, locked. */
static hicartError_t rt_dev_get(int n, struct rt_dev **out)
{
	struct rt_dev *d;
	hicartError_t e;

	if (!rt_count())
		return hicartErrorNoDevice;
	if (n < 0 || n >= rt.ndev)
		return hicartErrorInvalidDevice;
	d = &rt.dev[n];
	pthread_mutex_lock(&d->lock);
	e = rt_open_locked(d);
	if (e) {
		pthread_mutex_unlock(&d->lock);
		return e;
	}
	*out = d;
	return hicartSuccess;
}

static void rt_dev_put(struct rt_dev *d)
{
	pthread_mutex_unlock(&d->lock);
}

/* rt_fd - the context of device n (the fd stays valid: it is closed only in a child). */
static hicartError_t rt_fd(int n, int *fd)
{
	struct rt_dev *d;
	hicartError_t e = rt_dev_get(n, &d);

	if (e)
		return e;
	*fd = d->fd;
	rt_dev_put(d);
	return hicartSuccess;
}

/* rt_owner - the device whose allocation holds [p, p + len), or -1. */
static int rt_owner(const void *p, size_t len)
{
	uint64_t a = (uintptr_t)p;

	for (int i = 0; i < rt_count(); i++) {
		struct rt_dev *d = &rt.dev[i];
		int found = 0;

		pthread_mutex_lock(&d->lock);
		for (size_t j = 0; j < d->nallocs && !found; j++)
			found = a >= d->allocs[j].addr && a - d->allocs[j].addr < d->allocs[j].size &&
				len <= d->allocs[j].size - (a - d->allocs[j].addr);
		pthread_mutex_unlock(&d->lock);
		if (found)
			return i;
	}
	return -1;
}

/* rt_owner_any - the device whose allocations p starts in (any length). */
static int rt_owner_any(const void *p)
{
	return rt_owner(p, 1);
}

static hicartError_t rt_stream(hicartStream_t s, int *dev, uint32_t *id)
{
	if (!s) {
		*dev = rt_cur;
		*id = 0;
	} else {
		*dev = s->dev;
		*id = s->id;
	}
	return hicartSuccess;
}

/* ---- devices ---- */

hicartError_t hicartGetDeviceCount(int *count)
{
	if (!count)
		return rt_fail(hicartErrorInvalidValue);
	*count = rt_count();
	return *count ? hicartSuccess : rt_fail(hicartErrorNoDevice);
}

hicartError_t hicartSetDevice(int device)
{
	int n = rt_count();

	if (!n)
		return rt_fail(hicartErrorNoDevice);
	if (device < 0 || device >= n)
		return rt_fail(hicartErrorInvalidDevice);
	rt_cur = device;
	return hicartSuccess;
}

hicartError_t hicartGetDevice(int *device)
{
	if (!device)
		return rt_fail(hicartErrorInvalidValue);
	if (!rt_count())
		return rt_fail(hicartErrorNoDevice);
	*device = rt_cur;
	return hicartSuccess;
}

hicartError_t hicartGetDeviceProperties(hicartDeviceProp *prop, int device)
{
	struct rt_dev *d;
	hicartError_t e;

	if (!prop)
		return rt_fail(hicartErrorInvalidValue);
	e = rt_dev_get(device, &d);
	if (e)
		return rt_fail(e);
	memset(prop, 0, sizeof(*prop));
	snprintf(prop->name, sizeof(prop->name), "%s", d->q.name[0] ? d->q.name : "HiGPU");
	prop->totalGlobalMem = d->q.mem_size;
	prop->memBudget = d->q.mem_budget;
	prop->gpuId = (int)d->q.gpu_id;
	prop->hilinkPorts = (int)d->q.hilink_ports;
	prop->major = (int)(d->q.abi_version >> 16);
	prop->minor = (int)(d->q.abi_version & 0xffff);
	prop->maxStreams = (int)d->q.max_streams;
	prop->maxEvents = (int)d->q.max_events;
	prop->asyncEngineCount = (int)d->q.max_streams;
	prop->caps = d->q.caps;
	prop->memAlign = d->q.alloc_align;
	snprintf(prop->devicePath, sizeof(prop->devicePath), "%s", d->path);
	rt_dev_put(d);
	return hicartSuccess;
}

static hicartError_t rt_query(int device, struct higpu_query *q)
{
	int fd;
	hicartError_t e = rt_fd(device, &fd);

	if (e)
		return e;
	if (ioctl(fd, HIGPU_IOC_QUERY, q))
		return rt_errno(errno);
	return hicartSuccess;
}

hicartError_t hicartGetDeviceStats(int device, hicartDeviceStats *st)
{
	struct higpu_query q;
	hicartError_t e;

	if (!st)
		return rt_fail(hicartErrorInvalidValue);
	e = rt_query(device, &q);
	if (e)
		return rt_fail(e);
	memset(st, 0, sizeof(*st));
	st->memTotal = q.mem_size;
	st->memUsed = q.mem_used;
	st->memFreeLargest = q.mem_free_largest;
	st->busyNs = q.busy_ns;
	st->clockNs = q.clock_ns;
	st->commands = q.commands;
	st->kernels = q.kernels;
	st->bytesH2D = q.bytes_h2d;
	st->bytesD2H = q.bytes_d2h;
	st->bytesD2D = q.bytes_d2d;
	st->contexts = q.contexts;
	st->allocs = q.allocs;
	st->inflight = q.inflight;
	st->resetCount = q.reset_count;
	st->ctxErrors = q.ctx_errors;
	return hicartSuccess;
}

hicartError_t hicartGetDeviceProcesses(int device, hicartProcessInfo *procs, unsigned int *count)
{
	struct higpu_proc p[256];
	struct higpu_procs a = { .ptr = (uintptr_t)p, .count = 256 };
	unsigned int n = 0;
	pid_t self = getpid();
	int fd;
	hicartError_t e;

	if (!count || (*count && !procs))
		return rt_fail(hicartErrorInvalidValue);
	e = rt_fd(device, &fd);
	if (e)
		return rt_fail(e);
	if (ioctl(fd, HIGPU_IOC_PROCS, &a))
		return rt_fail(rt_errno(errno));
	for (unsigned int i = 0; i < a.count && n < *count; i++) {
		if (p[i].pid == self)
			continue;
		procs[n].pid = p[i].pid;
		procs[n].ctxId = p[i].ctx_id;
		procs[n].memUsed = p[i].mem_used;
		procs[n].allocs = p[i].allocs;
		procs[n].inflight = p[i].inflight;
		memcpy(procs[n].name, p[i].comm, sizeof(procs[n].name));
		procs[n].name[sizeof(procs[n].name) - 1] = 0;
		n++;
	}
	*count = n;
	return hicartSuccess;
}

hicartError_t hicartMemGetInfo(size_t *free, size_t *total)
{
	struct higpu_query q;
	hicartError_t e;
	uint64_t cap;

	if (!free || !total)
		return rt_fail(hicartErrorInvalidValue);
	e = rt_query(rt_cur, &q);
	if (e)
		return rt_fail(e);
	cap = q.mem_budget && q.mem_budget < q.mem_size ? q.mem_budget : q.mem_size;
	*total = q.mem_size;
	*free = q.mem_used < cap ? cap - q.mem_used : 0;
	return hicartSuccess;
}

hicartError_t hicartDriverGetVersion(int *version)
{
	struct higpu_version v;
	int fd;
	hicartError_t e;

	if (!version)
		return rt_fail(hicartErrorInvalidValue);
	e = rt_fd(rt_cur, &fd);
	if (e)
		return rt_fail(e);
	if (ioctl(fd, HIGPU_IOC_GET_VERSION, &v))
		return rt_fail(rt_errno(errno));
	*version = (int)v.uapi_version * 1000;
	return hicartSuccess;
}

hicartError_t hicartRuntimeGetVersion(int *version)
{
	if (!version)
		return rt_fail(hicartErrorInvalidValue);
	*version = HICART_VERSION;
	return hicartSuccess;
}

/* rt_take_deferred - an async failure hicartFree saw, reported once. */
static hicartError_t rt_take_deferred(int dev)
{
	struct rt_dev *d;
	hicartError_t e;

	if (dev < 0 || dev >= rt_count())
		return hicartSuccess;
	d = &rt.dev[dev];
	pthread_mutex_lock(&d->lock);
	e = d->deferred;
	d->deferred = hicartSuccess;
	pthread_mutex_unlock(&d->lock);
	return e;
}

static hicartError_t rt_sync(int dev, unsigned long req, uint32_t stream, uint32_t timeout_ms)
{
	struct higpu_sync s = { .stream = stream, .timeout_ms = timeout_ms };
	hicartError_t e, d;
	int fd;

	e = rt_fd(dev, &fd);
	if (e)
		return e;
	if (ioctl(fd, req, &s))
		return rt_errno(errno);
	e = rt_status(s.status);
	d = rt_take_deferred(dev);
	return d ? d : e;
}

hicartError_t hicartDeviceSynchronize(void)
{
	return rt_fail(rt_sync(rt_cur, HIGPU_IOC_SYNC, 0, HIGPU_WAIT_FOREVER));
}

/* ---- memory ---- */

static int rt_add_alloc(struct rt_dev *d, uint64_t addr, uint64_t size)
{
	if (d->nallocs == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		struct rt_alloc *n = realloc(d->allocs, cap * sizeof(*n));

		if (!n)
			return -1;
		d->allocs = n;
		d->cap = cap;
	}
	d->allocs[d->nallocs++] = (struct rt_alloc){ addr, size };
	return 0;
}

hicartError_t hicartMalloc(void **devPtr, size_t size)
{
	struct higpu_mem_alloc a = { .size = size };
	struct higpu_mem_free f = { 0 };
	struct rt_dev *d;
	hicartError_t e;

	if (!devPtr)
		return rt_fail(hicartErrorInvalidValue);
	*devPtr = NULL;
	if (!size)
		return hicartSuccess;
	e = rt_dev_get(rt_cur, &d);
	if (e)
		return rt_fail(e);
	if (ioctl(d->fd, HIGPU_IOC_MEM_ALLOC, &a))
		e = rt_errno(errno);
	else if (a.status)
		e = rt_status(a.status);
	else if (rt_add_alloc(d, a.addr, size)) {
		f.addr = a.addr;
		ioctl(d->fd, HIGPU_IOC_MEM_FREE, &f);
		e = hicartErrorMemoryAllocation;
	} else {
		*devPtr = (void *)(uintptr_t)a.addr;
	}
	rt_dev_put(d);
	return rt_fail(e);
}

/*
 * hicartFree - as cudaFree, waits for the device's work first (the device
 * does not order a free after queued work); a failure of that work is
 * reported by the next synchronising call.
 */
hicartError_t hicartFree(void *devPtr)
{
	struct higpu_sync s = { 0 };
	struct higpu_mem_free f = { .addr = (uintptr_t)devPtr };
	struct rt_dev *d;
	hicartError_t e;
	int dev;
	size_t j;

	if (!devPtr)
		return hicartSuccess;
	dev = rt_owner_any(devPtr);
	if (dev < 0)
		return rt_fail(hicartErrorInvalidDevicePointer);
	e = rt_dev_get(dev, &d);
	if (e)
		return rt_fail(e);
	for (j = 0; j < d->nallocs && d->allocs[j].addr != f.addr; j++)
		;
	if (j == d->nallocs) {
		rt_dev_put(d);
		return rt_fail(hicartErrorInvalidDevicePointer);
	}
	if (ioctl(d->fd, HIGPU_IOC_SYNC, &s) == 0 && s.status && !d->deferred)
		d->deferred = rt_status(s.status);
	if (ioctl(d->fd, HIGPU_IOC_MEM_FREE, &f))
		e = errno == EINVAL ? hicartErrorInvalidDevicePointer : rt_errno(errno);
	else
		e = rt_status(f.status);
	if (e == hicartSuccess || e == hicartErrorInvalidDevicePointer)
		d->allocs[j] = d->allocs[--d->nallocs];
	rt_dev_put(d);
	return rt_fail(e);
}

hicartError_t hicartMallocHost(void **ptr, size_t size)
{
	void *p;

	if (!ptr)
		return rt_fail(hicartErrorInvalidValue);
	*ptr = NULL;
	if (!size)
		return hicartSuccess;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		 -1, 0);
	if (p == MAP_FAILED)
		return rt_fail(hicartErrorMemoryAllocation);
	/* Locked if RLIMIT_MEMLOCK allows; the driver pins per copy anyway. */
	(void)mlock(p, size);
	pthread_mutex_lock(&rt.host_lock);
	if (rt.nhost == rt.hostcap) {
		size_t cap = rt.hostcap ? rt.hostcap * 2 : 16;
		struct rt_host *n = realloc(rt.host, cap * sizeof(*n));

		if (!n) {
			pthread_mutex_unlock(&rt.host_lock);
			munmap(p, size);
			return rt_fail(hicartErrorMemoryAllocation);
		}
		rt.host = n;
		rt.hostcap = cap;
	}
	rt.host[rt.nhost++] = (struct rt_host){ p, size };
	pthread_mutex_unlock(&rt.host_lock);
	*ptr = p;
	return hicartSuccess;
}

hicartError_t hicartFreeHost(void *ptr)
{
	size_t len = 0;

	if (!ptr)
		return hicartSuccess;
	pthread_mutex_lock(&rt.host_lock);
	for (size_t i = 0; i < rt.nhost; i++) {
		if (rt.host[i].ptr == ptr) {
			len = rt.host[i].len;
			rt.host[i] = rt.host[--rt.nhost];
			break;
		}
	}
	pthread_mutex_unlock(&rt.host_lock);
	if (!len)
		return rt_fail(hicartErrorInvalidValue);
	munmap(ptr, len);
	return hicartSuccess;
}

static hicartError_t rt_copy(int dev, uint32_t stream, uint32_t kind, void *dst, const void *src,
			     size_t count, bool wait)
{
	struct higpu_copy c = {
		.kind = kind, .stream = stream, .dst = (uintptr_t)dst, .src = (uintptr_t)src,
		.len = count, .flags = wait ? HIGPU_SUBMIT_F_WAIT : 0,
	};
	hicartError_t e;
	int fd;

	e = rt_fd(dev, &fd);
	if (e)
		return e;
	if (ioctl(fd, HIGPU_IOC_COPY, &c))
		return rt_errno(errno);
	return wait ? rt_status(c.res.status) : hicartSuccess;
}

/* rt_d2d_across - a copy between two GPUs' memory, through the host. */
static hicartError_t rt_d2d_across(int ddev, void *dst, int sdev, const void *src, size_t count)
{
	size_t chunk = count < (8u << 20) ? count : (8u << 20);
	char *buf = malloc(chunk);
	hicartError_t e = hicartSuccess;

	if (!buf)
		return hicartErrorMemoryAllocation;
	for (size_t off = 0; off < count && !e; off += chunk) {
		size_t n = count - off < chunk ? count - off : chunk;

		e = rt_copy(sdev, 0, HIGPU_COPY_D2H, buf, (const char *)src + off, n, true);
		if (!e)
			e = rt_copy(ddev, 0, HIGPU_COPY_H2D, (char *)dst + off, buf, n, true);
	}
	free(buf);
	return e;
}

static hicartError_t rt_memcpy(void *dst, const void *src, size_t count, hicartMemcpyKind kind,
			       hicartStream_t stream, bool wait)
{
	int sdev, dev;
	uint32_t sid;
	int od, os;

	if ((unsigned int)kind > hicartMemcpyDefault)
		return hicartErrorInvalidMemcpyDirection;
	if (!count)
		return hicartSuccess;
	if (!dst || !src)
		return hicartErrorInvalidValue;
	rt_stream(stream, &sdev, &sid);
	od = rt_owner_any(dst);
	os = rt_owner_any(src);
	if (kind == hicartMemcpyDefault)
		kind = od >= 0 ? (os >= 0 ? hicartMemcpyDeviceToDevice : hicartMemcpyHostToDevice) :
		       (os >= 0 ? hicartMemcpyDeviceToHost : hicartMemcpyHostToHost);
	switch (kind) {
	case hicartMemcpyHostToHost:
		/* Stream-ordered: after the stream's earlier work. */
		if (stream || !wait) {
			hicartError_t e = rt_sync(sdev, HIGPU_IOC_STREAM_SYNC, sid, 0);

			if (e)
				return e;
		}
		memmove(dst, src, count);
		return hicartSuccess;
	case hicartMemcpyHostToDevice:
		dev = stream ? sdev : od >= 0 ? od : rt_cur;
		return rt_copy(dev, stream ? sid : 0, HIGPU_COPY_H2D, dst, src, count, wait);
	case hicartMemcpyDeviceToHost:
		dev = stream ? sdev : os >= 0 ? os : rt_cur;
		return rt_copy(dev, stream ? sid : 0, HIGPU_COPY_D2H, dst, src, count, wait);
	case hicartMemcpyDeviceToDevice:
		if (od >= 0 && os >= 0 && od != os) {
			hicartError_t e = rt_sync(sdev, HIGPU_IOC_STREAM_SYNC, sid, 0);

			return e ? e : rt_d2d_across(od, dst, os, src, count);
		}
		dev = stream ? sdev : od >= 0 ? od : os >= 0 ? os : rt_cur;
		return rt_copy(dev, stream ? sid : 0, HIGPU_COPY_D2D, dst, src, count, wait);
	default:
		return hicartErrorInvalidMemcpyDirection;
	}
}

/* ---- peer access ---- */

/* rt_peer_gpu - the gpu_id of peer device n (local or remote), or -1. */
static int rt_peer_gpu(int n)
{
	if (hicartIsRemoteDevice(n))
		return (n & 0xff) < HIGPU_MAX_GPUS ? (n & 0xff) : -1;
	if (n < 0 || n >= rt_count())
		return -1;
	return rt.dev[n].gpu_id;
}

/* rt_has_link - whether local device n has a HiLink port. */
static hicartError_t rt_has_link(int n, bool *yes)
{
	struct rt_dev *d;
	hicartError_t e = rt_dev_get(n, &d);

	if (e)
		return e;
	*yes = d->q.hilink_ports > 0 && (d->q.caps & HIGPU_CAP_PEER);
	rt_dev_put(d);
	return hicartSuccess;
}

hicartError_t hicartDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
	int gpu = rt_peer_gpu(peerDevice);
	bool here, there = true;
	hicartError_t e;

	if (!canAccessPeer)
		return rt_fail(hicartErrorInvalidValue);
	if (gpu < 0)
		return rt_fail(hicartErrorInvalidDevice);
	e = rt_has_link(device, &here);
	if (!e && !hicartIsRemoteDevice(peerDevice))
		e = rt_has_link(peerDevice, &there);
	if (e)
		return rt_fail(e);
	/* A remote GPU's presence shows at the first copy. */
	*canAccessPeer = here && there && gpu != rt.dev[device].gpu_id;
	return hicartSuccess;
}

static hicartError_t rt_peer_access(int peerDevice, bool enable)
{
	struct higpu_peer_access a = { .enable = enable };
	int gpu = rt_peer_gpu(peerDevice);
	hicartError_t e;
	int fd;

	if (gpu < 0)
		return hicartErrorInvalidDevice;
	e = rt_fd(rt_cur, &fd);
	if (e)
		return e;
	if (gpu == rt.dev[rt_cur].gpu_id)
		return hicartErrorInvalidDevice;
	a.peer_id = (uint32_t)gpu;
	if (ioctl(fd, HIGPU_IOC_PEER_ACCESS, &a))
		return errno == EOPNOTSUPP ? hicartErrorPeerAccessUnsupported : rt_errno(errno);
	switch (a.status) {
	case HIGPU_ST_ENOENT:
		return hicartErrorPeerAccessNotEnabled;
	case HIGPU_ST_EOPNOTSUPP:
		return hicartErrorPeerAccessUnsupported;
	}
	return rt_status(a.status);
}

hicartError_t hicartDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
	if (flags)
		return rt_fail(hicartErrorInvalidValue);
	return rt_fail(rt_peer_access(peerDevice, true));
}

hicartError_t hicartDeviceDisablePeerAccess(int peerDevice)
{
	return rt_fail(rt_peer_access(peerDevice, false));
}

/* rt_names - whether device pointer p (count bytes) is on GPU gpu. */
static bool rt_names(const void *p, size_t count, int gpu)
{
	uint64_t a = (uintptr_t)p, base = HIGPU_VA_BASE(gpu);

	return a >= base && a - base < HIGPU_VA_STRIDE && count <= HIGPU_VA_STRIDE - (a - base);
}

static hicartError_t rt_memcpy_peer(void *dst, int dstDevice, const void *src, int srcDevice,
				    size_t count, hicartStream_t stream, bool wait)
{
	int dgpu = rt_peer_gpu(dstDevice), sgpu = rt_peer_gpu(srcDevice);
	bool dlocal = !hicartIsRemoteDevice(dstDevice), slocal = !hicartIsRemoteDevice(srcDevice);
	int sdev, dev;
	uint32_t sid;

	if (dgpu < 0 || sgpu < 0 || (!dlocal && !slocal))
		return hicartErrorInvalidDevice;
	if (!count)
		return hicartSuccess;
	if (!rt_names(dst, count, dgpu) || !rt_names(src, count, sgpu))
		return hicartErrorInvalidDevicePointer;
	if (dgpu == sgpu)
		return rt_memcpy(dst, src, count, hicartMemcpyDeviceToDevice, stream, wait);
	rt_stream(stream, &sdev, &sid);
	/* The source's device pushes, unless only the destination is here
	 * or the caller's stream belongs to the destination. */
	dev = slocal && !(stream && dlocal && sdev == dstDevice) ? srcDevice : dstDevice;
	if (stream && sdev != dev)
		return hicartErrorInvalidResourceHandle;
	return rt_copy(dev, stream ? sid : 0, HIGPU_COPY_PEER, dst, src, count, wait);
}

hicartError_t hicartMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
	return rt_fail(rt_memcpy_peer(dst, dstDevice, src, srcDevice, count, NULL, true));
}

hicartError_t hicartMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
				    size_t count, hicartStream_t stream)
{
	return rt_fail(rt_memcpy_peer(dst, dstDevice, src, srcDevice, count, stream, false));
}

hicartError_t hicartMemcpy(void *dst, const void *src, size_t count, hicartMemcpyKind kind)
{
	return rt_fail(rt_memcpy(dst, src, count, kind, NULL, true));
}

hicartError_t hicartMemcpyAsync(void *dst, const void *src, size_t count, hicartMemcpyKind kind,
				hicartStream_t stream)
{
	return rt_fail(rt_memcpy(dst, src, count, kind, stream, false));
}

static hicartError_t rt_memset(void *p, int value, size_t count, hicartStream_t stream, bool wait)
{
	struct higpu_memset m = {
		.value = (uint8_t)value, .dst = (uintptr_t)p, .len = count,
		.flags = wait ? HIGPU_SUBMIT_F_WAIT : 0,
	};
	hicartError_t e;
	int dev, fd;
	uint32_t sid;

	if (!count)
		return hicartSuccess;
	rt_stream(stream, &dev, &sid);
	if (!stream) {
		int o = rt_owner_any(p);

		dev = o >= 0 ? o : rt_cur;
	}
	m.stream = sid;
	e = rt_fd(dev, &fd);
	if (e)
		return e;
	if (ioctl(fd, HIGPU_IOC_MEMSET, &m))
		return rt_errno(errno);
	return wait ? rt_status(m.res.status) : hicartSuccess;
}

hicartError_t hicartMemset(void *devPtr, int value, size_t count)
{
	return rt_fail(rt_memset(devPtr, value, count, NULL, true));
}

hicartError_t hicartMemsetAsync(void *devPtr, int value, size_t count, hicartStream_t stream)
{
	return rt_fail(rt_memset(devPtr, value, count, stream, false));
}

/* ---- streams and events ---- */

/*
 * rt_handle_create - allocate @size bytes for a stream or event handle and
 * have the current device create the object with @req; the kernel writes
 * the new id into @arg. The handle is freed again if the ioctl fails.
 */
static hicartError_t rt_handle_create(unsigned long req, void *arg, size_t size, void **handle)
{
	hicartError_t e;
	void *h;
	int fd;

	e = rt_fd(rt_cur, &fd);
	if (e)
		return e;
	h = malloc(size);
	if (!h)
		return hicartErrorMemoryAllocation;
	if (ioctl(fd, req, arg)) {
		e = rt_errno(errno);
		free(h);
		return e;
	}
	*handle = h;
	return hicartSuccess;
}

/*
 * rt_handle_ioctl - @req on @dev about a stream or event named in @arg;
 * EINVAL is the kernel not knowing that stream or event.
 */
static hicartError_t rt_handle_ioctl(int dev, unsigned long req, void *arg)
{
	hicartError_t e;
	int fd;

	e = rt_fd(dev, &fd);
	if (e)
		return e;
	if (ioctl(fd, req, arg))
		return errno == EINVAL ? hicartErrorInvalidResourceHandle : rt_errno(errno);
	return hicartSuccess;
}

/* rt_event_op - @req (record, wait) pairing @event with @stream's device. */
static hicartError_t rt_event_op(hicartStream_t stream, hicartEvent_t event, unsigned long req)
{
	struct higpu_event_op a = { 0 };
	int dev;
	uint32_t sid;

	rt_stream(stream, &dev, &sid);
	if (dev != event->dev)
		return hicartErrorInvalidResourceHandle;
	a.event = event->id;
	a.stream = sid;
	return rt_handle_ioctl(dev, req, &a);
}

hicartError_t hicartStreamCreateWithFlags(hicartStream_t *stream, unsigned int flags)
{
	struct higpu_stream a = { 0 };
	struct hicartStream *s;
	hicartError_t e;
	void *h;

	if (!stream || (flags & ~hicartStreamNonBlocking))
		return rt_fail(hicartErrorInvalidValue);
	e = rt_handle_create(HIGPU_IOC_STREAM_CREATE, &a, sizeof(*s), &h);
	if (e)
		return rt_fail(e);
	s = h;
	s->dev = rt_cur;
	s->id = a.id;
	*stream = s;
	return hicartSuccess;
}

hicartError_t hicartStreamCreate(hicartStream_t *stream)
{
	return hicartStreamCreateWithFlags(stream, hicartStreamDefault);
}

hicartError_t hicartStreamSynchronize(hicartStream_t stream)
{
	int dev;
	uint32_t sid;

	rt_stream(stream, &dev, &sid);
	return rt_fail(rt_sync(dev, HIGPU_IOC_STREAM_SYNC, sid, HIGPU_WAIT_FOREVER));
}

hicartError_t hicartStreamQuery(hicartStream_t stream)
{
	hicartError_t e;
	int dev;
	uint32_t sid;

	rt_stream(stream, &dev, &sid);
	e = rt_sync(dev, HIGPU_IOC_STREAM_SYNC, sid, 1);
	/* NotReady is an answer, not an error (as cudaStreamQuery). */
	return e == hicartErrorTimeout ? hicartErrorNotReady : rt_fail(e);
}

hicartError_t hicartStreamDestroy(hicartStream_t stream)
{
	struct higpu_stream a = { 0 };
	hicartError_t e;

	if (!stream)
		return rt_fail(hicartErrorInvalidResourceHandle);
	a.id = stream->id;
	e = rt_handle_ioctl(stream->dev, HIGPU_IOC_STREAM_DESTROY, &a);
	if (e)
		return rt_fail(e);
	free(stream);
	return hicartSuccess;
}

hicartError_t hicartStreamWaitEvent(hicartStream_t stream, hicartEvent_t event, unsigned int flags)
{
	if (!event || flags)
		return rt_fail(hicartErrorInvalidValue);
	return rt_fail(rt_event_op(stream, event, HIGPU_IOC_STREAM_WAIT_EVENT));
}

hicartError_t hicartEventCreateWithFlags(hicartEvent_t *event, unsigned int flags)
{
	struct higpu_event a = { 0 };
	struct hicartEvent *ev;
	hicartError_t e;
	void *h;

	if (!event || (flags & ~hicartEventDisableTiming))
		return rt_fail(hicartErrorInvalidValue);
	e = rt_handle_create(HIGPU_IOC_EVENT_CREATE, &a, sizeof(*ev), &h);
	if (e)
		return rt_fail(e);
	ev = h;
	ev->dev = rt_cur;
	ev->id = a.id;
	*event = ev;
	return hicartSuccess;
}

hicartError_t hicartEventCreate(hicartEvent_t *event)
{
	return hicartEventCreateWithFlags(event, hicartEventDefault);
}

hicartError_t hicartEventRecord(hicartEvent_t event, hicartStream_t stream)
{
	if (!event)
		return rt_fail(hicartErrorInvalidResourceHandle);
	return rt_fail(rt_event_op(stream, event, HIGPU_IOC_EVENT_RECORD));
}

static hicartError_t rt_event_query(hicartEvent_t event, unsigned long req)
{
	struct higpu_event_query q = { 0 };
	hicartError_t e;

	if (!event)
		return hicartErrorInvalidResourceHandle;
	q.event = event->id;
	e = rt_handle_ioctl(event->dev, req, &q);
	if (e)
		return e;
	if (q.state == HIGPU_EVENT_PENDING)
		return hicartErrorNotReady;
	return rt_status(q.status);
}

hicartError_t hicartEventQuery(hicartEvent_t event)
{
	hicartError_t e = rt_event_query(event, HIGPU_IOC_EVENT_QUERY);

	return e == hicartErrorNotReady ? e : rt_fail(e);
}

hicartError_t hicartEventSynchronize(hicartEvent_t event)
{
	return rt_fail(rt_event_query(event, HIGPU_IOC_EVENT_SYNC));
}

hicartError_t hicartEventElapsedTime(float *ms, hicartEvent_t start, hicartEvent_t end)
{
	struct higpu_event_elapsed a = { 0 };
	hicartError_t e;
	int fd;

	if (!ms)
		return rt_fail(hicartErrorInvalidValue);
	if (!start || !end || start->dev != end->dev)
		return rt_fail(hicartErrorInvalidResourceHandle);
	e = rt_fd(start->dev, &fd);
	if (e)
		return rt_fail(e);
	a.start = start->id;
	a.end = end->id;
	if (ioctl(fd, HIGPU_IOC_EVENT_ELAPSED, &a)) {
		if (errno == EAGAIN)
			return rt_fail(hicartErrorNotReady);
		return rt_fail(errno == EINVAL ? hicartErrorInvalidResourceHandle :
			       errno == EIO ? hicartErrorLaunchFailure : rt_errno(errno));
	}
	*ms = (float)((double)a.elapsed_ns / 1e6);
	return hicartSuccess;
}

hicartError_t hicartEventDestroy(hicartEvent_t event)
{
	struct higpu_event a = { 0 };
	hicartError_t e;

	if (!event)
		return rt_fail(hicartErrorInvalidResourceHandle);
	a.id = event->id;
	e = rt_handle_ioctl(event->dev, HIGPU_IOC_EVENT_DESTROY, &a);
	if (e)
		return rt_fail(e);
	free(event);
	return hicartSuccess;
}

/* ---- built-in kernels ---- */

size_t hicartDataTypeSize(hicartDataType dtype)
{
	switch (dtype) {
	case hicartFloat32:
	case hicartInt32:
		return 4;
	case hicartFloat16:
	case hicartBfloat16:
		return 2;
	case hicartInt64:
		return 8;
	}
	return 0;
}

static hicartError_t rt_launch(struct higpu_launch *l, hicartStream_t stream)
{
	hicartError_t e;
	int dev, fd;
	uint32_t sid;

	rt_stream(stream, &dev, &sid);
	if (!stream) {
		int o = rt_owner_any((void *)(uintptr_t)l->dst);

		dev = o >= 0 ? o : rt_cur;
	}
	l->stream = sid;
	e = rt_fd(dev, &fd);
	if (e)
		return e;
	if (ioctl(fd, HIGPU_IOC_LAUNCH, l))
		return rt_errno(errno);
	return hicartSuccess;
}

hicartError_t hicartFill(void *dst, const void *value, size_t count, hicartDataType dtype,
			 hicartStream_t stream)
{
	struct higpu_launch l = { .kernel = HIGPU_KERNEL_FILL };
	size_t sz = hicartDataTypeSize(dtype);
	uint64_t v = 0;

	if (!sz || !value || !dst)
		return rt_fail(hicartErrorInvalidValue);
	if (!count)
		return hicartSuccess;
	/* The element's bits in the low bytes, little-endian (x86-64). */
	memcpy(&v, value, sz);
	l.dtype = (uint8_t)dtype;
	l.count = count;
	l.dst = (uintptr_t)dst;
	l.value = v;
	return rt_fail(rt_launch(&l, stream));
}

hicartError_t hicartReduce(void *dst, const void *src0, const void *src1, size_t count,
			   hicartDataType dtype, hicartReduceOp op, hicartStream_t stream)
{
	struct higpu_launch l = { .kernel = HIGPU_KERNEL_REDUCE };

	if (!hicartDataTypeSize(dtype) || !dst || !src0 || !src1 ||
	    op < hicartReduceSum || op > hicartReduceMax)
		return rt_fail(hicartErrorInvalidValue);
	if (!count)
		return hicartSuccess;
	l.dtype = (uint8_t)dtype;
	l.op = (uint8_t)op;
	l.count = count;
	l.dst = (uintptr_t)dst;
	l.src0 = (uintptr_t)src0;
	l.src1 = (uintptr_t)src1;
	return rt_fail(rt_launch(&l, stream));
}

/* ---- errors ---- */

hicartError_t hicartGetLastError(void)
{
	hicartError_t e = rt_last;

	rt_last = hicartSuccess;
	return e;
}

hicartError_t hicartPeekAtLastError(void)
{
	return rt_last;
}
