/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * higpu_uapi.h - the ioctl interface of /dev/higpu<gpu_id> (higpu.ko),
 * used by libhicart. docs/gpu-driver.md explains it at length.
 *
 * Context: each open file is one device context (HIGPU_OP_CTX_CREATE at
 * open, HIGPU_OP_CTX_DESTROY at the last close). Allocations, streams and
 * events belong to the file; another file (another process) cannot name
 * them, and the device refuses its addresses (status EACCES).
 *
 * Ioctl results. An ioctl returns -1 with errno for a failure of the
 * call itself: EINVAL (bad argument, nonzero reserved field, unknown
 * stream or event id), ENOMEM (driver memory or pinning), EBUSY (per-file
 * budget), ETIMEDOUT (the wait timed out; the work goes on), EINTR (a
 * signal), EIO (the device failed or was reset: this file's context is
 * gone, close and reopen), EFAULT. A command the device ran and failed is
 * no ioctl failure: its status (a positive errno, HIGPU_ST_* of
 * higpu_abi.h) is reported in the `status` field of the answer
 * (synchronous calls) or by HIGPU_IOC_WAIT / STREAM_SYNC / SYNC
 * (asynchronous work).
 *
 * Asynchronous work: COPY, MEMSET, LAUNCH, EVENT_RECORD and
 * STREAM_WAIT_EVENT queue work on a stream of the file and return its
 * sequence number `seq` (per file, from 1, strictly increasing). Work on
 * one stream runs in submission order; streams run concurrently. With
 * HIGPU_SUBMIT_F_WAIT the call also waits for the work (a synchronous
 * copy in one call), and status/result/timestamp_ns hold its outcome.
 *
 * Sticky errors: the first failed work of a stream since its last
 * STREAM_SYNC is kept (status, seq) and reported and cleared by
 * STREAM_SYNC; SYNC does the same for every stream of the file.
 *
 * Stream 0 is the file's default stream: it always exists, cannot be
 * destroyed, and does not synchronise with the other streams (CUDA's
 * per-thread default stream, not the legacy one).
 *
 * All structures have fixed sizes, explicit padding and reserved fields
 * that must be zero on input. `version` fields are HIGPU_UAPI_VERSION.
 */
#ifndef HIGPU_UAPI_H
#define HIGPU_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>
#ifdef __KERNEL__
#include <linux/build_bug.h>
#else
#include <assert.h>
#endif

#define HIGPU_UAPI_VERSION	1
#define HIGPU_DEV_PREFIX	"/dev/higpu"	/* + gpu_id */
#define HIGPU_UAPI_NAME_LEN	32

/* Timeouts: 0 waits without limit (a signal ends the wait: EINTR). */
#define HIGPU_WAIT_FOREVER	0

/* HIGPU_IOC_GET_VERSION */
struct higpu_version {
	__u32 uapi_version;	/* HIGPU_UAPI_VERSION of the driver */
	__u32 abi_version;	/* device ABI: major << 16 | minor */
	__u32 driver_abi;	/* device ABI the driver speaks */
	__u32 rsvd;
};

/*
 * HIGPU_IOC_QUERY: the device's identity and limits (BAR2 header), its
 * use now (HIGPU_QUERY_DEVICE) and this file's (HIGPU_QUERY_CTX).
 */
struct higpu_query {
	/* identity and limits */
	__u32 uapi_version;
	__u32 abi_version;
	__u32 gpu_id;
	__u32 hilink_ports;
	__u32 caps;		/* HIGPU_CAP_* */
	__u32 alloc_align;
	__u64 mem_size;
	__u64 va_base;
	__u64 mem_budget;
	__u32 max_contexts;
	__u32 max_allocs;
	__u32 max_inflight;
	__u32 max_streams;	/* stream ids this file may hold, with 0 */
	__u32 max_events;
	__u32 max_sge;
	__u32 reset_count;
	__u32 ctx_id;		/* this file's device context */
	char name[HIGPU_UAPI_NAME_LEN];	/* NUL-terminated */
	/* 0x70: the device now */
	__u64 mem_used;
	__u64 mem_free_largest;
	__u64 busy_ns;
	__u64 clock_ns;
	__u64 commands;
	__u64 kernels;
	__u64 bytes_h2d;
	__u64 bytes_d2h;
	__u64 bytes_d2d;
	__u32 contexts;
	__u32 allocs;
	__u32 inflight;
	__u32 rsvd0;
	/* 0xc8: this file's context */
	__u64 ctx_mem_used;
	__u32 ctx_allocs;
	__u32 ctx_inflight;
	__u64 ctx_errors;
	__u64 ctx_err_tag;
	__u16 ctx_err_opcode;
	__u16 ctx_err_stream;
	__u16 ctx_err_status;
	__u16 rsvd1;
	__u32 rsvd2[8];
};				/* 0x110 bytes */

