// SPDX-License-Identifier: GPL-2.0
/*
 * higpu_chr.c - /dev/higpu<gpu_id>: one device context per open file,
 * and the ioctls of higpu_uapi.h (docs/gpu-driver.md).
 *
 * A file holds its streams, events, allocations and the operations it
 * has in flight. Its last close destroys its context on the device,
 * which cancels queued work, lets running work finish and frees its
 * memory; only then are pinned pages released (by the completions). If
 * that does not finish in time the device is reset, which forgets all
 * contexts: memory the device may still write is never freed before.
 */

#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/nospec.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "higpu.h"

void higpu_file_put(struct higpu_file *f)
{
	if (!refcount_dec_and_test(&f->ref))
		return;
	xa_destroy(&f->allocs_xa);
	kfree(f->events);
	kfree(f->streams);
	higpu_dev_put(f->dev);
	kfree(f);
}

/*
 * higpu_op_finished - the last piece of op completed and its submitter
 * is done: record the outcome, wake the waiters, drop the list's
 * reference.
 */
void higpu_op_finished(struct higpu_req *op)
{
	struct higpu_file *f = op->file;

	spin_lock(&f->lock);
	op->done = true;
	list_del_init(&op->node);
	f->nops--;
	if (op->seq) {
		struct higpu_fstream *s = &f->streams[op->stream];
		struct higpu_result *r = &f->results[op->seq % HIGPU_RESULTS];

		r->seq = op->seq;
		r->status = op->status;
		r->result = op->result;
		r->timestamp_ns = op->timestamp_ns;
		r->flags = 0;
		if (op->status && !s->err_status) {
			s->err_status = op->status;
			s->err_seq = op->seq;
		}
		if (!--s->pending && s->state == HIGPU_STREAM_DYING)
			s->state = HIGPU_STREAM_FREE;
		if (op->event >= 0 && f->events[op->event].last_seq == op->seq) {
			struct higpu_fevent *ev = &f->events[op->event];

			ev->last_done = true;
			ev->last_status = op->status;
			ev->timestamp_ns = op->timestamp_ns;
		}
	}
	spin_unlock(&f->lock);
	wake_up_all(&f->wq);
	higpu_op_put(op);
}

/* ---- sequence numbers ---- */

/*
 * higpu_pending - whether f has work in flight with seq (exact) or with
 * a sequence number up to seq, on stream (or any, stream < 0).
 */
static bool higpu_pending(struct higpu_file *f, int stream, u64 seq, bool exact)
{
	struct higpu_req *op;
	bool ret = false;

	spin_lock(&f->lock);
	list_for_each_entry(op, &f->ops, node) {
		if (!op->seq || (stream >= 0 && op->stream != stream))
			continue;
		if (exact ? op->seq == seq : op->seq <= seq) {
			ret = true;
			break;
		}
	}
	spin_unlock(&f->lock);
	return ret;
}

static bool higpu_pending_done(struct higpu_file *f, int stream, u64 seq, bool exact)
{
	return !higpu_pending(f, stream, seq, exact) || higpu_file_stale(f);
}

static int higpu_wait_pending(struct higpu_file *f, int stream, u64 seq, bool exact,
			      unsigned int timeout_ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	long t;

	while (!higpu_pending_done(f, stream, seq, exact)) {
		higpu_process_cpl(f->dev);
		t = wait_event_interruptible_timeout(f->wq, higpu_pending_done(f, stream, seq, exact),
						     msecs_to_jiffies(HIGPU_POLL_MS));
		if (t < 0)
			return -EINTR;
		if (timeout_ms && time_after(jiffies, deadline) &&
		    !higpu_pending_done(f, stream, seq, exact))
			return -ETIMEDOUT;
	}
	return higpu_file_stale(f) ? -EIO : 0;
}

/* higpu_get_result - the outcome of finished work seq. */
static void higpu_get_result(struct higpu_file *f, u64 seq, struct higpu_result *res)
{
	spin_lock(&f->lock);
	if (f->results[seq % HIGPU_RESULTS].seq == seq) {
		*res = f->results[seq % HIGPU_RESULTS];
	} else {
		memset(res, 0, sizeof(*res));
		res->seq = seq;
		res->flags = HIGPU_RESULT_F_EXPIRED;
	}
	spin_unlock(&f->lock);
}

static int higpu_wait_seq(struct higpu_file *f, u64 seq, unsigned int timeout_ms,
			  struct higpu_result *res)
{
	int ret;

	spin_lock(&f->lock);
	ret = seq >= f->next_seq ? -EINVAL : 0;
	spin_unlock(&f->lock);
	if (ret)
		return ret;
	if (!seq) {
		memset(res, 0, sizeof(*res));
		return 0;
	}
	ret = higpu_wait_pending(f, -1, seq, true, timeout_ms);
	if (ret)
		return ret;
	higpu_get_result(f, seq, res);
	return 0;
}

/* ---- submission ---- */

static bool higpu_budget_ok(struct higpu_file *f, size_t pin)
{
	bool ok;

	spin_lock(&f->lock);
	ok = f->nops < HIGPU_FILE_MAX_OPS &&
	     (!pin || !f->pinned || f->pinned + pin <= HIGPU_FILE_MAX_PIN);
	spin_unlock(&f->lock);
	return ok || higpu_file_stale(f);
}

/* higpu_wait_budget - until f may have one more operation and pin pin bytes. */
static int higpu_wait_budget(struct higpu_file *f, size_t pin)
{
	long t;

	while (!higpu_budget_ok(f, pin)) {
		higpu_process_cpl(f->dev);
		t = wait_event_interruptible_timeout(f->wq, higpu_budget_ok(f, pin),
						     msecs_to_jiffies(HIGPU_POLL_MS));
		if (t < 0)
			return -EINTR;
	}
	return higpu_file_stale(f) ? -EIO : 0;
}

/*
 * higpu_begin - a new operation of f on stream (checked, as event is,
 * by higpu_op_begin) on the file's list, with its sequence number if it
 * is stream-ordered, and the hardware lock held for read: the caller
 * ends it with higpu_op_end and up_read. -ENODEV once the device is
 * removed, -EIO once the file's context was lost in a reset.
 */
static int higpu_begin(struct higpu_file *f, u16 opcode, u32 stream, int event,
		       struct higpu_req **opp)
{
	struct higpu_dev *dev = f->dev;
	struct higpu_req *op;
	int ret;

