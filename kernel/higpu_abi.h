/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * higpu_abi.h - the HiGPU device ABI: BAR2 of the ivshmem-doorbell
 * function and the command and completion rings in guest memory.
 *
 * This header is the one source of truth. internal/gpu/zabi.go, its Go
 * mirror, is generated from it with cgo -godefs; Go tests fail when the
 * mirror is stale, lacks a HIGPU_ name, or an offset, a size or a
 * constant drifts; the static_asserts below fail the C build
 * when a structure changes size. docs/gpu.md explains the protocol.
 *
 * All fields are little-endian. Every structure has explicit padding and
 * a fixed size. "GPA" is a guest-physical address (a DMA address of the
 * guest driver, dma_set_mask_and_coherent(DMA_BIT_MASK(64))). A "device
 * address" is an address in the GPU's own memory: va_base + offset, never
 * 0, handed out by HIGPU_OP_MEM_ALLOC.
 *
 * Device memory is not visible in BAR2: BAR2 holds this header only. The
 * guest reaches device memory through the copy, memset and kernel
 * commands, which the device checks against the allocations of the
 * command's context.
 *
 * Memory ordering: a producer writes ring entries, then publishes its
 * producer index with a release store (smp_store_release / dma_wmb
 * before WRITE_ONCE); a consumer reads the index with an acquire load
 * (smp_load_acquire / READ_ONCE + dma_rmb) before reading entries.
 * Indices are free-running 32-bit counters; slot = index & (entries - 1);
 * entries are powers of two; prod - cons never exceeds entries.
 */
#ifndef HIGPU_ABI_H
#define HIGPU_ABI_H

#ifdef __KERNEL__
#include <linux/build_bug.h>	/* static_assert */
#include <linux/types.h>
#else
#include <linux/types.h>
#include <assert.h>		/* static_assert (C11) */
#endif

#include "hidev_abi.h"

#define HIGPU_MAGIC		0x55504748U	/* "HGPU" little-endian */
#define HIGPU_ABI_MAJOR		1
#define HIGPU_ABI_MINOR		1	/* 1: peer access over HiLink */
#define HIGPU_VENDOR_ID		0x1ED5
#define HIGPU_DEVICE_ID		0x6A10

/*
 * PCI identity: the function is QEMU's ivshmem-doorbell (1af4:1110), as
 * for the NIC. A driver tells the two apart by the magic at BAR2 offset 0
 * and leaves (-ENODEV) a function whose magic is not its own.
 */
#define HIGPU_BAR2_SIZE		0x10000		/* 64 KiB, a power of two */
#define HIGPU_HDR_OFF		0x0000
#define HIGPU_MAX_GPUS		8		/* gpu_id 0..7 */
#define HIGPU_NAME_LEN		32

/*
 * Device addresses: GPU n's memory starts at HIGPU_VA_BASE(n), so a
 * device address names its GPU (va_base in the header says the same).
 */
#define HIGPU_VA_STRIDE		0x10000000000ULL	/* 1 TiB */
#define HIGPU_VA_BASE(n)	(HIGPU_VA_STRIDE * ((__u64)(n) + 1))
#define HIGPU_ALLOC_ALIGN	256	/* least alignment of an allocation */

/*
 * Doorbells, guest to device: write (backend_peer_id << 16) | vector to
 * BAR0 offset 12. A doorbell carries no payload: the device rereads the
 * header fields named below.
 */
#define HIGPU_DB_CTRL		0	/* driver_status moved */
#define HIGPU_DB_CMD		1	/* cmd_prod moved */
#define HIGPU_DB_CPL		2	/* cpl_cons moved (room for completions) */
#define HIGPU_NUM_DB		3

/*
 * Interrupts, device to guest (MSI-X vectors). The device raises none
 * before the driver sets HIGPU_DRV_MSIX_ON: QEMU drops them.
 */
#define HIGPU_IRQ_CTRL		0	/* dev_status changed: live, fatal, reset done */
#define HIGPU_IRQ_CPL		1	/* completions posted */
#define HIGPU_NUM_IRQ		2
#define HIGPU_MIN_VECTORS	2	/* QEMU's vectors= must be at least this */

