/* SPDX-License-Identifier: GPL-2.0 */
/*
 * higpu.h - the HiGPU guest driver's own declarations, shared by its
 * three parts: higpu_main.c (PCI probe and remove, handshake, reset),
 * higpu_dev.c (the command and completion rings, work in flight) and
 * higpu_chr.c (/dev/higpu<gpu_id>, per-file contexts, the ioctls of
 * higpu_uapi.h). The device ABI is higpu_abi.h.
 *
 * Lifetime. The objects form a chain, each freed by the put that drops
 * its last reference (a refcount_t: no release callback has another
 * caller), which then drops the one it holds: an operation holds its
 * file, a file its device, a device its PCI function. struct higpu_dev
 * is referenced by the PCI binding and by every open file. A piece of work on the device (one
 * ring command) occupies a slot of dev->slots until its completion is
 * read or the device was reset; the slot holds what the device may still
 * touch (pinned user pages, their DMA mapping, a scatter list, a query
 * answer buffer), so none of it is freed before. If a reset does not
 * answer, the slots keep all of it for good (dev->dead).
 */
#ifndef HIGPU_H
#define HIGPU_H

#include <linux/refcount.h>
#include <linux/list.h>
#include <linux/miscdevice.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/rwsem.h>
#include <linux/scatterlist.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>

#include "higpu_abi.h"
#include "higpu_uapi.h"

#define HIGPU_DRV_NAME		"higpu"

#define HIGPU_RING_ENTRIES	256	/* both rings, within ring_min..ring_max */
#define HIGPU_SLOTS		512	/* pieces of work in flight, all files */

/* Under TCG the backend answers in micro- to milliseconds. */
#define HIGPU_HANDSHAKE_MS	5000
#define HIGPU_CMD_MS		10000	/* immediate commands (alloc, query) */
#define HIGPU_DESTROY_MS	30000	/* CTX_DESTROY: running work finishes */
#define HIGPU_POLL_MS		10	/* waits look again: a lost interrupt */

/* Per-file budgets. */
#define HIGPU_FILE_MAX_OPS	256		/* operations in flight */
#define HIGPU_FILE_MAX_PIN	(64UL << 20)	/* bytes of user memory pinned */
#define HIGPU_CHUNK_PAGES	256		/* pages of one copy piece */
#define HIGPU_MAX_STREAMS	1024		/* ids per file, at most */
#define HIGPU_MAX_EVENTS	4096
#define HIGPU_RESULTS		256		/* remembered results (WAIT) */

struct higpu_file;

/* struct higpu_req - one operation of a file: one or more pieces. */
struct higpu_req {
	refcount_t ref;
	struct higpu_file *file;	/* holds a reference */
	struct list_head node;		/* file->ops while not done */
	u64 seq;			/* 0: internal (ctx, alloc, query) */
	u16 opcode;
	u16 stream;
	int event;			/* EVENT_RECORD: its id, else -1 */
	atomic_t pieces;		/* + 1 while still submitting */
	unsigned int sent;		/* pieces sent (by the submitter) */
	bool done;			/* under file->lock */
	u16 status;			/* first failed piece's */
	u64 result;
	u64 timestamp_ns;
	u32 answer_len;
	u8 answer[sizeof(struct higpu_dev_info)];	/* QUERY */
};

/* What one piece of work holds while the device may use it. */
struct higpu_piece {
	struct page **pages;		/* pinned user pages */
	unsigned int npages;
	bool dirty;			/* D2H: the device wrote them */
	bool mapped;
	enum dma_data_direction dir;
	struct sg_table sgt;
	void *sge;			/* struct higpu_sge[], coherent */
	dma_addr_t sge_dma;
	size_t sge_bytes;
	void *resp;			/* QUERY answer, coherent */
	dma_addr_t resp_dma;
	size_t resp_bytes;
	size_t pinned_bytes;		/* counted against the file's budget */
};

struct higpu_slot {
	struct higpu_req *op;		/* NULL: free */
	u32 gen;			/* tag = gen << 32 | index */
	struct higpu_piece piece;
};

struct higpu_dev {
	refcount_t ref;
	struct pci_dev *pdev;
	void __iomem *bar0;
	void *bar2;
	size_t bar2_len;
	struct higpu_dev_hdr *hdr;
	u8 gpu_id;
	u32 caps;
	u32 max_streams;		/* capped to HIGPU_MAX_STREAMS */
	u32 max_events;
	u32 max_sge;
	u32 alloc_align;

	struct higpu_cmd *cmd_ring;
	dma_addr_t cmd_dma;
	struct higpu_cpl *cpl_ring;
	dma_addr_t cpl_dma;
	bool rings_kept;		/* a reset failed: never free the rings */