/* HIGPU_IOC_MEM_ALLOC: size bytes (> 0), align 0 or a power of two. */
struct higpu_mem_alloc {
	__u64 size;
	__u64 align;
	__u64 addr;		/* out: device address */
	__u32 status;		/* out: HIGPU_ST_* (ENOMEM, ENOSPC) */
	__u32 rsvd;
};

/* HIGPU_IOC_MEM_FREE: addr exactly as MEM_ALLOC returned it. */
struct higpu_mem_free {
	__u64 addr;
	__u32 status;		/* out */
	__u32 rsvd;
};

/* flags of the submitting ioctls */
#define HIGPU_SUBMIT_F_WAIT	0x1	/* wait for the work; timeout_ms applies */

/* The outcome of one piece of work (HIGPU_IOC_WAIT and F_WAIT). */
struct higpu_result {
	__u64 seq;
	__u64 result;		/* per opcode, e.g. an event's record count */
	__u64 timestamp_ns;	/* device clock when it completed */
	__u32 status;		/* HIGPU_ST_* */
	__u32 flags;		/* HIGPU_RESULT_F_* */
};

/* The work is done, but too long ago: its status is no longer known. */
#define HIGPU_RESULT_F_EXPIRED	0x1

/* Copy kinds (higpu_copy.kind). */
#define HIGPU_COPY_H2D		1	/* src user pointer, dst device address */
#define HIGPU_COPY_D2H		2	/* src device address, dst user pointer */
#define HIGPU_COPY_D2D		3	/* both device addresses (memmove) */
#define HIGPU_COPY_PEER		4	/* one side a peer GPU's address (HiLink) */

/*
 * HIGPU_IOC_COPY. The user memory of H2D/D2H is pinned until the work
 * completes, then released: the caller may reuse it after the work is
 * done (WAIT or a stream sync), not before. A copy is split into pieces
 * of at most the driver's chunk; one larger than the file's pin budget
 * waits inside the call for its earlier pieces. `seq` names the whole
 * copy; its status is the first failed piece's. A call that fails after
 * sending some pieces (EFAULT on a later page, EINTR) returns the error
 * and no seq; the pieces sent run on, and the stream's next sync reports
 * the copy as failed (EFAULT, ENOMEM or ECANCELED).
 */
struct higpu_copy {
	__u32 kind;		/* HIGPU_COPY_* */
	__u32 stream;
	__u64 dst;
	__u64 src;
	__u64 len;		/* > 0 */
	__u32 flags;		/* HIGPU_SUBMIT_F_* */
	__u32 timeout_ms;	/* F_WAIT */
	struct higpu_result res;	/* out */
};

/*
 * HIGPU_COPY_PEER (HIGPU_CAP_PEER): dst and src are device addresses, one
 * of this GPU (this file's allocation), the other of a peer GPU on the
 * rack's HiLink fabric (the address names the GPU); one command of len
 * bytes, a remote write when src is here, a remote read when dst is.
 * Its status: EPERM peer access not enabled (HIGPU_IOC_PEER_ACCESS here,
 * and by some context on the peer for this GPU), EACCES a range outside
 * an allocation (here or there), EHOSTUNREACH the peer is gone.
 */

/*
 * HIGPU_IOC_PEER_ACCESS: enable (enable = 1) or disable (0) this file's
 * access to GPU peer_id (HIGPU_OP_PEER_ACCESS). status: EEXIST already
 * enabled, ENOENT not enabled, EINVAL peer_id this GPU's or past
 * HIGPU_MAX_GPUS, EOPNOTSUPP no HiLink port.
 */
struct higpu_peer_access {
	__u32 peer_id;
	__u32 enable;
	__u32 status;		/* out: HIGPU_ST_* */
	__u32 rsvd;
};