/* dev_status bits (device writes): hidev_abi.h's. */
#define HIGPU_DEV_READY		HINIC_DEV_READY
#define HIGPU_DEV_LIVE		HINIC_DEV_LIVE	/* rings accepted, commands served */
#define HIGPU_DEV_FATAL		HINIC_DEV_FATAL

/* driver_status bits (hidev_abi.h; then ring HIGPU_DB_CTRL). */
#define HIGPU_DRV_OK		HINIC_DRV_OK	/* rings programmed, driver ready */
#define HIGPU_DRV_MSIX_ON	HINIC_DRV_MSIX_ON
#define HIGPU_DRV_RESET		HINIC_DRV_RESET

/* fatal_code: why HIGPU_DEV_FATAL is set. Only a reset leaves it. */
#define HIGPU_FATAL_NONE	0
#define HIGPU_FATAL_ABI		1	/* driver_abi major differs */
#define HIGPU_FATAL_RING_CONFIG	2	/* ring GPA/entries invalid at DRV_OK */
#define HIGPU_FATAL_CMD_INDEX	3	/* cmd_prod - cmd_cons > cmd entries */
#define HIGPU_FATAL_CPL_INDEX	4	/* cpl_cons not in [cpl_prod - entries, cpl_prod] */
#define HIGPU_FATAL_RING_DMA	5	/* a ring slot left guest RAM */

/* capabilities */
#define HIGPU_CAP_COPY_SG	0x1	/* scatter lists in H2D/D2H copies */
#define HIGPU_CAP_KERNELS	0x2	/* built-in kernels (HIGPU_OP_LAUNCH) */
#define HIGPU_CAP_EVENT_WAIT	0x4	/* cross-stream HIGPU_OP_EVENT_WAIT */
#define HIGPU_CAP_PEER		0x8	/* a HiLink port: PEER_ACCESS, COPY_PEER */

/* Ring sizes the device accepts (entries, powers of two). */
#define HIGPU_RING_MIN		8
#define HIGPU_RING_MAX		4096
#define HIGPU_RING_ALIGN	64	/* ring GPAs are 64-byte aligned */

/*
 * Handshake. The device fills the header (magic last), zeroes the ring
 * indices and sets HIGPU_DEV_READY. The driver checks magic and
 * abi_major, writes driver_abi and the ring fields, sets driver_status =
 * HIGPU_DRV_OK | HIGPU_DRV_MSIX_ON and rings HIGPU_DB_CTRL. The device
 * checks the ABI (else HIGPU_FATAL_ABI) and the rings (entries powers of
 * two in ring_min..ring_max, GPAs HIGPU_RING_ALIGN-aligned and wholly in
 * guest RAM, else HIGPU_FATAL_RING_CONFIG), sets HIGPU_DEV_LIVE and
 * raises HIGPU_IRQ_CTRL.
 *
 * Reset: the driver writes HIGPU_DRV_RESET (alone) and rings
 * HIGPU_DB_CTRL; clearing HIGPU_DRV_OK of a live device does the same.
 * The device drops every command taken and not completed (no completion
 * is written to the old rings), destroys every context and allocation,
 * rewrites the header as at start with reset_count + 1 and
 * HIGPU_DEV_READY, and raises HIGPU_IRQ_CTRL. The driver then does the
 * handshake again. A fatal device waits for a reset.
 *
 * Flow control: the device takes a command only while its completion
 * has a slot, counting the commands taken and not yet completed
 * (taken - cpl_cons < cpl_entries), and while fewer than max_inflight are
 * in flight; it never overruns the completion ring. cpl_cons must stay in
 * [cpl_prod - cpl_entries, cpl_prod] and cmd_prod in [cmd_cons, cmd_cons
 * + cmd_entries], else the device goes fatal.
 *
 * The device clock (timestamp_ns, clock_ns) counts nanoseconds on a
 * monotonic clock of the backend, shared by all its GPUs.
 */