	/* sq_lock: cmd_prod, the slots' free list, live */
	spinlock_t sq_lock;
	u32 cmd_prod;
	u16 free_slots[HIGPU_SLOTS];
	unsigned int nfree;
	struct higpu_slot slots[HIGPU_SLOTS];
	bool live;			/* commands may be submitted */
	wait_queue_head_t sq_wq;	/* room in the ring or a slot */

	struct mutex cpl_lock;		/* cpl_cons, completion processing */
	u32 cpl_cons;

	/*
	 * hw_sem: submitters hold it for read; a reset or remove for
	 * write, after clearing live and waking everyone.
	 */
	struct rw_semaphore hw_sem;
	atomic_t epoch;			/* resets done; files of an old one fail */
	bool dead;			/* a reset did not answer */
	bool gone;			/* removed */
	u32 reset_count;
	struct work_struct reset_work;

	struct mutex files_lock;
	struct list_head files;

	struct miscdevice misc;
	char misc_name[16];
	char irq_names[HIGPU_NUM_IRQ][24];
	unsigned int num_vectors;
};

/* higpu_fstream.state */
#define HIGPU_STREAM_FREE	0
#define HIGPU_STREAM_LIVE	1
#define HIGPU_STREAM_DYING	2	/* destroyed, work still pending */

struct higpu_fstream {
	u8 state;
	u32 pending;			/* operations not done */
	u64 last_seq;
	u64 err_seq;
	u16 err_status;
};

struct higpu_fevent {
	bool used;
	u64 queued;			/* records sent for this id, ever */
	u64 last_seq;			/* the last record's operation */
	bool last_done;
	u16 last_status;
	u64 timestamp_ns;
};

struct higpu_file {
	refcount_t ref;		/* the open file and each operation */
	struct higpu_dev *dev;
	struct list_head node;		/* dev->files */
	int epoch;			/* the device's when the context was made */
	u16 ctx_id;
	pid_t pid;
	char comm[TASK_COMM_LEN];

	spinlock_t lock;		/* all below */
	wait_queue_head_t wq;		/* an operation done, or a reset */
	struct list_head ops;		/* in flight */
	unsigned int nops;
	u64 next_seq;
	size_t pinned;			/* bytes pinned by its pieces */
	unsigned int inflight;		/* pieces on the device */
	struct higpu_fstream *streams;
	struct higpu_fevent *events;
	struct higpu_result results[HIGPU_RESULTS];
	u64 mem_used;
	u32 allocs;
	struct xarray allocs_xa;	/* (addr >> 8) -> size >> 8 */
};

static inline u32 higpu_load(const __le32 *p)
{
	return le32_to_cpu(READ_ONCE(*p));
}

static inline void higpu_store(__le32 *p, u32 v)
{
	WRITE_ONCE(*p, cpu_to_le32(v));
}

/* higpu_main.c */
void higpu_ring_doorbell(struct higpu_dev *dev, unsigned int db);
int higpu_recover(struct higpu_dev *dev);
void higpu_dev_put(struct higpu_dev *dev);

/* higpu_dev.c */
void higpu_slots_init(struct higpu_dev *dev);
void higpu_process_cpl(struct higpu_dev *dev);
void higpu_cancel_all(struct higpu_dev *dev);
void higpu_wake_files(struct higpu_dev *dev);
struct higpu_req *higpu_op_new(struct higpu_file *f, u16 opcode, u16 stream);
void higpu_op_put(struct higpu_req *op);
int higpu_op_begin(struct higpu_req *op);
void higpu_op_end(struct higpu_req *op);
/* how higpu_op_wait sleeps */
enum higpu_wait_mode {
	HIGPU_WAIT_INTR,	/* any signal ends it */
	HIGPU_WAIT_KILLABLE,	/* a fatal signal ends it */
	HIGPU_WAIT_UNINTR,	/* release: only the timeout ends it */
};

int higpu_op_wait(struct higpu_req *op, unsigned int timeout_ms, enum higpu_wait_mode mode);
int higpu_submit(struct higpu_dev *dev, struct higpu_req *op, struct higpu_cmd *cmd,
		 struct higpu_piece *piece, enum higpu_wait_mode mode);
bool higpu_op_done(struct higpu_req *op);
bool higpu_file_stale(struct higpu_file *f);
void higpu_piece_release(struct higpu_dev *dev, struct higpu_piece *p);

/* higpu_chr.c */
int higpu_chr_register(struct higpu_dev *dev);
void higpu_chr_unregister(struct higpu_dev *dev);
void higpu_file_put(struct higpu_file *f);
void higpu_op_finished(struct higpu_req *op);

#endif /* HIGPU_H */
