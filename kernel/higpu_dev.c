// SPDX-License-Identifier: GPL-2.0
/*
 * higpu_dev.c - the command and completion rings of a HiGPU function and
 * the work in flight on them (higpu.h, higpu_abi.h).
 *
 * An operation (struct higpu_req) is what one ioctl asked for; it is sent
 * as one or more pieces, each one ring command in a slot of dev->slots.
 * The tag of a command names its slot and the slot's generation, so a
 * completion the driver does not expect (a stale or a made-up tag) is
 * dropped rather than trusted. A piece's resources are released when its
 * completion is read, or when a reset made sure the device forgot it.
 */

#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/slab.h>

#include "higpu.h"
#include "hidev_ivshmem.h"

void higpu_slots_init(struct higpu_dev *dev)
{
	unsigned int i;

	for (i = 0; i < HIGPU_SLOTS; i++)
		dev->free_slots[i] = HIGPU_SLOTS - 1 - i;
	dev->nfree = HIGPU_SLOTS;
}

/* higpu_piece_release - what a piece held, once the device is done with it. */
void higpu_piece_release(struct higpu_dev *dev, struct higpu_piece *p)
{
	struct device *dma_dev = &dev->pdev->dev;

	if (p->sge)
		dma_free_coherent(dma_dev, p->sge_bytes, p->sge, p->sge_dma);
	if (p->mapped)
		dma_unmap_sgtable(dma_dev, &p->sgt, p->dir, 0);
	if (p->sgt.sgl)
		sg_free_table(&p->sgt);
	if (p->pages) {
		unpin_user_pages_dirty_lock(p->pages, p->npages, p->dirty);
		kvfree(p->pages);
	}
	if (p->resp)
		dma_free_coherent(dma_dev, p->resp_bytes, p->resp, p->resp_dma);
	memset(p, 0, sizeof(*p));
}

void higpu_op_put(struct higpu_req *op)
{
	if (!refcount_dec_and_test(&op->ref))
		return;
	higpu_file_put(op->file);
	kfree(op);
}

/*
 * higpu_op_new - an operation of file f, held by the caller. It counts
 * one piece for its submitter until higpu_op_end, so that it cannot
 * finish while pieces are still being sent.
 */
struct higpu_req *higpu_op_new(struct higpu_file *f, u16 opcode, u16 stream)
{
	struct higpu_req *op = kzalloc(sizeof(*op), GFP_KERNEL);

	if (!op)
		return NULL;
	refcount_set(&op->ref, 1);
	refcount_inc(&f->ref);
	op->file = f;
	op->opcode = opcode;
	op->stream = stream;
	op->event = -1;
	atomic_set(&op->pieces, 1);
	INIT_LIST_HEAD(&op->node);
	return op;
}

static bool higpu_immediate(u16 opcode)
{
	switch (opcode) {
	case HIGPU_OP_CTX_CREATE:
	case HIGPU_OP_CTX_DESTROY:
	case HIGPU_OP_MEM_ALLOC:
	case HIGPU_OP_MEM_FREE:
	case HIGPU_OP_QUERY:
		return true;
	}
	return false;
}

/*
 * higpu_op_begin - put op on its file's list of work in flight: a
 * stream-ordered one gets its sequence number and counts on its stream
 * (and its event, for a record), which must exist (else -EINVAL; checked
 * here, under the lock that destroy takes). The list holds a reference.
 */
int higpu_op_begin(struct higpu_req *op)
{
	struct higpu_file *f = op->file;
	struct higpu_dev *dev = f->dev;

	spin_lock(&f->lock);
	if (!higpu_immediate(op->opcode)) {
		if (op->stream >= dev->max_streams ||
		    f->streams[op->stream].state != HIGPU_STREAM_LIVE ||
		    (op->event >= 0 &&
		     (op->event >= dev->max_events || !f->events[op->event].used))) {
			spin_unlock(&f->lock);
			return -EINVAL;
		}
		op->seq = f->next_seq++;
		f->streams[op->stream].pending++;
		f->streams[op->stream].last_seq = op->seq;
		if (op->event >= 0 && op->opcode == HIGPU_OP_EVENT_RECORD) {
			struct higpu_fevent *ev = &f->events[op->event];

			ev->last_seq = op->seq;
			ev->last_done = false;
		}
	}
	list_add_tail(&op->node, &f->ops);
	f->nops++;
	refcount_inc(&op->ref);
	spin_unlock(&f->lock);
	return 0;
}

/* higpu_op_end - the submitter sent all it will send. */
void higpu_op_end(struct higpu_req *op)
{
	if (atomic_dec_and_test(&op->pieces))
		higpu_op_finished(op);
}

/*
 * higpu_file_stale - f's context is gone, or going: the device was
 * removed, is dead, or is being reset (not live). Every wait of a
 * submitter, which holds hw_sem for read, ends on it, so that a reset
 * can take hw_sem for write.
 */