struct higpu_dev_hdr {
	/* 0x000: identity, written once by the device (hidev_abi.h) */
	HINIC_DEV_ID_FIELDS;
	__u8 gpu_id;		/* 0..7 */
	__u8 hilink_ports;	/* peer-fabric ports (0: none) */
	__le16 rsvd0;
	__le32 num_vectors;	/* doorbells and MSI-X vectors each */
	__le32 caps;		/* HIGPU_CAP_* */
	__le32 alloc_align;	/* HIGPU_ALLOC_ALIGN or larger, power of two */
	__le64 mem_size;	/* device memory, bytes */
	__le64 va_base;		/* HIGPU_VA_BASE(gpu_id) */
	__u8 name[HIGPU_NAME_LEN];	/* NUL-padded, e.g. "HiGPU" */
	/* 0x050: limits (per guest: the budgets of this function) */
	__le64 mem_budget;	/* device memory the guest may hold */
	__le32 max_contexts;
	__le32 max_allocs;	/* allocations, all contexts together */
	__le32 max_inflight;	/* commands taken but not completed */
	__le32 max_streams;	/* per context: stream ids 0..max_streams-1 */
	__le32 max_events;	/* per context: event ids 0..max_events-1 */
	__le32 max_sge;		/* entries of one copy's scatter list */
	__le32 ring_min;	/* HIGPU_RING_MIN */
	__le32 ring_max;	/* HIGPU_RING_MAX */
	__le32 rsvd1[2];
	/* 0x080: status and handshake (hidev_abi.h) */
	HINIC_DEV_STATUS_FIELDS;
	__le32 rsvd2[3];
	/* 0x0a0: rings, programmed by the driver before HIGPU_DRV_OK */
	__le64 cmd_ring_gpa;	/* cmd_entries x struct higpu_cmd */
	__le64 cpl_ring_gpa;	/* cpl_entries x struct higpu_cpl */
	__le32 cmd_entries;	/* power of two, ring_min..ring_max */
	__le32 cpl_entries;	/* power of two, ring_min..ring_max */
	__le32 rsvd3[2];
	/* 0x0c0: ring indices (prod written by producer, cons by consumer) */
	__le32 cmd_prod;	/* driver */
	__le32 cmd_cons;	/* device */
	__le32 cpl_prod;	/* device */
	__le32 cpl_cons;	/* driver */
	__le32 rsvd4[4];
	/* 0x0e0: device counters, informational */
	__le64 doorbells;
	__le64 interrupts;
	__le64 commands;	/* commands taken from the ring */
	__le64 errors;		/* completions with a status other than OK */
	__le64 bytes_h2d;
	__le64 bytes_d2h;
	__le64 bytes_d2d;	/* D2D copies, memsets and kernel output */
	__le64 kernels;
	__le64 busy_ns;		/* time the engines spent executing */
	__le64 mem_used;	/* device memory allocated */
	__le32 contexts;	/* contexts open */
	__le32 allocs;		/* allocations held */
	__le64 rsvd5;
};					/* 0x140 bytes */

/*
 * Command opcodes. Two kinds:
 *
 *  - immediate (CTX_CREATE, CTX_DESTROY, MEM_ALLOC, MEM_FREE, QUERY): run
 *    when the device takes them from the ring, in ring order, whatever
 *    their stream_id;
 *  - stream-ordered (the rest): queued on (ctx_id, stream_id). A stream
 *    runs its commands one at a time in ring order; different streams
 *    (of one context or of several) run concurrently and complete in any
 *    order. Device addresses are checked when the command runs, not when
 *    it is taken: a MEM_FREE does not wait for queued work (synchronize
 *    first, as the runtime's Free does), and queued work that uses a
 *    freed range fails with HIGPU_ST_EACCES.
 *
 * Every command taken gets exactly one completion, with its tag.
 */
enum higpu_op {
	HIGPU_OP_NOP = 1,		/* stream-ordered; completes OK */
	HIGPU_OP_CTX_CREATE,		/* -> result = new ctx id (1..) */
	HIGPU_OP_CTX_DESTROY,		/* ctx_id: its queued commands complete
					 * with HIGPU_ST_ECANCELED, running ones
					 * finish, then its memory is freed and
					 * this completes (after all of them) */
	HIGPU_OP_MEM_ALLOC,		/* higpu_args_alloc -> result = device address */
	HIGPU_OP_MEM_FREE,		/* higpu_args_free */
	HIGPU_OP_COPY_H2D,		/* higpu_args_copy: src = GPA / scatter list */
	HIGPU_OP_COPY_D2H,		/* higpu_args_copy: dst = GPA / scatter list */
	HIGPU_OP_COPY_D2D,		/* higpu_args_copy: device to device (memmove) */
	HIGPU_OP_MEMSET,		/* higpu_args_memset: bytes */
	HIGPU_OP_LAUNCH,		/* higpu_args_launch: a built-in kernel */
	HIGPU_OP_EVENT_RECORD,		/* higpu_args_event -> cpl timestamp */
	HIGPU_OP_EVENT_WAIT,		/* higpu_args_event: the stream waits */
	HIGPU_OP_QUERY,			/* higpu_args_query -> resp_gpa */
	/* minor 1: peer access over HiLink (HIGPU_CAP_PEER) */
	HIGPU_OP_PEER_ACCESS,		/* immediate; higpu_args_peer */
	HIGPU_OP_COPY_PEER,		/* higpu_args_copy: one side on a peer GPU */
	/*
	 * One past the last opcode of this minor. It is no wire value and
	 * grows with each opcode a minor adds; the opcodes above never move.
	 */
	HIGPU_OP_MAX
};