	down_read(&dev->hw_sem);
	ret = dev->gone ? -ENODEV : higpu_file_stale(f) ? -EIO : 0;
	if (ret)
		goto err;
	ret = -EINVAL;
	if (stream > U16_MAX)
		goto err;
	op = higpu_op_new(f, opcode, stream);
	if (!op) {
		ret = -ENOMEM;
		goto err;
	}
	op->event = event;
	ret = higpu_op_begin(op);
	if (ret) {
		higpu_op_put(op);
		goto err;
	}
	*opp = op;
	return 0;
err:
	up_read(&dev->hw_sem);
	return ret;
}

/*
 * higpu_start - a new stream-ordered operation of f, within the file's
 * budget (higpu_begin). higpu_finish ends it and reports.
 */
static int higpu_start(struct higpu_file *f, u16 opcode, u32 stream, int event,
		       struct higpu_req **opp)
{
	int ret;

	ret = higpu_wait_budget(f, 0);
	if (ret)
		return ret;
	return higpu_begin(f, opcode, stream, event, opp);
}

/*
 * higpu_finish - the submitter is done with op (ret: how it went), and
 * res->seq is 0 if it failed. An operation that failed part-way (some
 * pieces sent) gets the failure as its status (EFAULT, ENOMEM, else
 * ECANCELED), so that a stream sync reports it; one that sent nothing is
 * only the ioctl's error. With HIGPU_SUBMIT_F_WAIT, waits for it; a wait
 * that fails (ETIMEDOUT, EINTR) leaves res->seq set, and the ioctl still
 * copies it out.
 */
static int higpu_finish(struct higpu_file *f, struct higpu_req *op, int ret, u32 flags,
			u32 timeout_ms, struct higpu_result *res)
{
	u64 seq = op->seq;

	if (ret && op->sent) {
		spin_lock(&f->lock);
		if (!op->status)
			op->status = ret == -EFAULT ? HIGPU_ST_EFAULT :
				     ret == -ENOMEM ? HIGPU_ST_ENOMEM : HIGPU_ST_ECANCELED;
		spin_unlock(&f->lock);
	}
	higpu_op_end(op);
	up_read(&f->dev->hw_sem);
	higpu_op_put(op);
	memset(res, 0, sizeof(*res));
	if (ret)
		return ret;
	res->seq = seq;
	if (flags & HIGPU_SUBMIT_F_WAIT)
		return higpu_wait_seq(f, seq, timeout_ms, res);
	return 0;
}

/*
 * higpu_run_sync - an immediate command of f (alloc, free, query, ctx),
 * waited for; *op is the caller's to put. The file's context is made
 * for ctx_id 0 commands too.
 */
static int higpu_run_sync(struct higpu_file *f, u16 opcode, struct higpu_cmd *cmd,
			  struct higpu_piece *piece, enum higpu_wait_mode mode, unsigned int ms,
			  struct higpu_req **opp)
{
	struct higpu_dev *dev = f->dev;
	struct higpu_req *op;
	int ret;

	/* Immediate: no stream, no sequence number, no budget. */
	ret = higpu_begin(f, opcode, 0, -1, &op);
	if (ret)
		return ret;
	ret = higpu_submit(dev, op, cmd, piece, mode);
	higpu_op_end(op);
	up_read(&dev->hw_sem);
	if (!ret)
		ret = higpu_op_wait(op, ms, mode);
	if (ret == -ETIMEDOUT)
		dev_warn_ratelimited(&dev->pdev->dev, "command %u of context %u timed out\n",
				     opcode, f->ctx_id);
	if (ret) {
		higpu_op_put(op);
		return ret;
	}
	*opp = op;
	return 0;
}

/*
 * higpu_run_status - run an immediate command of the file's own and wait
 * for it (killable): its device status goes to *status and its result,
 * when result is not NULL, to *result. Returns 0 or the errno of the
 * submission or the wait.
 */
static int higpu_run_status(struct higpu_file *f, u16 opcode, struct higpu_cmd *cmd,
			    __u32 *status, u64 *result)
{
	struct higpu_req *op;
	int ret;

	ret = higpu_run_sync(f, opcode, cmd, NULL, HIGPU_WAIT_KILLABLE, HIGPU_CMD_MS, &op);
	if (ret)
		return ret;
	*status = op->status;
	if (result)
		*result = op->result;
	higpu_op_put(op);
	return 0;
}

/* ---- user memory ---- */

/*
 * higpu_pin - pin len bytes of user memory at uaddr and map them for the
 * device: *gpa and *sg_count as higpu_args_copy wants them.
 */
static int higpu_pin(struct higpu_dev *dev, struct higpu_piece *p, u64 uaddr, size_t len,
		     bool to_dev, u64 *gpa, u32 *sg_count)
{
	struct device *d = &dev->pdev->dev;
	unsigned int n = ((uaddr + len - 1) >> PAGE_SHIFT) - (uaddr >> PAGE_SHIFT) + 1;
	struct higpu_sge *sge;
	struct scatterlist *sg;
	unsigned int i;
	int ret;

	p->pages = kvmalloc_array(n, sizeof(*p->pages), GFP_KERNEL);
	if (!p->pages)
		return -ENOMEM;
	ret = pin_user_pages_fast(uaddr & PAGE_MASK, n, to_dev ? 0 : FOLL_WRITE, p->pages);
	if (ret < 0) {
		kvfree(p->pages);
		p->pages = NULL;
		return ret;
	}
	p->npages = ret;
	if (ret != n) {
		ret = -EFAULT;
		goto err;
	}
	p->dirty = !to_dev;
	p->dir = to_dev ? DMA_TO_DEVICE : DMA_FROM_DEVICE;
	ret = sg_alloc_table_from_pages_segment(&p->sgt, p->pages, n, offset_in_page(uaddr), len,
						UINT_MAX & PAGE_MASK, GFP_KERNEL);
	if (ret)
		goto err;
	ret = dma_map_sgtable(d, &p->sgt, p->dir, 0);
	if (ret)
		goto err;
	p->mapped = true;
	if (p->sgt.nents == 1) {
		*gpa = sg_dma_address(p->sgt.sgl);
		*sg_count = 0;
	} else {
		p->sge_bytes = p->sgt.nents * sizeof(*sge);
		p->sge = dma_alloc_coherent(d, p->sge_bytes, &p->sge_dma, GFP_KERNEL);
		if (!p->sge) {
			ret = -ENOMEM;
			goto err;
		}
		sge = p->sge;
		for_each_sgtable_dma_sg(&p->sgt, sg, i) {
			sge[i].gpa = cpu_to_le64(sg_dma_address(sg));
			sge[i].len = cpu_to_le64(sg_dma_len(sg));
		}
		*gpa = p->sge_dma;
		*sg_count = p->sgt.nents;
	}
	p->pinned_bytes = (size_t)n << PAGE_SHIFT;
	return 0;
err:
	p->dirty = false;
	higpu_piece_release(dev, p);
	return ret;
}