bool higpu_file_stale(struct higpu_file *f)
{
	struct higpu_dev *dev = f->dev;

	return READ_ONCE(dev->gone) || READ_ONCE(dev->dead) || !READ_ONCE(dev->live) ||
	       f->epoch != atomic_read(&dev->epoch);
}

/* sq_lock held */
static bool higpu_sq_room(struct higpu_dev *dev)
{
	return dev->nfree &&
	       dev->cmd_prod - higpu_load(&dev->hdr->cmd_cons) < HIGPU_RING_ENTRIES;
}

static bool higpu_sq_ready(struct higpu_dev *dev)
{
	bool ret;

	spin_lock(&dev->sq_lock);
	ret = !dev->live || higpu_sq_room(dev);
	spin_unlock(&dev->sq_lock);
	return ret;
}

void higpu_ring_doorbell(struct higpu_dev *dev, unsigned int db)
{
	hinic_ivshmem_doorbell(dev->bar0, db);
}

/* higpu_room_wait - one wait for ring room or a slot, as mode says. */
static long higpu_room_wait(struct higpu_dev *dev, enum higpu_wait_mode mode)
{
	long t = msecs_to_jiffies(HIGPU_POLL_MS);

	if (mode == HIGPU_WAIT_INTR)
		return wait_event_interruptible_timeout(dev->sq_wq, higpu_sq_ready(dev), t);
	if (mode == HIGPU_WAIT_KILLABLE)
		return wait_event_killable_timeout(dev->sq_wq, higpu_sq_ready(dev), t);
	return wait_event_timeout(dev->sq_wq, higpu_sq_ready(dev), t);
}

/*
 * higpu_submit - send cmd as one piece of op, waiting for a slot and
 * ring room (a signal ends the wait as mode says; HIGPU_WAIT_UNINTR,
 * for release, gives up after HIGPU_DESTROY_MS). On success the slot
 * owns *piece (cleared here); on failure the caller still does. The
 * caller holds dev->hw_sem for read.
 */
int higpu_submit(struct higpu_dev *dev, struct higpu_req *op, struct higpu_cmd *cmd,
		 struct higpu_piece *piece, enum higpu_wait_mode mode)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(HIGPU_DESTROY_MS);
	struct higpu_file *f = op->file;
	struct higpu_slot *slot;
	unsigned int idx;
	bool dev_query;

	for (;;) {
		if (higpu_file_stale(f))
			return -EIO;
		spin_lock(&dev->sq_lock);
		if (!dev->live) {
			spin_unlock(&dev->sq_lock);
			return -EIO;
		}
		if (higpu_sq_room(dev))
			break;
		spin_unlock(&dev->sq_lock);
		/* Completions free slots and let the device take commands. */
		higpu_process_cpl(dev);
		if (higpu_room_wait(dev, mode) < 0)
			return -EINTR;
		if (mode == HIGPU_WAIT_UNINTR && time_after(jiffies, deadline))
			return -ETIMEDOUT;
	}
	idx = dev->free_slots[--dev->nfree];
	slot = &dev->slots[idx];
	slot->gen++;
	slot->op = op;
	refcount_inc(&op->ref);
	atomic_inc(&op->pieces);
	op->sent++;
	if (piece) {
		slot->piece = *piece;
		memset(piece, 0, sizeof(*piece));
	}
	cmd->tag = cpu_to_le64((u64)slot->gen << 32 | idx);
	/* QUERY_DEVICE names no context (higpu_abi.h, struct higpu_cmd). */
	dev_query = op->opcode == HIGPU_OP_QUERY &&
		    cmd->args.query.what == cpu_to_le32(HIGPU_QUERY_DEVICE);
	cmd->ctx_id = cpu_to_le16(dev_query ? 0 : f->ctx_id);
	cmd->opcode = cpu_to_le16(op->opcode);
	cmd->stream_id = cpu_to_le16(op->stream);
	memcpy(&dev->cmd_ring[dev->cmd_prod & (HIGPU_RING_ENTRIES - 1)], cmd, sizeof(*cmd));
	dma_wmb();
	dev->cmd_prod++;
	higpu_store(&dev->hdr->cmd_prod, dev->cmd_prod);
	spin_lock(&f->lock);
	f->inflight++;
	f->pinned += slot->piece.pinned_bytes;
	spin_unlock(&f->lock);
	spin_unlock(&dev->sq_lock);
	higpu_ring_doorbell(dev, HIGPU_DB_CMD);
	return 0;
}

/*
 * higpu_piece_done - the completion of the piece in slot (or its
 * cancellation by a reset). cpl_lock held.
 */