/* higpu_cmd.flags */
#define HIGPU_CMD_F_NO_IRQ	0x1	/* do not raise HIGPU_IRQ_CPL for this one */

struct higpu_sge {
	__le64 gpa;
	__le64 len;			/* > 0 */
};					/* 16 bytes */

/* HIGPU_OP_MEM_ALLOC */
struct higpu_args_alloc {
	__le64 size;			/* > 0; rounded up to alloc_align */
	__le64 align;			/* 0 or a power of two; at least alloc_align */
};

/* HIGPU_OP_MEM_FREE */
struct higpu_args_free {
	__le64 addr;			/* exactly what MEM_ALLOC returned */
};

/*
 * HIGPU_OP_COPY_H2D, _D2H, _D2D. The host side of H2D (src) and D2H (dst)
 * is a GPA range of len bytes when sg_count is 0, or else the GPA of
 * sg_count struct higpu_sge (1..max_sge, 16-byte aligned) whose lengths
 * add up to len; each segment lies wholly in guest RAM. The device side
 * lies wholly in one allocation of the command's context. D2D: both
 * sides are device addresses (the same or different allocations of the
 * context), overlap allowed (memmove); sg_count must be 0.
 */
struct higpu_args_copy {
	__le64 dst;
	__le64 src;
	__le64 len;			/* > 0 */
	__le32 sg_count;
	__le32 rsvd;
};

/* HIGPU_OP_MEMSET: len bytes at dst (in one allocation) set to value. */
struct higpu_args_memset {
	__le64 dst;
	__le64 len;			/* > 0 */
	__u8 value;
	__u8 rsvd[7];
};

/*
 * HIGPU_OP_PEER_ACCESS (immediate): enable (enable = 1) or disable
 * (enable = 0) the context's access to GPU peer_id's memory over HiLink.
 * A peer operation needs both ends: the requesting context enabled the
 * target GPU, and some live context on the target GPU enabled the
 * requester's GPU (as the two cudaDeviceEnablePeerAccess calls of a
 * pair). peer_id is the other GPU's gpu_id on the rack's HiLink fabric:
 * not this GPU's, below HIGPU_MAX_GPUS.
 */
struct higpu_args_peer {
	__le16 peer_id;
	__u8 enable;			/* 1 enable, 0 disable */
	__u8 rsvd[5];
};

/*
 * HIGPU_OP_COPY_PEER (stream-ordered): len bytes between this GPU and a
 * peer GPU over HiLink, higpu_args_copy with sg_count 0. Exactly one of
 * dst and src is a device address of this GPU (in one allocation of the
 * context); the other is an address of the peer, whose GPU it names
 * (HIGPU_VA_BASE), and lies wholly in one live allocation there. src
 * here: a remote write (push); dst here: a remote read (pull); len at
 * most 2^32 - 1. Errors: EPERM access not enabled at either end; EACCES
 * a range outside an allocation (local or remote); EHOSTUNREACH the
 * peer GPU is not on the fabric or has no guest, or the port is down;
 * EINVAL both sides here, len too long, sg_count set.
 */

/* Built-in kernels (higpu_args_launch.kernel). */
#define HIGPU_KERNEL_FILL	1	/* dst[i] = value, i < count */
#define HIGPU_KERNEL_REDUCE	2	/* dst[i] = src0[i] OP src1[i], i < count */