/* higpu_chunk_pages - pages of one copy piece: its scatter list fits max_sge. */
static unsigned int higpu_chunk_pages(struct higpu_dev *dev)
{
	if (!(dev->caps & HIGPU_CAP_COPY_SG) || dev->max_sge < 2)
		return 1;
	return min_t(u32, dev->max_sge, HIGPU_CHUNK_PAGES);
}

/* higpu_copy_user - the pieces of an H2D or D2H copy. */
static int higpu_copy_user(struct higpu_file *f, struct higpu_req *op, const struct higpu_copy *a)
{
	struct higpu_dev *dev = f->dev;
	bool to_dev = a->kind == HIGPU_COPY_H2D;
	u64 uaddr = to_dev ? a->src : a->dst;
	u64 daddr = to_dev ? a->dst : a->src;
	u64 left = a->len;
	size_t chunk = (size_t)higpu_chunk_pages(dev) << PAGE_SHIFT;
	int ret;

	if (!access_ok(u64_to_user_ptr(uaddr), a->len))
		return -EFAULT;
	while (left) {
		struct higpu_piece piece = {};
		struct higpu_cmd cmd = {};
		size_t len = min_t(u64, left, chunk - offset_in_page(uaddr));
		u64 gpa;
		u32 sgc;

		ret = higpu_wait_budget(f, ALIGN(len + offset_in_page(uaddr), PAGE_SIZE));
		if (ret)
			return ret;
		ret = higpu_pin(dev, &piece, uaddr, len, to_dev, &gpa, &sgc);
		if (ret)
			return ret;
		cmd.args.copy.dst = cpu_to_le64(to_dev ? daddr : gpa);
		cmd.args.copy.src = cpu_to_le64(to_dev ? gpa : daddr);
		cmd.args.copy.len = cpu_to_le64(len);
		cmd.args.copy.sg_count = cpu_to_le32(sgc);
		ret = higpu_submit(dev, op, &cmd, &piece, HIGPU_WAIT_INTR);
		if (ret) {
			piece.dirty = false;
			higpu_piece_release(dev, &piece);
			return ret;
		}
		uaddr += len;
		daddr += len;
		left -= len;
	}
	return 0;
}

/* ---- ioctls ---- */

static bool higpu_flags_ok(u32 flags)
{
	return !(flags & ~HIGPU_SUBMIT_F_WAIT);
}

static int higpu_ioc_copy(struct higpu_file *f, void *arg, unsigned int ioc)
{
	struct higpu_copy *a = arg;
	struct higpu_req *op;
	struct higpu_cmd cmd = {};
	u16 opcode;
	int ret;

	if (!a->len || !higpu_flags_ok(a->flags))
		return -EINVAL;
	switch (a->kind) {
	case HIGPU_COPY_H2D:
		opcode = HIGPU_OP_COPY_H2D;
		break;
	case HIGPU_COPY_D2H:
		opcode = HIGPU_OP_COPY_D2H;
		break;
	case HIGPU_COPY_D2D:
		opcode = HIGPU_OP_COPY_D2D;
		break;
	case HIGPU_COPY_PEER:
		if (!(f->dev->caps & HIGPU_CAP_PEER))
			return -EOPNOTSUPP;
		opcode = HIGPU_OP_COPY_PEER;
		break;
	default:
		return -EINVAL;
	}
	ret = higpu_start(f, opcode, a->stream, -1, &op);
	if (ret)
		return ret;
	if (a->kind == HIGPU_COPY_D2D || a->kind == HIGPU_COPY_PEER) {
		cmd.args.copy.dst = cpu_to_le64(a->dst);
		cmd.args.copy.src = cpu_to_le64(a->src);
		cmd.args.copy.len = cpu_to_le64(a->len);
		ret = higpu_submit(f->dev, op, &cmd, NULL, HIGPU_WAIT_INTR);
	} else {
		ret = higpu_copy_user(f, op, a);
	}
	return higpu_finish(f, op, ret, a->flags, a->timeout_ms, &a->res);
}

static int higpu_ioc_memset(struct higpu_file *f, void *arg, unsigned int ioc)
{
	struct higpu_memset *a = arg;
	struct higpu_cmd cmd = {};
	struct higpu_req *op;
	int ret;

	if (!a->len || !higpu_flags_ok(a->flags) || memchr_inv(a->rsvd, 0, sizeof(a->rsvd)))
		return -EINVAL;
	ret = higpu_start(f, HIGPU_OP_MEMSET, a->stream, -1, &op);
	if (ret)
		return ret;
	cmd.args.mem_set.dst = cpu_to_le64(a->dst);
	cmd.args.mem_set.len = cpu_to_le64(a->len);
	cmd.args.mem_set.value = a->value;
	ret = higpu_submit(f->dev, op, &cmd, NULL, HIGPU_WAIT_INTR);
	return higpu_finish(f, op, ret, a->flags, a->timeout_ms, &a->res);
}

static bool higpu_launch_ok(const struct higpu_launch *a)
{
	if (!a->count || a->dtype < HIGPU_DT_F32 || a->dtype > HIGPU_DT_I64)
		return false;
	switch (a->kernel) {
	case HIGPU_KERNEL_FILL:
		return !a->op && !a->src0 && !a->src1;
	case HIGPU_KERNEL_REDUCE:
		return a->op >= HIGPU_RED_SUM && a->op <= HIGPU_RED_MAX && !a->value;
	}
	return false;
}