static void higpu_piece_done(struct higpu_dev *dev, struct higpu_slot *slot,
			     u16 status, u64 result, u64 ts)
{
	struct higpu_req *op = slot->op;
	struct higpu_file *f = op->file;
	struct higpu_piece *p = &slot->piece;
	size_t pinned = p->pinned_bytes;
	unsigned int idx = slot - dev->slots;

	if (p->resp && !status) {
		op->answer_len = min_t(size_t, p->resp_bytes, sizeof(op->answer));
		memcpy(op->answer, p->resp, op->answer_len);
	}
	higpu_piece_release(dev, p);

	spin_lock(&f->lock);
	if (status && !op->status)
		op->status = status;
	op->result = result;
	op->timestamp_ns = ts;
	f->inflight--;
	f->pinned -= pinned;
	spin_unlock(&f->lock);

	spin_lock(&dev->sq_lock);
	slot->op = NULL;
	dev->free_slots[dev->nfree++] = idx;
	spin_unlock(&dev->sq_lock);

	if (atomic_dec_and_test(&op->pieces))
		higpu_op_finished(op);
	higpu_op_put(op);
	/* Pin budget waiters sleep on the file. */
	wake_up_all(&f->wq);
}

/*
 * higpu_process_cpl - read the completions the device posted. Called
 * from the completion interrupt's thread and by waiters that poll.
 */
void higpu_process_cpl(struct higpu_dev *dev)
{
	struct higpu_dev_hdr *h = dev->hdr;
	unsigned int n = 0;
	u32 prod;

	mutex_lock(&dev->cpl_lock);
	if (!READ_ONCE(dev->live))
		goto out;
	prod = higpu_load(&h->cpl_prod);
	dma_rmb();
	if (prod - dev->cpl_cons > HIGPU_RING_ENTRIES) {
		dev_err_ratelimited(&dev->pdev->dev, "completion index %u beyond the ring (consumer %u); resetting\n",
				    prod, dev->cpl_cons);
		schedule_work(&dev->reset_work);
		goto out;
	}
	while (dev->cpl_cons != prod) {
		struct higpu_cpl c = dev->cpl_ring[dev->cpl_cons & (HIGPU_RING_ENTRIES - 1)];
		u64 tag = le64_to_cpu(c.tag);
		u32 idx = lower_32_bits(tag);
		struct higpu_slot *slot;

		dev->cpl_cons++;
		n++;
		slot = idx < HIGPU_SLOTS ? &dev->slots[idx] : NULL;
		if (!slot || !slot->op || slot->gen != upper_32_bits(tag)) {
			dev_warn_ratelimited(&dev->pdev->dev, "completion with unknown tag %#llx dropped\n",
					     tag);
			continue;
		}
		higpu_piece_done(dev, slot, le16_to_cpu(c.status), le64_to_cpu(c.result),
				 le64_to_cpu(c.timestamp_ns));
	}
	if (n) {
		higpu_store(&h->cpl_cons, dev->cpl_cons);
		higpu_ring_doorbell(dev, HIGPU_DB_CPL);
		wake_up_all(&dev->sq_wq);
	}
out:
	mutex_unlock(&dev->cpl_lock);
}

/*
 * higpu_cancel_all - after a reset the device answered (it dropped every
 * command and writes no completion for them): finish every piece in
 * flight with ECANCELED. The caller holds hw_sem for write and cpl_lock.
 */
void higpu_cancel_all(struct higpu_dev *dev)
{
	unsigned int i;

	for (i = 0; i < HIGPU_SLOTS; i++) {
		if (dev->slots[i].op)
			higpu_piece_done(dev, &dev->slots[i], HIGPU_ST_ECANCELED, 0, 0);
	}
}

void higpu_wake_files(struct higpu_dev *dev)
{
	struct higpu_file *f;

	mutex_lock(&dev->files_lock);
	list_for_each_entry(f, &dev->files, node)
		wake_up_all(&f->wq);
	mutex_unlock(&dev->files_lock);
	wake_up_all(&dev->sq_wq);
}

bool higpu_op_done(struct higpu_req *op)
{
	struct higpu_file *f = op->file;
	bool done;

	spin_lock(&f->lock);
	done = op->done;
	spin_unlock(&f->lock);
	return done || READ_ONCE(f->dev->dead) || READ_ONCE(f->dev->gone);
}

/*
 * higpu_op_wait - wait for op to finish: timeout_ms (0: no limit), a
 * signal ends it as mode says. Polls the
 * completions every HIGPU_POLL_MS in case an interrupt was lost.
 */
int higpu_op_wait(struct higpu_req *op, unsigned int timeout_ms, enum higpu_wait_mode mode)
{
	struct higpu_file *f = op->file;
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	long t;

	for (;;) {
		if (higpu_op_done(op))
			break;
		higpu_process_cpl(f->dev);
		t = msecs_to_jiffies(HIGPU_POLL_MS);
		if (mode == HIGPU_WAIT_INTR)
			t = wait_event_interruptible_timeout(f->wq, higpu_op_done(op), t);
		else if (mode == HIGPU_WAIT_KILLABLE)
			t = wait_event_killable_timeout(f->wq, higpu_op_done(op), t);
		else
			wait_event_timeout(f->wq, higpu_op_done(op), t);
		if (t < 0)
			return -EINTR;
		if (timeout_ms && time_after(jiffies, deadline) && !higpu_op_done(op))
			return -ETIMEDOUT;
	}
	return op->done ? 0 : -EIO;
}