/* Element types (higpu_args_launch.dtype) and their sizes. */
#define HIGPU_DT_F32		1	/* 4 bytes, IEEE binary32 */
#define HIGPU_DT_F16		2	/* 2 bytes, IEEE binary16 */
#define HIGPU_DT_BF16		3	/* 2 bytes, bfloat16 */
#define HIGPU_DT_I32		4	/* 4 bytes, two's complement */
#define HIGPU_DT_I64		5	/* 8 bytes, two's complement */

/*
 * Reduction operators (higpu_args_launch.op), element-wise:
 *  - SUM: integers wrap (two's complement). f32 is an IEEE binary32
 *    addition (round to nearest even); f16 and bf16 are widened to
 *    binary32 exactly, added there and rounded to nearest even back,
 *    which is the correctly rounded f16 / bf16 sum. Subnormals are kept.
 *  - MIN, MAX: for floats a NaN in either operand gives NaN;
 *    MIN(-0, +0) = -0 and MAX(-0, +0) = +0.
 *  - Every NaN a float kernel writes is the type's default quiet NaN
 *    (f32 0x7fc00000, f16 0x7e00, bf16 0x7fc0).
 * dst may equal src0 or src1 (in place); other overlaps are undefined.
 */
#define HIGPU_RED_SUM		1
#define HIGPU_RED_MIN		2
#define HIGPU_RED_MAX		3

/*
 * HIGPU_OP_LAUNCH. FILL: value holds the element's bit pattern in its low
 * bytes (little-endian); src0, src1 and op are 0. REDUCE: value is 0.
 * Every buffer of count elements lies in one allocation of the context.
 */
struct higpu_args_launch {
	__le16 kernel;			/* HIGPU_KERNEL_* */
	__u8 dtype;			/* HIGPU_DT_* */
	__u8 op;			/* HIGPU_RED_* for REDUCE, else 0 */
	__le32 rsvd;
	__le64 count;			/* elements, > 0 */
	__le64 dst;
	__le64 src0;
	__le64 src1;
	__le64 value;
};

/*
 * HIGPU_OP_EVENT_RECORD and HIGPU_OP_EVENT_WAIT, on event event_id of the
 * context (0..max_events-1). RECORD runs when its stream reaches it: the
 * event's record count goes up by one and the completion's timestamp_ns
 * is the device clock at that moment, result the new count. WAIT holds
 * its stream until the event's record count is at least count (the
 * runtime passes the number of RECORDs it has queued on the event), then
 * completes with result = the count seen.
 */
struct higpu_args_event {
	__le32 event_id;
	__le32 rsvd;
	__le64 count;			/* WAIT only; RECORD: 0 */
};

/* HIGPU_OP_QUERY: what */
#define HIGPU_QUERY_DEVICE	1	/* struct higpu_dev_info */
#define HIGPU_QUERY_CTX		2	/* struct higpu_ctx_info of ctx_id */

/* higpu_args_query.flags */
#define HIGPU_QUERY_F_CLEAR_ERR	0x1	/* CTX: clear the error record after reading */

struct higpu_args_query {
	__le32 what;			/* HIGPU_QUERY_* */
	__le32 flags;
	__le64 resp_gpa;		/* resp_len bytes of guest RAM */
	__le32 resp_len;		/* at least the answer's size */
	__le32 rsvd;
};

#define HIGPU_ARGS_SIZE		48

struct higpu_cmd {
	__le16 opcode;			/* HIGPU_OP_* */
	__le16 flags;			/* HIGPU_CMD_F_* */
	__le16 ctx_id;			/* 0 for CTX_CREATE, QUERY_DEVICE */
	__le16 stream_id;		/* stream-ordered commands */
	__le64 tag;			/* echoed in the completion */
	union {
		struct higpu_args_alloc mem_alloc;
		struct higpu_args_free mem_free;
		struct higpu_args_copy copy;
		struct higpu_args_memset mem_set;
		struct higpu_args_launch launch;
		struct higpu_args_event event;
		struct higpu_args_query query;
		struct higpu_args_peer peer;
		__u8 raw[HIGPU_ARGS_SIZE];
	} args;
};					/* 64 bytes */