static int higpu_ioc_launch(struct higpu_file *f, void *arg, unsigned int ioc)
{
	struct higpu_launch *a = arg;
	struct higpu_cmd cmd = {};
	struct higpu_req *op;
	int ret;

	if (!higpu_flags_ok(a->flags) || !higpu_launch_ok(a))
		return -EINVAL;
	if (!(f->dev->caps & HIGPU_CAP_KERNELS))
		return -EOPNOTSUPP;
	ret = higpu_start(f, HIGPU_OP_LAUNCH, a->stream, -1, &op);
	if (ret)
		return ret;
	cmd.args.launch.kernel = cpu_to_le16(a->kernel);
	cmd.args.launch.dtype = a->dtype;
	cmd.args.launch.op = a->op;
	cmd.args.launch.count = cpu_to_le64(a->count);
	cmd.args.launch.dst = cpu_to_le64(a->dst);
	cmd.args.launch.src0 = cpu_to_le64(a->src0);
	cmd.args.launch.src1 = cpu_to_le64(a->src1);
	cmd.args.launch.value = cpu_to_le64(a->value);
	ret = higpu_submit(f->dev, op, &cmd, NULL, HIGPU_WAIT_INTR);
	return higpu_finish(f, op, ret, a->flags, a->timeout_ms, &a->res);
}

static int higpu_ioc_event_op(struct higpu_file *f, void *arg, unsigned int ioc)
{
	bool record = ioc == HIGPU_IOC_EVENT_RECORD;
	struct higpu_event_op *a = arg;
	struct higpu_cmd cmd = {};
	struct higpu_req *op;
	u64 count = 0;
	int ret;

	if (!higpu_flags_ok(a->flags))
		return -EINVAL;
	if (!record) {
		if (!(f->dev->caps & HIGPU_CAP_EVENT_WAIT))
			return -EOPNOTSUPP;
		spin_lock(&f->lock);
		if (a->event < f->dev->max_events && f->events[a->event].used)
			count = f->events[a->event].queued;
		spin_unlock(&f->lock);
		/* Never recorded: nothing to wait for (as CUDA). */
		if (!count) {
			memset(&a->res, 0, sizeof(a->res));
			return 0;
		}
	}
	ret = higpu_start(f, record ? HIGPU_OP_EVENT_RECORD : HIGPU_OP_EVENT_WAIT, a->stream,
			  a->event, &op);
	if (ret)
		return ret;
	cmd.args.event.event_id = cpu_to_le32(a->event);
	cmd.args.event.count = cpu_to_le64(count);
	ret = higpu_submit(f->dev, op, &cmd, NULL, HIGPU_WAIT_INTR);
	if (!ret && record) {
		/* Counted once the device has it: a wait for it must end. */
		spin_lock(&f->lock);
		f->events[a->event].queued++;
		spin_unlock(&f->lock);
	}
	return higpu_finish(f, op, ret, a->flags, a->timeout_ms, &a->res);
}

static int higpu_ioc_wait(struct higpu_file *f, void *arg, unsigned int ioc)
{
	struct higpu_wait *a = arg;
	int ret;

	if (a->rsvd)
		return -EINVAL;
	ret = higpu_wait_seq(f, a->seq, a->timeout_ms, &a->res);
	return ret;
}

/* higpu_ioc_sync - STREAM_SYNC (one stream) or SYNC (all of them). */
static int higpu_ioc_sync(struct higpu_file *f, void *arg, unsigned int ioc)
{
	bool all = ioc == HIGPU_IOC_SYNC;
	struct higpu_dev *dev = f->dev;
	struct higpu_sync *a = arg;
	u64 seq;
	u32 i;
	int ret;

	if (a->rsvd || (!all && a->stream >= dev->max_streams))
		return -EINVAL;
	spin_lock(&f->lock);
	seq = f->next_seq - 1;
	ret = all || f->streams[a->stream].state != HIGPU_STREAM_FREE ? 0 : -EINVAL;
	spin_unlock(&f->lock);
	if (ret)
		return ret;
	ret = higpu_wait_pending(f, all ? -1 : (int)a->stream, seq, false, a->timeout_ms);
	if (ret)
		return ret;
	a->status = 0;
	a->err_seq = 0;
	spin_lock(&f->lock);
	for (i = all ? 0 : a->stream; i < (all ? dev->max_streams : a->stream + 1); i++) {
		struct higpu_fstream *s = &f->streams[i];

		if (s->err_status && (!a->err_seq || s->err_seq < a->err_seq)) {
			a->err_seq = s->err_seq;
			a->status = s->err_status;
		}
		s->err_status = 0;
		s->err_seq = 0;
	}
	spin_unlock(&f->lock);
	return 0;
}

/*
 * Stream and event ids. A file's ids of one kind are first..n-1; take
 * claims a free id, drop lets a live one go, both under f->lock.
 */
typedef bool (*higpu_id_fn)(struct higpu_file *f, u32 id);

/* higpu_id_new - the lowest free id, taken: -EBUSY if none is free. */
static int higpu_id_new(struct higpu_file *f, u32 first, u32 n, higpu_id_fn take, u32 *id)
{
	int ret = -EBUSY;
	u32 i;

	if (higpu_file_stale(f))
		return -EIO;
	spin_lock(&f->lock);
	for (i = first; i < n; i++) {
		if (take(f, i)) {
			*id = i;
			ret = 0;
			break;
		}
	}
	spin_unlock(&f->lock);
	return ret;
}

/* higpu_id_drop - id let go: -EINVAL if it is out of range or not live. */
static int higpu_id_drop(struct higpu_file *f, u32 first, u32 n, higpu_id_fn drop, u32 id)
{
	bool ok;

	if (id < first || id >= n)
		return -EINVAL;
	spin_lock(&f->lock);
	ok = drop(f, id);
	spin_unlock(&f->lock);
	return ok ? 0 : -EINVAL;
}

static bool higpu_stream_take(struct higpu_file *f, u32 id)
{
	struct higpu_fstream *s = &f->streams[id];

	if (s->state != HIGPU_STREAM_FREE)
		return false;
	s->state = HIGPU_STREAM_LIVE;
	s->err_status = 0;
	s->err_seq = 0;
	return true;
}

/* The id is reused once the stream's work is done; the work goes on (cudaStreamDestroy). */
static bool higpu_stream_drop(struct higpu_file *f, u32 id)
{
	struct higpu_fstream *s = &f->streams[id];

	if (s->state != HIGPU_STREAM_LIVE)
		return false;
	s->state = s->pending ? HIGPU_STREAM_DYING : HIGPU_STREAM_FREE;
	return true;
}

static bool higpu_event_take(struct higpu_file *f, u32 id)
{
	struct higpu_fevent *ev = &f->events[id];

	if (ev->used)
		return false;
	/* queued stays: the device's record count of the id goes on. */
	*ev = (struct higpu_fevent){ .used = true, .queued = ev->queued };
	return true;
}