/* HIGPU_IOC_MEMSET: len bytes at dst set to value. */
struct higpu_memset {
	__u32 stream;
	__u8 value;
	__u8 rsvd[3];
	__u64 dst;
	__u64 len;
	__u32 flags;
	__u32 timeout_ms;
	struct higpu_result res;	/* out */
};

/* HIGPU_IOC_LAUNCH: a built-in kernel, fields as higpu_args_launch. */
struct higpu_launch {
	__u32 stream;
	__u16 kernel;		/* HIGPU_KERNEL_* */
	__u8 dtype;		/* HIGPU_DT_* */
	__u8 op;		/* HIGPU_RED_* (REDUCE) else 0 */
	__u64 count;
	__u64 dst;
	__u64 src0;
	__u64 src1;
	__u64 value;		/* FILL: the element's bits */
	__u32 flags;
	__u32 timeout_ms;
	struct higpu_result res;	/* out */
};

/* HIGPU_IOC_STREAM_CREATE (out: id), HIGPU_IOC_STREAM_DESTROY (in: id). */
struct higpu_stream {
	__u32 id;
	__u32 rsvd;
};

/*
 * HIGPU_IOC_STREAM_SYNC: wait for all work submitted to the stream so
 * far. status/seq: its first failed work since the last sync (then
 * cleared), 0 if none. HIGPU_IOC_SYNC: the same for all streams (stream
 * ignored; the first failure by seq).
 */
struct higpu_sync {
	__u32 stream;
	__u32 timeout_ms;
	__u64 err_seq;		/* out */
	__u32 status;		/* out: HIGPU_ST_* */
	__u32 rsvd;
};

/* HIGPU_IOC_EVENT_CREATE (out: id), HIGPU_IOC_EVENT_DESTROY (in: id). */
struct higpu_event {
	__u32 id;
	__u32 rsvd;
};

/*
 * HIGPU_IOC_EVENT_RECORD: queue a record of event on stream (the event
 * then stands for all the stream's work before it). HIGPU_IOC_STREAM_
 * WAIT_EVENT: the stream waits until the event's last record (as of
 * this call) completed; needs HIGPU_CAP_EVENT_WAIT. Both return seq.
 */
struct higpu_event_op {
	__u32 event;
	__u32 stream;
	__u32 flags;
	__u32 timeout_ms;
	struct higpu_result res;	/* out */
};

/* higpu_event_query.state */
#define HIGPU_EVENT_NEVER	0	/* never recorded */
#define HIGPU_EVENT_PENDING	1	/* its last record has not completed */
#define HIGPU_EVENT_DONE	2	/* its last record completed */

/*
 * HIGPU_IOC_EVENT_QUERY: the state without waiting. HIGPU_IOC_EVENT_SYNC:
 * wait (timeout_ms) for the last record, then answer as QUERY.
 * timestamp_ns: the device clock of the last record (state DONE);
 * status: its completion status.
 */
struct higpu_event_query {
	__u32 event;
	__u32 timeout_ms;	/* SYNC */
	__u32 state;		/* out */
	__u32 status;		/* out */
	__u64 timestamp_ns;	/* out */
};

/* HIGPU_IOC_EVENT_ELAPSED: end - start in ns; both DONE, else EINVAL/EAGAIN. */
struct higpu_event_elapsed {
	__u32 start;
	__u32 end;
	__s64 elapsed_ns;	/* out */
};

/* HIGPU_IOC_WAIT: wait for work seq of this file. */
struct higpu_wait {
	__u64 seq;
	__u32 timeout_ms;
	__u32 rsvd;
	struct higpu_result res;	/* out */
};

/* HIGPU_IOC_PROCS: the contexts (open files) of this GPU in the guest. */
struct higpu_proc {
	__s32 pid;		/* the opener's thread group id */
	__u32 ctx_id;
	__u64 mem_used;		/* bytes allocated by this file */
	__u32 allocs;
	__u32 inflight;		/* work pieces on the device */
	char comm[16];
};				/* 40 bytes */

struct higpu_procs {
	__u64 ptr;		/* user array of count struct higpu_proc */
	__u32 count;		/* in: room; out: entries written */
	__u32 total;		/* out: contexts open */
};

#define HIGPU_IOC_TYPE		0xB7