/*
 * Completion status: 0 or a positive Linux errno.
 *  EACCES: a device range that is not wholly inside one live allocation
 *  of the command's context (beyond its end, freed, another context's).
 *  EFAULT: a GPA range or scatter list outside guest RAM.
 *  ENOMEM: device memory exhausted, or the guest's mem_budget spent.
 *  ENOSPC: max_contexts or max_allocs reached.
 *  ENOENT: unknown context (or an event/stream id out of range).
 *  ECANCELED: the context was destroyed (or the device reset) first.
 *  EPERM: peer access not enabled (HIGPU_OP_COPY_PEER).
 *  EEXIST: peer access already enabled (HIGPU_OP_PEER_ACCESS).
 *  EHOSTUNREACH: the peer GPU is not reachable over HiLink.
 */
#define HIGPU_ST_OK		0
#define HIGPU_ST_EPERM		1
#define HIGPU_ST_ENOENT		2
#define HIGPU_ST_ENOMEM		12
#define HIGPU_ST_EACCES		13
#define HIGPU_ST_EFAULT		14
#define HIGPU_ST_EEXIST		17
#define HIGPU_ST_EINVAL		22
#define HIGPU_ST_ENOSPC		28
#define HIGPU_ST_EOPNOTSUPP	95
#define HIGPU_ST_EHOSTUNREACH	113
#define HIGPU_ST_ECANCELED	125

struct higpu_cpl {
	__le64 tag;			/* the command's */
	__le16 opcode;			/* the command's */
	__le16 ctx_id;			/* the command's (CTX_CREATE: the new one) */
	__le16 stream_id;		/* the command's */
	__le16 status;			/* HIGPU_ST_* */
	__le64 result;			/* per opcode, else 0 */
	__le64 timestamp_ns;		/* device clock when it completed */
};					/* 32 bytes */

/* HIGPU_QUERY_DEVICE answer: the counters and use of the whole device. */
struct higpu_dev_info {
	__le64 mem_size;
	__le64 mem_used;
	__le64 mem_free_largest;	/* largest allocation possible now */
	__le64 busy_ns;
	__le64 clock_ns;		/* device clock now */
	__le64 commands;
	__le64 kernels;
	__le32 contexts;
	__le32 allocs;
	__le32 inflight;
	__le32 rsvd[3];
};					/* 80 bytes */

/*
 * HIGPU_QUERY_CTX answer. The error record keeps the first failed
 * command of the context since it was created or last cleared; errors
 * counts all of them.
 */
struct higpu_ctx_info {
	__le64 mem_used;
	__le32 allocs;
	__le32 inflight;
	__le64 errors;
	__le64 err_tag;			/* first failed command's tag */
	__le16 err_opcode;
	__le16 err_stream;
	__le16 err_status;		/* HIGPU_ST_*, 0 if none */
	__le16 rsvd;
	__le32 rsvd1[2];
};					/* 48 bytes */