static bool higpu_event_drop(struct higpu_file *f, u32 id)
{
	struct higpu_fevent *ev = &f->events[id];

	if (!ev->used)
		return false;
	ev->used = false;
	return true;
}

/*
 * The ids a file hands out: streams (stream 0, the default stream, is
 * always there) and events, with their take and drop.
 */
struct higpu_ids {
	u32 first;
	higpu_id_fn take;
	higpu_id_fn drop;
};

static const struct higpu_ids higpu_stream_ids = { 1, higpu_stream_take, higpu_stream_drop };
static const struct higpu_ids higpu_event_ids = { 0, higpu_event_take, higpu_event_drop };

/* The uapi's stream and event ids are alike: higpu_ioc_id_* take either. */
static_assert(sizeof(struct higpu_stream) == sizeof(struct higpu_event));
static_assert(offsetof(struct higpu_stream, id) == offsetof(struct higpu_event, id));
static_assert(offsetof(struct higpu_stream, rsvd) == offsetof(struct higpu_event, rsvd));

/* higpu_ids_of - the ids ioctl ioc creates or destroys, *n of them. */
static const struct higpu_ids *higpu_ids_of(struct higpu_file *f, unsigned int ioc, u32 *n)
{
	if (ioc == HIGPU_IOC_STREAM_CREATE || ioc == HIGPU_IOC_STREAM_DESTROY) {
		*n = f->dev->max_streams;
		return &higpu_stream_ids;
	}
	*n = f->dev->max_events;
	return &higpu_event_ids;
}

/* HIGPU_IOC_STREAM_CREATE, HIGPU_IOC_EVENT_CREATE */
static int higpu_ioc_id_create(struct higpu_file *f, void *arg, unsigned int ioc)
{
	struct higpu_stream *a = arg;
	const struct higpu_ids *ids;
	u32 n;

	ids = higpu_ids_of(f, ioc, &n);
	return higpu_id_new(f, ids->first, n, ids->take, &a->id);
}

/* HIGPU_IOC_STREAM_DESTROY, HIGPU_IOC_EVENT_DESTROY */
static int higpu_ioc_id_destroy(struct higpu_file *f, void *arg, unsigned int ioc)
{
	struct higpu_stream *a = arg;
	const struct higpu_ids *ids;
	u32 n;

	if (a->rsvd)
		return -EINVAL;
	ids = higpu_ids_of(f, ioc, &n);
	return higpu_id_drop(f, ids->first, n, ids->drop, a->id);
}

/* higpu_event_state - QUERY's answer for event id (checked by the caller). */
static void higpu_event_state(struct higpu_file *f, struct higpu_event_query *a, u64 *seq)
{
	struct higpu_fevent *ev = &f->events[a->event];

	*seq = ev->last_seq;
	a->status = 0;
	a->timestamp_ns = 0;
	if (!ev->last_seq) {
		a->state = HIGPU_EVENT_NEVER;
	} else if (!ev->last_done) {
		a->state = HIGPU_EVENT_PENDING;
	} else {
		a->state = HIGPU_EVENT_DONE;
		a->status = ev->last_status;
		a->timestamp_ns = ev->timestamp_ns;
	}
}

static int higpu_ioc_event_query(struct higpu_file *f, void *arg, unsigned int ioc)
{
	bool sync = ioc == HIGPU_IOC_EVENT_SYNC;
	struct higpu_event_query *a = arg;
	u64 seq;
	int ret;

	if (a->event >= f->dev->max_events)
		return -EINVAL;
	spin_lock(&f->lock);
	ret = f->events[a->event].used ? 0 : -EINVAL;
	if (!ret)
		higpu_event_state(f, a, &seq);
	spin_unlock(&f->lock);
	if (ret)
		return ret;
	if (sync && a->state == HIGPU_EVENT_PENDING) {
		ret = higpu_wait_pending(f, -1, seq, true, a->timeout_ms);
		if (ret)
			return ret;
		spin_lock(&f->lock);
		higpu_event_state(f, a, &seq);
		spin_unlock(&f->lock);
	}
	return 0;
}

static int higpu_ioc_event_elapsed(struct higpu_file *f, void *arg, unsigned int ioc)
{
	struct higpu_event_elapsed *a = arg;
	struct higpu_fevent *s, *e;
	int ret;

	if (a->start >= f->dev->max_events || a->end >= f->dev->max_events)
		return -EINVAL;
	spin_lock(&f->lock);
	s = &f->events[a->start];
	e = &f->events[a->end];
	if (!s->used || !e->used || !s->last_seq || !e->last_seq)
		ret = -EINVAL;
	else if (!s->last_done || !e->last_done)
		ret = -EAGAIN;
	else if (s->last_status || e->last_status)
		ret = -EIO;
	else
		ret = 0;
	a->elapsed_ns = ret ? 0 : (s64)(e->timestamp_ns - s->timestamp_ns);
	spin_unlock(&f->lock);
	return ret;
}

static int higpu_ioc_alloc(struct higpu_file *f, void *arg, unsigned int ioc)
{
	struct higpu_dev *dev = f->dev;
	struct higpu_mem_alloc *a = arg;
	struct higpu_cmd cmd = {};
	struct higpu_req *op;
	u64 size, addr;
	int ret;

	if (!a->size || a->rsvd || (a->align & (a->align - 1)) || a->size > (U64_MAX >> 1))
		return -EINVAL;
	cmd.args.mem_alloc.size = cpu_to_le64(a->size);
	cmd.args.mem_alloc.align = cpu_to_le64(a->align ?
					       max_t(u64, a->align, dev->alloc_align) : 0);
	ret = higpu_run_status(f, HIGPU_OP_MEM_ALLOC, &cmd, &a->status, &addr);
	if (ret)
		return ret;
	a->addr = a->status ? 0 : addr;
	if (a->addr) {
		size = ALIGN(a->size, dev->alloc_align);
		ret = xa_err(xa_store(&f->allocs_xa, a->addr >> 8, xa_mk_value(size >> 8),
				      GFP_KERNEL));
		if (ret) {
			struct higpu_cmd fcmd = {};

			fcmd.args.mem_free.addr = cpu_to_le64(a->addr);
			if (!higpu_run_sync(f, HIGPU_OP_MEM_FREE, &fcmd, NULL, HIGPU_WAIT_UNINTR,
					    HIGPU_CMD_MS, &op))
				higpu_op_put(op);
			return ret;
		}
		spin_lock(&f->lock);
		f->mem_used += size;
		f->allocs++;
		spin_unlock(&f->lock);
	}
	return 0;
}