#define HIGPU_IOC_GET_VERSION	_IOR(HIGPU_IOC_TYPE, 0x00, struct higpu_version)
#define HIGPU_IOC_QUERY		_IOR(HIGPU_IOC_TYPE, 0x01, struct higpu_query)
#define HIGPU_IOC_MEM_ALLOC	_IOWR(HIGPU_IOC_TYPE, 0x02, struct higpu_mem_alloc)
#define HIGPU_IOC_MEM_FREE	_IOWR(HIGPU_IOC_TYPE, 0x03, struct higpu_mem_free)
#define HIGPU_IOC_COPY		_IOWR(HIGPU_IOC_TYPE, 0x04, struct higpu_copy)
#define HIGPU_IOC_MEMSET	_IOWR(HIGPU_IOC_TYPE, 0x05, struct higpu_memset)
#define HIGPU_IOC_LAUNCH	_IOWR(HIGPU_IOC_TYPE, 0x06, struct higpu_launch)
#define HIGPU_IOC_STREAM_CREATE	_IOR(HIGPU_IOC_TYPE, 0x07, struct higpu_stream)
#define HIGPU_IOC_STREAM_DESTROY _IOW(HIGPU_IOC_TYPE, 0x08, struct higpu_stream)
#define HIGPU_IOC_STREAM_SYNC	_IOWR(HIGPU_IOC_TYPE, 0x09, struct higpu_sync)
#define HIGPU_IOC_SYNC		_IOWR(HIGPU_IOC_TYPE, 0x0a, struct higpu_sync)
#define HIGPU_IOC_EVENT_CREATE	_IOR(HIGPU_IOC_TYPE, 0x0b, struct higpu_event)
#define HIGPU_IOC_EVENT_DESTROY	_IOW(HIGPU_IOC_TYPE, 0x0c, struct higpu_event)
#define HIGPU_IOC_EVENT_RECORD	_IOWR(HIGPU_IOC_TYPE, 0x0d, struct higpu_event_op)
#define HIGPU_IOC_STREAM_WAIT_EVENT _IOWR(HIGPU_IOC_TYPE, 0x0e, struct higpu_event_op)
#define HIGPU_IOC_EVENT_QUERY	_IOWR(HIGPU_IOC_TYPE, 0x0f, struct higpu_event_query)
#define HIGPU_IOC_EVENT_SYNC	_IOWR(HIGPU_IOC_TYPE, 0x10, struct higpu_event_query)
#define HIGPU_IOC_EVENT_ELAPSED	_IOWR(HIGPU_IOC_TYPE, 0x11, struct higpu_event_elapsed)
#define HIGPU_IOC_WAIT		_IOWR(HIGPU_IOC_TYPE, 0x12, struct higpu_wait)
#define HIGPU_IOC_PROCS		_IOWR(HIGPU_IOC_TYPE, 0x13, struct higpu_procs)
#define HIGPU_IOC_PEER_ACCESS	_IOWR(HIGPU_IOC_TYPE, 0x14, struct higpu_peer_access)

static_assert(sizeof(struct higpu_version) == 16, "higpu_version");
static_assert(sizeof(struct higpu_query) == 0x110, "higpu_query");
static_assert(sizeof(struct higpu_mem_alloc) == 32, "higpu_mem_alloc");
static_assert(sizeof(struct higpu_mem_free) == 16, "higpu_mem_free");
static_assert(sizeof(struct higpu_result) == 32, "higpu_result");
static_assert(sizeof(struct higpu_copy) == 72, "higpu_copy");
static_assert(sizeof(struct higpu_memset) == 64, "higpu_memset");
static_assert(sizeof(struct higpu_launch) == 88, "higpu_launch");
static_assert(sizeof(struct higpu_stream) == 8, "higpu_stream");
static_assert(sizeof(struct higpu_sync) == 24, "higpu_sync");
static_assert(sizeof(struct higpu_event) == 8, "higpu_event");
static_assert(sizeof(struct higpu_event_op) == 48, "higpu_event_op");
static_assert(sizeof(struct higpu_event_query) == 24, "higpu_event_query");
static_assert(sizeof(struct higpu_event_elapsed) == 16, "higpu_event_elapsed");
static_assert(sizeof(struct higpu_wait) == 48, "higpu_wait");
static_assert(sizeof(struct higpu_proc) == 40, "higpu_proc");
static_assert(sizeof(struct higpu_procs) == 16, "higpu_procs");
static_assert(sizeof(struct higpu_peer_access) == 16, "higpu_peer_access");

#endif /* HIGPU_UAPI_H */