/*
 * Rules the text above leaves open, as the backend (internal/gpu)
 * implements them; docs/gpu.md lists the same. They change no layout.
 *
 * Commands:
 *  - opcode 0 or >= HIGPU_OP_MAX: HIGPU_ST_EOPNOTSUPP. A flags bit other
 *    than HIGPU_CMD_F_NO_IRQ: HIGPU_ST_EINVAL. rsvd fields of the
 *    arguments are ignored; drivers write 0.
 *  - ctx_id must name a live context except for CTX_CREATE and
 *    QUERY_DEVICE (which ignore it); else HIGPU_ST_ENOENT. A context
 *    whose CTX_DESTROY was taken is no longer live. stream_id is checked
 *    (< max_streams, else ENOENT) for stream-ordered commands only.
 *  - result is 0 but for CTX_CREATE (the id), MEM_ALLOC (the address),
 *    EVENT_RECORD and EVENT_WAIT (the count) and QUERY (the bytes of the
 *    answer written). A failed CTX_CREATE completes with ctx_id 0.
 *  - Context ids count up from 1 and are reused only after 16-bit wrap;
 *    after a reset they start at 1 again. A context being destroyed
 *    counts against max_contexts until its CTX_DESTROY completes.
 *  - max_inflight counts every command taken, immediate ones too.
 * Memory:
 *  - MEM_ALLOC returns zeroed memory, aligned to max(align, alloc_align)
 *    as a device address. max_allocs (or the backend's per-context
 *    allocation limit) reached: ENOSPC; mem_budget (or the per-context
 *    byte limit) or the memory itself exhausted: ENOMEM.
 *  - MEM_FREE of an address that starts no live allocation: ENOENT; of
 *    the start of another context's allocation: EACCES; of an address
 *    inside one of the context's allocations but not its start: EINVAL.
 *  - A MEM_FREE does not wait for queued work, but a command already
 *    running finishes on the memory before the free takes effect.
 * Copies, memset, kernels:
 *  - len (count) 0: EINVAL. A scatter list not 16-byte aligned, longer
 *    than max_sge, with a 0-length entry or lengths not adding up to
 *    len: EINVAL; the list or a segment outside guest RAM: EFAULT.
 *  - Device addresses of kernels need no element alignment.
 *  - An unknown kernel: EOPNOTSUPP; an unknown dtype or reduction op,
 *    count * element size overflowing, FILL with src0, src1 or op set,
 *    REDUCE with value set: EINVAL.
 *  - FILL uses the low bytes of value (the rest is ignored); a float
 *    FILL whose pattern is a NaN writes the type's default quiet NaN.
 * Events:
 *  - EVENT_RECORD with count != 0: EINVAL. A context's record counts
 *    start at 0 and live as long as the context. There is no query
 *    command: a runtime knows an event has happened when the RECORD's
 *    completion arrived.
 *  - EVENT_RECORD's timestamp_ns is the moment it recorded; every other
 *    timestamp_ns is the moment the command completed.
 * Peer access:
 *  - PEER_ACCESS without HIGPU_CAP_PEER: EOPNOTSUPP; peer_id this GPU's
 *    or >= HIGPU_MAX_GPUS, enable > 1: EINVAL; enabling an enabled peer:
 *    EEXIST; disabling one that is not: ENOENT. A context's peers go
 *    with it.
 *  - A peer copy checks its local range at each frame it moves: a
 *    MEM_FREE under a running peer copy makes the rest fail (EACCES).
 *  - Peer operations of the guest in flight are bounded by the
 *    backend's per-guest budget; a stream over it waits.
 * Error record: every completion other than OK of a command of a live
 *  context counts (not the CTX_DESTROY itself). HIGPU_QUERY_F_CLEAR_ERR
 *  zeroes errors as well as the first-error fields. QUERY answers'
 *  inflight counts exclude the QUERY itself.
 * Handshake, fatal, reset:
 *  - driver_status is looked at on HIGPU_DB_CTRL only. DRV_OK without
 *    DRV_MSIX_ON is a polling driver: no interrupts at all. Commands
 *    posted before the device went LIVE are taken when it does.
 *  - The ring configuration is read once, at DRV_OK; later writes to
 *    it are ignored until a reset.
 *  - FATAL cancels the commands in flight (no completions are written
 *    any more) and keeps contexts and memory until the reset.
 *  - A reset rewrites the whole header: driver_status, the ring fields
 *    and all four ring indices read 0 again.
 *  - The device clock counts from the backend's start (never 0).
 */

static_assert(sizeof(struct higpu_dev_hdr) == 0x140, "higpu_dev_hdr");
static_assert(sizeof(struct higpu_sge) == 16, "higpu_sge");
static_assert(sizeof(struct higpu_args_alloc) == 16, "higpu_args_alloc");
static_assert(sizeof(struct higpu_args_free) == 8, "higpu_args_free");
static_assert(sizeof(struct higpu_args_copy) == 32, "higpu_args_copy");
static_assert(sizeof(struct higpu_args_memset) == 24, "higpu_args_memset");
static_assert(sizeof(struct higpu_args_launch) == 48, "higpu_args_launch");
static_assert(sizeof(struct higpu_args_event) == 16, "higpu_args_event");
static_assert(sizeof(struct higpu_args_query) == 24, "higpu_args_query");
static_assert(sizeof(struct higpu_args_peer) == 8, "higpu_args_peer");
static_assert(sizeof(struct higpu_cmd) == 64, "higpu_cmd");
static_assert(sizeof(struct higpu_cpl) == 32, "higpu_cpl");
static_assert(sizeof(struct higpu_dev_info) == 80, "higpu_dev_info");
static_assert(sizeof(struct higpu_ctx_info) == 48, "higpu_ctx_info");
static_assert(HIGPU_BAR2_SIZE >= sizeof(struct higpu_dev_hdr), "BAR2 holds the header");

#endif /* HIGPU_ABI_H */