static int higpu_ioc_free(struct higpu_file *f, void *arg, unsigned int ioc)
{
	struct higpu_mem_free *a = arg;
	struct higpu_cmd cmd = {};
	void *entry;
	int ret;

	if (a->rsvd || !a->addr || (a->addr & 0xff))
		return -EINVAL;
	/* Not one of this file's: the device would refuse it too. */
	entry = xa_load(&f->allocs_xa, a->addr >> 8);
	if (!entry)
		return -EINVAL;
	cmd.args.mem_free.addr = cpu_to_le64(a->addr);
	ret = higpu_run_status(f, HIGPU_OP_MEM_FREE, &cmd, &a->status, NULL);
	if (ret)
		return ret;
	if (!a->status && xa_erase(&f->allocs_xa, a->addr >> 8) == entry) {
		spin_lock(&f->lock);
		f->mem_used -= xa_to_value(entry) << 8;
		f->allocs--;
		spin_unlock(&f->lock);
	}
	return 0;
}

static int higpu_ioc_peer_access(struct higpu_file *f, void *arg, unsigned int ioc)
{
	struct higpu_peer_access *a = arg;
	struct higpu_cmd cmd = {};

	if (a->rsvd || a->enable > 1 || a->peer_id >= HIGPU_MAX_GPUS)
		return -EINVAL;
	if (!(f->dev->caps & HIGPU_CAP_PEER))
		return -EOPNOTSUPP;
	cmd.args.peer.peer_id = cpu_to_le16(a->peer_id);
	cmd.args.peer.enable = a->enable;
	return higpu_run_status(f, HIGPU_OP_PEER_ACCESS, &cmd, &a->status, NULL);
}

/* higpu_query_cmd - a HIGPU_OP_QUERY of what into out (len bytes). */
static int higpu_query_cmd(struct higpu_file *f, u32 what, void *out, size_t len)
{
	struct higpu_piece piece = {};
	struct higpu_cmd cmd = {};
	struct higpu_req *op;
	int ret;

	piece.resp_bytes = len;
	piece.resp = dma_alloc_coherent(&f->dev->pdev->dev, len, &piece.resp_dma, GFP_KERNEL);
	if (!piece.resp)
		return -ENOMEM;
	cmd.args.query.what = cpu_to_le32(what);
	cmd.args.query.resp_gpa = cpu_to_le64(piece.resp_dma);
	cmd.args.query.resp_len = cpu_to_le32(len);
	ret = higpu_run_sync(f, HIGPU_OP_QUERY, &cmd, &piece, HIGPU_WAIT_KILLABLE, HIGPU_CMD_MS,
			     &op);
	/* Not sent: still ours. Sent: the slot frees it at completion. */
	if (piece.resp)
		higpu_piece_release(f->dev, &piece);
	if (ret)
		return ret;
	ret = op->status ? -(int)op->status : op->answer_len < len ? -EIO : 0;
	if (!ret)
		memcpy(out, op->answer, len);
	higpu_op_put(op);
	return ret;
}

static int higpu_query_hdr(struct higpu_file *f, struct higpu_query *q)
{
	struct higpu_dev *dev = f->dev;
	struct higpu_dev_hdr *h = dev->hdr;
	int ret = 0;

	down_read(&dev->hw_sem);
	if (dev->gone) {
		ret = -ENODEV;
		goto out;
	}
	q->uapi_version = HIGPU_UAPI_VERSION;
	q->abi_version = le16_to_cpu(h->abi_major) << 16 | le16_to_cpu(h->abi_minor);
	q->gpu_id = dev->gpu_id;
	q->hilink_ports = READ_ONCE(h->hilink_ports);
	q->caps = dev->caps;
	q->alloc_align = dev->alloc_align;
	q->mem_size = le64_to_cpu(h->mem_size);
	q->va_base = le64_to_cpu(h->va_base);
	q->mem_budget = le64_to_cpu(h->mem_budget);
	q->max_contexts = le32_to_cpu(h->max_contexts);
	q->max_allocs = le32_to_cpu(h->max_allocs);
	q->max_inflight = le32_to_cpu(h->max_inflight);
	q->max_streams = dev->max_streams;
	q->max_events = dev->max_events;
	q->max_sge = dev->max_sge;
	q->reset_count = higpu_load(&h->reset_count);
	q->ctx_id = f->ctx_id;
	memcpy(q->name, h->name, min(sizeof(q->name), sizeof(h->name)));
	q->name[sizeof(q->name) - 1] = 0;
	q->bytes_h2d = le64_to_cpu(READ_ONCE(h->bytes_h2d));
	q->bytes_d2h = le64_to_cpu(READ_ONCE(h->bytes_d2h));
	q->bytes_d2d = le64_to_cpu(READ_ONCE(h->bytes_d2d));
out:
	up_read(&dev->hw_sem);
	return ret;
}

static int higpu_ioc_query(struct higpu_file *f, void *arg, unsigned int ioc)
{
	struct higpu_dev_info di;
	struct higpu_ctx_info ci;
	struct higpu_query *q = arg;
	int ret;

	ret = higpu_query_hdr(f, q);
	if (!ret)
		ret = higpu_query_cmd(f, HIGPU_QUERY_DEVICE, &di, sizeof(di));
	if (!ret)
		ret = higpu_query_cmd(f, HIGPU_QUERY_CTX, &ci, sizeof(ci));
	if (ret)
		return ret;
	q->mem_used = le64_to_cpu(di.mem_used);
	q->mem_free_largest = le64_to_cpu(di.mem_free_largest);
	q->busy_ns = le64_to_cpu(di.busy_ns);
	q->clock_ns = le64_to_cpu(di.clock_ns);
	q->commands = le64_to_cpu(di.commands);
	q->kernels = le64_to_cpu(di.kernels);
	q->contexts = le32_to_cpu(di.contexts);
	q->allocs = le32_to_cpu(di.allocs);
	q->inflight = le32_to_cpu(di.inflight);
	q->ctx_mem_used = le64_to_cpu(ci.mem_used);
	q->ctx_allocs = le32_to_cpu(ci.allocs);
	q->ctx_inflight = le32_to_cpu(ci.inflight);
	q->ctx_errors = le64_to_cpu(ci.errors);
	q->ctx_err_tag = le64_to_cpu(ci.err_tag);
	q->ctx_err_opcode = le16_to_cpu(ci.err_opcode);
	q->ctx_err_stream = le16_to_cpu(ci.err_stream);
	q->ctx_err_status = le16_to_cpu(ci.err_status);
	return 0;
}

static int higpu_ioc_version(struct higpu_file *f, void *arg, unsigned int ioc)
{
	struct higpu_version *v = arg;
	struct higpu_dev *dev = f->dev;

	down_read(&dev->hw_sem);
	if (!dev->gone)
		v->abi_version = le16_to_cpu(dev->hdr->abi_major) << 16 |
				 le16_to_cpu(dev->hdr->abi_minor);
	up_read(&dev->hw_sem);
	v->uapi_version = HIGPU_UAPI_VERSION;
	v->driver_abi = HIGPU_ABI_MAJOR << 16 | HIGPU_ABI_MINOR;
	return 0;
}

#define HIGPU_PROCS_MAX	256

static int higpu_ioc_procs(struct higpu_file *f, void *arg, unsigned int ioc)
{
	struct higpu_dev *dev = f->dev;
	struct higpu_procs *a = arg;
	struct higpu_proc *p;
	struct higpu_file *o;
	u32 n = 0, total = 0;
	int ret = 0;

	a->count = min_t(u32, a->count, HIGPU_PROCS_MAX);
	p = kcalloc(max_t(u32, a->count, 1), sizeof(*p), GFP_KERNEL);
	if (!p)
		return -ENOMEM;
	mutex_lock(&dev->files_lock);
	list_for_each_entry(o, &dev->files, node) {
		total++;
		if (n >= a->count)
			continue;
		p[n].pid = o->pid;
		p[n].ctx_id = o->ctx_id;
		memcpy(p[n].comm, o->comm, sizeof(p[n].comm));
		spin_lock(&o->lock);
		p[n].mem_used = o->mem_used;
		p[n].allocs = o->allocs;
		p[n].inflight = o->inflight;
		spin_unlock(&o->lock);
		n++;
	}
	mutex_unlock(&dev->files_lock);
	if (n && copy_to_user(u64_to_user_ptr(a->ptr), p, n * sizeof(*p)))
		ret = -EFAULT;
	kfree(p);
	if (ret)
		return ret;
	a->count = n;
	a->total = total;
	return 0;
}

/*
 * The ioctls, by number. higpu_ioctl copies the argument in (_IOC_WRITE;
 * else it starts zeroed) and, when the handler returns 0, out
 * (_IOC_READ). A submitting ioctl's argument ends with a struct
 * higpu_result (higpu_uapi.h): it is copied out too when only the wait
 * for the work failed (res.seq set: the work was submitted).
 */
struct higpu_ioctl_desc {
	unsigned int cmd;
	int (*fn)(struct higpu_file *f, void *arg, unsigned int ioc);
	bool submit;
};

#define HIGPU_IOCTL(ioc, func, is_submit) \
	[_IOC_NR(ioc)] = { .cmd = ioc, .fn = func, .submit = is_submit }

static const struct higpu_ioctl_desc higpu_ioctls[] = {
	HIGPU_IOCTL(HIGPU_IOC_GET_VERSION, higpu_ioc_version, false),
	HIGPU_IOCTL(HIGPU_IOC_QUERY, higpu_ioc_query, false),
	HIGPU_IOCTL(HIGPU_IOC_MEM_ALLOC, higpu_ioc_alloc, false),
	HIGPU_IOCTL(HIGPU_IOC_MEM_FREE, higpu_ioc_free, false),
	HIGPU_IOCTL(HIGPU_IOC_COPY, higpu_ioc_copy, true),
	HIGPU_IOCTL(HIGPU_IOC_MEMSET, higpu_ioc_memset, true),
	HIGPU_IOCTL(HIGPU_IOC_LAUNCH, higpu_ioc_launch, true),
	HIGPU_IOCTL(HIGPU_IOC_STREAM_CREATE, higpu_ioc_id_create, false),
	HIGPU_IOCTL(HIGPU_IOC_STREAM_DESTROY, higpu_ioc_id_destroy, false),
	HIGPU_IOCTL(HIGPU_IOC_STREAM_SYNC, higpu_ioc_sync, false),
	HIGPU_IOCTL(HIGPU_IOC_SYNC, higpu_ioc_sync, false),
	HIGPU_IOCTL(HIGPU_IOC_EVENT_CREATE, higpu_ioc_id_create, false),
	HIGPU_IOCTL(HIGPU_IOC_EVENT_DESTROY, higpu_ioc_id_destroy, false),
	HIGPU_IOCTL(HIGPU_IOC_EVENT_RECORD, higpu_ioc_event_op, true),
	HIGPU_IOCTL(HIGPU_IOC_STREAM_WAIT_EVENT, higpu_ioc_event_op, true),
	HIGPU_IOCTL(HIGPU_IOC_EVENT_QUERY, higpu_ioc_event_query, false),
	HIGPU_IOCTL(HIGPU_IOC_EVENT_SYNC, higpu_ioc_event_query, false),
	HIGPU_IOCTL(HIGPU_IOC_EVENT_ELAPSED, higpu_ioc_event_elapsed, false),
	HIGPU_IOCTL(HIGPU_IOC_WAIT, higpu_ioc_wait, false),
	HIGPU_IOCTL(HIGPU_IOC_PROCS, higpu_ioc_procs, false),
	HIGPU_IOCTL(HIGPU_IOC_PEER_ACCESS, higpu_ioc_peer_access, false),
};

/* Room for the argument of any ioctl of higpu_ioctls. */
union higpu_ioctl_arg {
	struct higpu_version version;
	struct higpu_query query;
	struct higpu_mem_alloc mem_alloc;
	struct higpu_mem_free mem_free;
	struct higpu_copy copy;
	struct higpu_memset memset;
	struct higpu_launch launch;
	struct higpu_stream stream;
	struct higpu_sync sync;
	struct higpu_event event;
	struct higpu_event_op event_op;
	struct higpu_event_query event_query;
	struct higpu_event_elapsed event_elapsed;
	struct higpu_wait wait;
	struct higpu_procs procs;
	struct higpu_peer_access peer_access;
};

/* The rule higpu_ioctl relies on: a submitting ioctl's result is last. */
#define HIGPU_RES_LAST(type) \
	static_assert(offsetof(type, res) + sizeof(struct higpu_result) == sizeof(type))
HIGPU_RES_LAST(struct higpu_copy);
HIGPU_RES_LAST(struct higpu_memset);
HIGPU_RES_LAST(struct higpu_launch);
HIGPU_RES_LAST(struct higpu_event_op);

static long higpu_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct higpu_file *f = filp->private_data;
	void __user *uarg = (void __user *)arg;
	unsigned int nr = _IOC_NR(cmd);
	const struct higpu_ioctl_desc *d;
	union higpu_ioctl_arg a;
	size_t len = _IOC_SIZE(cmd);
	struct higpu_result *res;
	int ret;

	if (_IOC_TYPE(cmd) != HIGPU_IOC_TYPE || nr >= ARRAY_SIZE(higpu_ioctls))
		return -ENOTTY;
	d = &higpu_ioctls[array_index_nospec(nr, ARRAY_SIZE(higpu_ioctls))];
	if (!d->fn || d->cmd != cmd || len > sizeof(a))
		return -ENOTTY;
	if (!(_IOC_DIR(cmd) & _IOC_WRITE))
		memset(&a, 0, len);
	else if (copy_from_user(&a, uarg, len))
		return -EFAULT;
	/* d->cmd == cmd: len is the argument's size, res its last member. */
	res = d->submit ? (void *)&a + len - sizeof(*res) : NULL;
	if (res)
		memset(res, 0, sizeof(*res));
	ret = d->fn(f, &a, cmd);
	if (!(_IOC_DIR(cmd) & _IOC_READ) || (ret && !(res && res->seq)))
		return ret;
	return copy_to_user(uarg, &a, len) ? -EFAULT : ret;
}

/* ---- open and release ---- */

static struct higpu_file *higpu_file_alloc(struct higpu_dev *dev)
{
	struct higpu_file *f = kzalloc(sizeof(*f), GFP_KERNEL);

	if (!f)
		return NULL;
	f->streams = kcalloc(dev->max_streams, sizeof(*f->streams), GFP_KERNEL);
	f->events = kcalloc(max_t(u32, dev->max_events, 1), sizeof(*f->events), GFP_KERNEL);
	if (!f->streams || !f->events) {
		kfree(f->events);
		kfree(f->streams);
		kfree(f);
		return NULL;
	}
	refcount_set(&f->ref, 1);
	refcount_inc(&dev->ref);
	f->dev = dev;
	INIT_LIST_HEAD(&f->node);
	spin_lock_init(&f->lock);
	init_waitqueue_head(&f->wq);
	INIT_LIST_HEAD(&f->ops);
	xa_init(&f->allocs_xa);
	f->next_seq = 1;
	f->streams[0].state = HIGPU_STREAM_LIVE;
	f->pid = task_tgid_vnr(current);
	get_task_comm(f->comm, current);
	f->epoch = atomic_read(&dev->epoch);
	return f;
}

static int higpu_open(struct inode *inode, struct file *filp)
{
	struct higpu_dev *dev = container_of(filp->private_data, struct higpu_dev, misc);
	struct higpu_cmd cmd = {};
	struct higpu_file *f;
	struct higpu_req *op;
	int ret;

	f = higpu_file_alloc(dev);
	if (!f)
		return -ENOMEM;
	ret = higpu_run_sync(f, HIGPU_OP_CTX_CREATE, &cmd, NULL, HIGPU_WAIT_KILLABLE,
			     HIGPU_CMD_MS, &op);
	if (ret)
		goto err;
	ret = -(int)op->status;
	if (!ret && (!op->result || op->result > U16_MAX))
		ret = -EIO;
	if (!ret)
		f->ctx_id = op->result;
	higpu_op_put(op);
	if (ret)
		goto err;
	mutex_lock(&dev->files_lock);
	list_add_tail(&f->node, &dev->files);
	mutex_unlock(&dev->files_lock);
	filp->private_data = f;
	return 0;
err:
	/* ENOSPC: the device's max_contexts. */
	higpu_file_put(f);
	return ret;
}

/*
 * higpu_release - destroy the context: the device cancels what is
 * queued, lets what runs finish, then completes the destroy, so that all
 * of the file's pieces completed (and released what they pinned) before.
 * A device that does not do so in time is reset.
 */
static int higpu_release(struct inode *inode, struct file *filp)
{
	struct higpu_file *f = filp->private_data;
	struct higpu_dev *dev = f->dev;
	struct higpu_cmd cmd = {};
	struct higpu_req *op;
	bool reset = false;
	int ret;

	ret = higpu_run_sync(f, HIGPU_OP_CTX_DESTROY, &cmd, NULL, HIGPU_WAIT_UNINTR,
			     HIGPU_DESTROY_MS, &op);
	if (!ret) {
		if (op->status)
			dev_warn(&dev->pdev->dev, "destroy of context %u: status %u\n", f->ctx_id,
				 op->status);
		higpu_op_put(op);
	} else if (ret != -EIO && ret != -ENODEV) {
		reset = true;
	}
	spin_lock(&f->lock);
	if (f->nops && !higpu_file_stale(f))
		reset = true;
	spin_unlock(&f->lock);
	if (reset) {
		dev_warn(&dev->pdev->dev, "context %u (pid %d) did not finish its work; resetting the device\n",
			 f->ctx_id, f->pid);
		higpu_recover(dev);
	}
	mutex_lock(&dev->files_lock);
	list_del_init(&f->node);
	mutex_unlock(&dev->files_lock);
	higpu_file_put(f);
	return 0;
}

static const struct file_operations higpu_fops = {
	.owner		= THIS_MODULE,
	.open		= higpu_open,
	.release	= higpu_release,
	.unlocked_ioctl	= higpu_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

/* higpu_chr_register - stage 9: /dev/higpu<gpu_id>, mode 0666 as a GPU's. */
int higpu_chr_register(struct higpu_dev *dev)
{
	int ret;

	snprintf(dev->misc_name, sizeof(dev->misc_name), "higpu%u", dev->gpu_id);
	dev->misc.minor = MISC_DYNAMIC_MINOR;
	dev->misc.name = dev->misc_name;
	dev->misc.fops = &higpu_fops;
	dev->misc.parent = &dev->pdev->dev;
	dev->misc.mode = 0666;
	ret = misc_register(&dev->misc);
	if (ret)
		dev_err(&dev->pdev->dev, "/dev/%s: %d (two functions with gpu_id %u?)\n",
			dev->misc_name, ret, dev->gpu_id);
	return ret;
}

void higpu_chr_unregister(struct higpu_dev *dev)
{
	misc_deregister(&dev->misc);
}
