// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * ibv_badring - used by TestQEMUBadRing: a process that misuses the
 * queues hicain_ib maps into it. It is built against the provider's own
 * header (providers/hicain/hicain.h) so that it can write into its
 * mapped rings what the provider never would: WQEs with an opcode the
 * device does not have, too many SGEs, an inline length beyond the
 * stride, producer indices beyond the depth, a CQ consumer index that
 * runs ahead. Through the verbs it posts work with lkeys of another PD,
 * lkeys it never registered and SGEs outside its MR. Each case must end
 * in an error completion or its QP in the error state, never in data
 * reaching a buffer it should not; and a well-formed transfer still
 * works afterwards. It also checks that a forked child has no mapping
 * and that another context of the same process cannot map its rings,
 * and drives the extended post API (ibv_wr_*), which writes into the
 * same rings, right and wrong.
 *
 * Every QP is RC, connected to a QP of the same device through GID
 * index 1. Prints BADRING-OK name or BADRING-FAIL name: why per case,
 * then BADRING-DONE failures=N; exits with N.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hicain.h"

#define BUF	4096

static struct ibv_context *ctx;
static union ibv_gid gid;
static int failures;

struct pair {
	struct ibv_cq *cq_a, *cq_b;
	struct ibv_qp *a, *b;
};

static void fail(const char *name, const char *why)
{
	printf("BADRING-FAIL %s: %s\n", name, why);
	failures++;
}

static void ok(const char *name)
{
	printf("BADRING-OK %s\n", name);
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int to_rts(struct ibv_qp *qp, uint32_t dest)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static struct ibv_qp *new_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 2;
	ia.cap.max_inline_data = 64;
	return ibv_create_qp(pd, &ia);
}

/*
 * make_pair - QP a on pd_a and b on pd_b, connected, each with a CQ:
 * extended CQs (ibv_create_cq_ex, every standard ibv_wc field) with ex.
 */
static int make_pair_cq(struct pair *p, struct ibv_pd *pd_a, struct ibv_pd *pd_b, int ex)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 16,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
		.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
	};
	struct ibv_cq_ex *xa, *xb;

	memset(p, 0, sizeof(*p));
	if (ex) {
		/* ABI 1.12: both completion timestamps as well. */
		ca.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			       IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
		xa = ibv_create_cq_ex(ctx, &ca);
		xb = ibv_create_cq_ex(ctx, &ca);
		p->cq_a = xa ? ibv_cq_ex_to_cq(xa) : NULL;
		p->cq_b = xb ? ibv_cq_ex_to_cq(xb) : NULL;
	} else {
		p->cq_a = ibv_create_cq(ctx, 16, NULL, NULL, 0);
		p->cq_b = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	}
	if (!p->cq_a || !p->cq_b)
		return -1;
	p->a = new_qp(pd_a, p->cq_a);
	p->b = new_qp(pd_b, p->cq_b);
	if (!p->a || !p->b)
		return -1;
	if (to_rts(p->a, p->b->qp_num) || to_rts(p->b, p->a->qp_num))
		return -1;
	return 0;
}

static int make_pair(struct pair *p, struct ibv_pd *pd_a, struct ibv_pd *pd_b)
{
	return make_pair_cq(p, pd_a, pd_b, 0);
}

/* wait_ex - ibv_start_poll until a completion comes, within ms. */
static int wait_ex(struct ibv_cq_ex *cq, int ms)
{
	struct ibv_poll_cq_attr pa = {};
	long end = now_ms() + ms;

	do {
		if (!ibv_start_poll(cq, &pa))
			return 0;
		usleep(1000);
	} while (now_ms() < end);
	return -1;
}

static void free_pair(struct pair *p)
{
	if (p->a)
		ibv_destroy_qp(p->a);
	if (p->b)
		ibv_destroy_qp(p->b);
	if (p->cq_a)
		ibv_destroy_cq(p->cq_a);
	if (p->cq_b)
		ibv_destroy_cq(p->cq_b);
	memset(p, 0, sizeof(*p));	/* a second free_pair does nothing */
}

/* wait_wc - one completion of cq within ms; 0, or -1 on timeout. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	long end = now_ms() + ms;
	int n;

	do {
		n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return -1;
		if (n == 1)
			return 0;
		usleep(1000);
	} while (now_ms() < end);
	return -1;
}

/* wait_err - the QP reaches IBV_QPS_ERR within ms. */
static int wait_err(struct ibv_qp *qp, int ms)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	long end = now_ms() + ms;

	do {
		if (!ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) && a.qp_state == IBV_QPS_ERR)
			return 0;
		usleep(5000);
	} while (now_ms() < end);
	return -1;
}

/* wait_event - an async event of type for qp within ms. */
static int wait_event(struct ibv_qp *qp, enum ibv_event_type type, int ms)
{
	struct ibv_async_event ev;
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	long end = now_ms() + ms;
	int found = -1;

	while (found && now_ms() < end) {
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		if (ibv_get_async_event(ctx, &ev))
			continue;
		if (ev.event_type == type && ev.element.qp == qp)
			found = 0;
		ibv_ack_async_event(&ev);
	}
	return found;
}

static int post_write(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr, uint32_t len, uint32_t lkey,
		      uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* raw_wqe - the next send WQE slot of a mapped QP, zeroed. */
static struct hicain_send_wqe *raw_wqe(struct hicain_qp *qp)
{
	struct hicain_send_wqe *w = (struct hicain_send_wqe *)
		(qp->sq.buf + (size_t)(qp->sq.idx & (qp->sq.depth - 1)) * qp->sq.stride);

	memset(w, 0, qp->sq.stride);
	return w;
}

static void raw_publish_sq(struct hicain_qp *qp, uint32_t prod)
{
	__atomic_store_n(&qp->sq_dbrec->prod, prod, __ATOMIC_RELEASE);
	hicain_ring_db(to_hctx(ctx), to_hctx(ctx)->caps.db_qp);
}

static int all_bytes(const uint8_t *p, size_t n, uint8_t v)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

/* A raw WQE that breaks the QP: it must end in ERR with QP_FATAL. */
static void fatal_case(const char *name, struct ibv_pd *pd, int kind)
{
	struct pair p;
	struct hicain_qp *q;
	struct hicain_send_wqe *w;
	uint32_t prod;

	if (make_pair(&p, pd, pd)) {
		fail(name, "set-up");
		free_pair(&p);
		return;
	}
	q = to_hqp(p.a);
	switch (kind) {
	case 0:		/* SQ producer index beyond the depth */
		prod = q->sq.idx + q->sq.depth + 7;
		raw_publish_sq(q, prod);
		break;
	case 1:		/* more SGEs than the QP has */
		w = raw_wqe(q);
		w->opcode = IBV_WR_SEND;
		w->num_sge = 255;
		w->send_flags = IBV_SEND_SIGNALED;
		raw_publish_sq(q, ++q->sq.idx);
		break;
	case 2:		/* inline data longer than the stride */
		w = raw_wqe(q);
		w->opcode = IBV_WR_SEND;
		w->send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
		w->inline_len = 1 << 20;
		raw_publish_sq(q, ++q->sq.idx);
		break;
	case 3:		/* RQ producer index beyond the depth */
		__atomic_store_n(&q->rq_dbrec->prod, q->rq.idx + q->rq.depth + 1, __ATOMIC_RELEASE);
		hicain_ring_db(to_hctx(ctx), to_hctx(ctx)->caps.db_qp);
		break;
	}
	if (wait_err(p.a, 5000))
		fail(name, "the QP did not enter ERR");
	else if (wait_event(p.a, IBV_EVENT_QP_FATAL, 5000))
		fail(name, "no QP_FATAL event");
	else
		ok(name);
	free_pair(&p);
}

/* new_qp_ex - an RC or UD QP of the extended post API with ops. */
static struct ibv_qp *new_qp_ex(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type type,
				uint64_t ops)
{
	struct ibv_qp_init_attr_ex ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = type;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 2;
	ia.cap.max_inline_data = 64;
	ia.pd = pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.send_ops_flags = ops;
	return ibv_create_qp_ex(ctx, &ia);
}

#define RC_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE | \
		IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | \
		IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

/*
 * qp_ex_case - the ibv_wr_* API between two RC QPs of one PD: one batch
 * of every operation the device has (write, write with immediate,
 * inline send, two-SGE send with immediate, read, compare-and-swap,
 * fetch-and-add) lands right; a batch with a bad entry is dropped
 * whole; inline data beyond max_inline, operations the device lacks and
 * posts in Reset are refused.
 */
static const char *qp_ex_case(struct ibv_pd *pd)
{
	enum { W = 0, WI = 256, SI = 512, S2 = 768, R = 1024, AT = 2048 };
	uint8_t *src = aligned_alloc(BUF, BUF), *dst = aligned_alloc(BUF, BUF);
	struct ibv_mr *ms = NULL, *md = NULL;
	struct ibv_cq *ca = NULL, *cb = NULL;
	struct ibv_qp *a = NULL, *b = NULL, *x;
	struct ibv_qp_ex *qx;
	struct ibv_sge sg2[2], rsge[3];
	struct ibv_recv_wr rwr[3], *rbad;
	struct ibv_qp_attr ra = { .qp_state = IBV_QPS_RESET };
	struct ibv_wc wc[16];
	const char *why = NULL;
	uint64_t v;
	int i, n, got;

	if (!src || !dst)
		return "buffers";
	memset(src, 'X', BUF);
	memset(dst, 0, BUF);
	memset(src + R, 'R', 256);
	v = 5;
	memcpy(dst + AT, &v, 8);	/* compare-and-swap 5 -> 9 */
	v = 100;
	memcpy(dst + AT + 8, &v, 8);	/* fetch-and-add 100 + 7 */
	ms = ibv_reg_mr(pd, src, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	md = ibv_reg_mr(pd, dst, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_ATOMIC);
	ca = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	cb = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!ms || !md || !ca || !cb) {
		why = "MRs and CQs";
		goto out;
	}
	/* TSO is not offered (MW binds are, from ABI 1.10: the mw case). */
	x = new_qp_ex(pd, ca, IBV_QPT_RC, RC_OPS | IBV_QP_EX_WITH_TSO);
	if (x || errno != EOPNOTSUPP) {
		why = "a QP with TSO was not refused with EOPNOTSUPP";
		if (x)
			ibv_destroy_qp(x);
		goto out;
	}
	x = new_qp_ex(pd, ca, IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE);
	if (x || errno != EOPNOTSUPP) {
		why = "a UD QP with RDMA WRITE was not refused with EOPNOTSUPP";
		if (x)
			ibv_destroy_qp(x);
		goto out;
	}
	x = new_qp_ex(pd, ca, IBV_QPT_UC, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW);
	if (x || errno != EOPNOTSUPP) {
		why = "a UC QP with MW binds was not refused with EOPNOTSUPP";
		if (x)
			ibv_destroy_qp(x);
		goto out;
	}
	a = new_qp_ex(pd, ca, IBV_QPT_RC, RC_OPS);
	b = new_qp_ex(pd, cb, IBV_QPT_RC, RC_OPS);
	if (!a || !b || !(qx = ibv_qp_to_qp_ex(a)) || !ibv_qp_to_qp_ex(b) ||
	    to_rts(a, b->qp_num) || to_rts(b, a->qp_num)) {
		why = "extended QPs";
		goto out;
	}
	if (!to_hqp(a)->mapped) {
		why = "the extended QP is not mapped";
		goto out;
	}
	for (i = 0; i < 3; i++) {
		rsge[i].addr = (uintptr_t)dst + (i == 0 ? WI : i == 1 ? SI : S2);
		rsge[i].length = 256;
		rsge[i].lkey = md->lkey;
		rwr[i].wr_id = 100 + i;
		rwr[i].sg_list = &rsge[i];
		rwr[i].num_sge = 1;
		rwr[i].next = i < 2 ? &rwr[i + 1] : NULL;
	}
	if (ibv_post_recv(b, rwr, &rbad)) {
		why = "post_recv";
		goto out;
	}

	/* A batch with a bad entry (three SGEs on a two-SGE QP) is dropped. */
	ibv_wr_start(qx);
	qx->wr_id = 90;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qx, md->rkey, (uintptr_t)dst);
	ibv_wr_set_sge(qx, ms->lkey, (uintptr_t)src, 64);
	ibv_wr_send(qx);
	ibv_wr_set_sge_list(qx, 3, rsge);
	if (ibv_wr_complete(qx) != EINVAL) {
		why = "a batch with three SGEs on a two-SGE QP was not refused with EINVAL";
		goto out;
	}
	/* Inline data beyond max_inline. */
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_set_inline_data(qx, src, 4096);
	if (ibv_wr_complete(qx) != ENOMEM) {
		why = "4096 inline bytes were not refused with ENOMEM";
		goto out;
	}

	ibv_wr_start(qx);
	qx->wr_flags = IBV_SEND_SIGNALED;
	qx->wr_id = 1;
	ibv_wr_rdma_write(qx, md->rkey, (uintptr_t)dst + W);
	ibv_wr_set_sge(qx, ms->lkey, (uintptr_t)src, 200);
	qx->wr_id = 2;
	ibv_wr_rdma_write_imm(qx, md->rkey, (uintptr_t)dst + WI, htonl(0xabc));
	ibv_wr_set_sge(qx, ms->lkey, (uintptr_t)src, 100);
	qx->wr_id = 3;
	ibv_wr_send(qx);
	{
		struct ibv_data_buf ib[2] = { { (void *)"inline-", 7 }, { (void *)"bytes", 5 } };

		ibv_wr_set_inline_data_list(qx, 2, ib);
	}
	qx->wr_id = 4;
	ibv_wr_send_imm(qx, htonl(0xdef));
	sg2[0] = (struct ibv_sge){ (uintptr_t)src, 10, ms->lkey };
	sg2[1] = (struct ibv_sge){ (uintptr_t)src + R, 20, ms->lkey };
	ibv_wr_set_sge_list(qx, 2, sg2);
	qx->wr_id = 5;
	ibv_wr_rdma_read(qx, ms->rkey, (uintptr_t)src + R);
	ibv_wr_set_sge(qx, md->lkey, (uintptr_t)dst + R, 256);
	qx->wr_id = 6;
	ibv_wr_atomic_cmp_swp(qx, md->rkey, (uintptr_t)dst + AT, 5, 9);
	ibv_wr_set_sge(qx, md->lkey, (uintptr_t)dst + AT + 16, 8);
	qx->wr_id = 7;
	ibv_wr_atomic_fetch_add(qx, md->rkey, (uintptr_t)dst + AT + 8, 7);
	ibv_wr_set_sge(qx, md->lkey, (uintptr_t)dst + AT + 24, 8);
	if (ibv_wr_complete(qx)) {
		why = "wr_complete of the batch";
		goto out;
	}
	for (got = 0; got < 7;) {
		if (wait_wc(ca, &wc[got], 5000)) {
			why = "the batch's completions did not all come";
			goto out;
		}
		if (wc[got].status != IBV_WC_SUCCESS || wc[got].wr_id != (uint64_t)got + 1) {
			printf("BADRING-INFO qp-ex: completion %d: wr_id %llu status %d\n", got,
			       (unsigned long long)wc[got].wr_id, wc[got].status);
			why = "a completion of the batch is wrong";
			goto out;
		}
		got++;
	}
	for (got = 0; got < 3;) {
		if (wait_wc(cb, &wc[got], 5000) || wc[got].status != IBV_WC_SUCCESS ||
		    wc[got].wr_id != (uint64_t)100 + got) {
			why = "the receive completions are wrong";
			goto out;
		}
		got++;
	}
	if (wc[0].opcode != IBV_WC_RECV_RDMA_WITH_IMM || ntohl(wc[0].imm_data) != 0xabc ||
	    wc[1].opcode != IBV_WC_RECV || wc[1].byte_len != 12 ||
	    wc[2].opcode != IBV_WC_RECV || wc[2].byte_len != 30 || !(wc[2].wc_flags & IBV_WC_WITH_IMM) ||
	    ntohl(wc[2].imm_data) != 0xdef)
		why = "the receive completions read wrong";
	else if (!all_bytes(dst + W, 200, 'X') || !all_bytes(dst + W + 200, WI - W - 200, 0))
		why = "the write landed wrong";
	else if (memcmp(dst + SI, "inline-bytes", 12) || !all_bytes(dst + S2, 10, 'X') ||
		 !all_bytes(dst + S2 + 10, 20, 'R'))
		why = "the sends landed wrong";
	else if (!all_bytes(dst + R, 256, 'R'))
		why = "the read landed wrong";
	memcpy(&v, dst + AT, 8);
	if (!why && v != 9)
		why = "compare-and-swap did not swap";
	memcpy(&v, dst + AT + 8, 8);
	if (!why && v != 107)
		why = "fetch-and-add did not add";
	memcpy(&v, dst + AT + 16, 8);
	if (!why && v != 5)
		why = "compare-and-swap returned the wrong value";
	memcpy(&v, dst + AT + 24, 8);
	if (!why && v != 100)
		why = "fetch-and-add returned the wrong value";
	if (why)
		goto out;

	/* In Reset: no send, no receive (EINVAL). */
	if (ibv_modify_qp(a, &ra, IBV_QP_STATE)) {
		why = "modify to Reset";
		goto out;
	}
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, ms->lkey, (uintptr_t)src, 8);
	if (ibv_wr_complete(qx) != EINVAL)
		why = "a send in Reset was not refused with EINVAL";
	else if (ibv_post_recv(a, rwr, &rbad) != EINVAL)
		why = "a receive in Reset was not refused with EINVAL";
	n = ibv_poll_cq(ca, 16, wc);
	if (!why && n != 0)
		why = "a dropped batch completed";
out:
	if (a)
		ibv_destroy_qp(a);
	if (b)
		ibv_destroy_qp(b);
	if (ca)
		ibv_destroy_cq(ca);
	if (cb)
		ibv_destroy_cq(cb);
	if (ms)
		ibv_dereg_mr(ms);
	if (md)
		ibv_dereg_mr(md);
	free(src);
	free(dst);
	return why;
}

/* raw_bind - a BIND_MW WQE written by hand (ABI 1.10 layout). */
static void raw_bind(struct ibv_qp *qp, uint64_t wr_id, uint32_t mw_key, uint32_t new_key,
		     uint32_t lkey, uint64_t addr, uint64_t len, uint32_t access)
{
	struct hicain_qp *q = to_hqp(qp);
	struct hicain_send_wqe *w = raw_wqe(q);

	w->wr_id = wr_id;
	w->opcode = HICAIN_WR_BIND_MW;
	w->send_flags = IBV_SEND_SIGNALED;
	w->rkey = mw_key;
	w->imm_data = new_key;
	w->remote_addr = addr;
	w->compare_add = len;
	w->swap = (uint64_t)access << 32 | lkey;
	raw_publish_sq(q, ++q->sq.idx);
}

/*
 * mw_case - memory windows through the provider: a type 2 window bound
 * by IBV_WR_BIND_MW grants a write inside it and refuses one past it;
 * SEND_WITH_INV frees it (the receiver's completion has IBV_WC_WITH_INV
 * and the key); a type 1 window bound by ibv_bind_mw and unbound with
 * length 0. Hand-written BIND_MW WQEs naming a window of another PD, a
 * window that does not exist, or a range past the MR complete with
 * IBV_WC_MW_BIND_ERR. No byte may land outside the windows.
 */
static const char *mw_case(struct ibv_pd *pd, struct ibv_pd *pd2, struct ibv_mr *mr_a, uint8_t *buf_a,
			   uint8_t *buf_b)
{
	struct ibv_mr *mr_w = ibv_reg_mr(pd, buf_b, BUF, IBV_ACCESS_LOCAL_WRITE |
					 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
	struct ibv_mw *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	struct ibv_mw *other = ibv_alloc_mw(pd2, IBV_MW_TYPE_2);
	struct ibv_sge sge = { .addr = (uintptr_t)buf_b + 512, .length = 64, .lkey = 0 };
	struct ibv_send_wr wr, *bad;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_mw_bind mb;
	struct ibv_device_attr da;
	struct ibv_wc wc;
	struct pair p;
	const char *why = NULL;
	uint32_t key;

	memset(buf_b, 0, BUF);
	if (!mr_w || !mw2 || !mw1 || !other)
		return "alloc";
	if (ibv_query_device(ctx, &da) || !da.max_mw ||
	    !(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B))
		return "device attributes without windows";
	if (ibv_alloc_mw(pd, 3))
		return "a type 3 window";
	sge.lkey = mr_w->lkey;
	if (make_pair(&p, pd, pd))
		return "set-up";
	key = ibv_inc_rkey(mw2->rkey);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 20;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw2;
	wr.bind_mw.rkey = key;
	wr.bind_mw.bind_info.mr = mr_w;
	wr.bind_mw.bind_info.addr = (uintptr_t)buf_b;
	wr.bind_mw.bind_info.length = 256;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (ibv_post_send(p.b, &wr, &bad) || wait_wc(p.cq_b, &wc, 5000) ||
	    wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_BIND_MW)
		why = "type 2 bind";
	else if (post_write(p.a, 21, (uintptr_t)buf_a, 64, mr_a->lkey, (uintptr_t)buf_b + 192, key) ||
		 wait_wc(p.cq_a, &wc, 5000) || wc.status != IBV_WC_SUCCESS || !all_bytes(buf_b + 192, 64, 'A'))
		why = "write inside the window";
	if (!why) {
		/* SEND_WITH_INV from a: b's receive sees the invalidation. */
		memset(&rwr, 0, sizeof(rwr));
		rwr.wr_id = 22;
		rwr.sg_list = &sge;
		rwr.num_sge = 1;
		memset(&wr, 0, sizeof(wr));
		struct ibv_sge ssge = { .addr = (uintptr_t)buf_a, .length = 16, .lkey = mr_a->lkey };
		wr.wr_id = 23;
		wr.sg_list = &ssge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND_WITH_INV;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.invalidate_rkey = key;
		if (ibv_post_recv(p.b, &rwr, &rbad) || ibv_post_send(p.a, &wr, &bad) ||
		    wait_wc(p.cq_a, &wc, 5000) || wc.status != IBV_WC_SUCCESS)
			why = "SEND_WITH_INV";
		else if (wait_wc(p.cq_b, &wc, 5000) || wc.status != IBV_WC_SUCCESS ||
			 !(wc.wc_flags & IBV_WC_WITH_INV) || wc.invalidated_rkey != key)
			why = "receive of SEND_WITH_INV without WITH_INV and the key";
		else if (post_write(p.a, 24, (uintptr_t)buf_a, 64, mr_a->lkey, (uintptr_t)buf_b, key) ||
			 wait_wc(p.cq_a, &wc, 5000) || wc.status != IBV_WC_REM_ACCESS_ERR ||
			 !all_bytes(buf_b, 64, 0))
			why = "write through the invalidated window";
	}
	free_pair(&p);
	if (!why) {
		/* Type 1: ibv_bind_mw, a write past the window refused. */
		memset(&mb, 0, sizeof(mb));
		mb.wr_id = 25;
		mb.send_flags = IBV_SEND_SIGNALED;
		mb.bind_info.mr = mr_w;
		mb.bind_info.addr = (uintptr_t)buf_b + 1024;
		mb.bind_info.length = 64;
		mb.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
		if (make_pair(&p, pd, pd) || ibv_bind_mw(p.b, mw1, &mb) || wait_wc(p.cq_b, &wc, 5000) ||
		    wc.status != IBV_WC_SUCCESS)
			why = "type 1 bind";
		else if (post_write(p.a, 26, (uintptr_t)buf_a, 64, mr_a->lkey, (uintptr_t)buf_b + 1040,
				    mw1->rkey) || wait_wc(p.cq_a, &wc, 5000) ||
			 wc.status != IBV_WC_REM_ACCESS_ERR || !all_bytes(buf_b + 1024, 128, 0))
			why = "write past a type 1 window";
		free_pair(&p);
	}
	/* Hand-written binds: each completes with MW_BIND_ERR. */
	for (int c = 0; c < 3 && !why; c++) {
		uint32_t mwk = c == 0 ? other->rkey : c == 1 ? 0xfffff000 : mw2->rkey;
		uint64_t len = c == 2 ? 2 * BUF : 64;

		if (make_pair(&p, pd, pd)) {
			why = "set-up";
			break;
		}
		raw_bind(p.b, 30 + c, mwk, ibv_inc_rkey(mwk), mr_w->lkey, (uintptr_t)buf_b, len,
			 IBV_ACCESS_REMOTE_WRITE);
		if (wait_wc(p.cq_b, &wc, 5000) || wc.status != IBV_WC_MW_BIND_ERR)
			why = c == 0 ? "bind of another PD's window" : c == 1 ? "bind of no window" :
				       "bind past the MR";
		free_pair(&p);
	}
	if (ibv_dealloc_mw(mw2) || ibv_dealloc_mw(mw1) || ibv_dealloc_mw(other))
		why = why ? why : "dealloc";
	ibv_dereg_mr(mr_w);
	return why;
}

/*
 * xrc_case - XRC through the provider and the kernel (ABI 1.11): a
 * domain, an XRC SRQ and its number, a target QP, an initiator made
 * with ibv_create_qp_ex and only IBV_QP_INIT_ATTR_PD (libibverbs takes
 * that to the provider's create_qp), a SEND from the initiator to the
 * SRQ through the target, an ibv_open_qp handle on the target, and a
 * SEND to an SRQ number that is not the domain's, which must fail
 * REM_INV_REQ_ERR. NULL, or what went wrong.
 */
static const char *xrc_case(struct ibv_pd *pd)
{
	struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD |
					 IBV_XRCD_INIT_ATTR_OFLAGS, .fd = -1, .oflags = O_CREAT };
	struct ibv_srq_init_attr_ex sa = {};
	struct ibv_qp_init_attr_ex qa = {};
	struct ibv_qp_open_attr oa = {};
	struct ibv_qp *tgt = NULL, *ini = NULL, *opened;
	struct ibv_send_wr wr = {}, *bad;
	struct ibv_recv_wr rwr = {}, *rbad;
	struct ibv_sge sge;
	struct ibv_srq *srq = NULL;
	struct ibv_xrcd *xrcd;
	struct ibv_cq *cq = NULL;
	struct ibv_mr *mr = NULL;
	struct ibv_wc wc;
	const char *why = NULL;
	uint32_t srqn = 0;
	uint8_t *buf;
	int got = 0, recv = 0;

	xrcd = ibv_open_xrcd(ctx, &xa);
	if (!xrcd)
		return "ibv_open_xrcd failed";
	buf = aligned_alloc(BUF, BUF);
	memset(buf, 'X', BUF / 2);
	memset(buf + BUF / 2, 0, BUF / 2);
	mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!mr || !cq) {
		why = "MR or CQ";
		goto out;
	}
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
		       IBV_SRQ_INIT_ATTR_CQ;
	sa.srq_type = IBV_SRQT_XRC;
	sa.pd = pd;
	sa.xrcd = xrcd;
	sa.cq = cq;
	srq = ibv_create_srq_ex(ctx, &sa);
	if (!srq || ibv_get_srq_num(srq, &srqn) || !srqn) {
		why = "XRC SRQ or its number";
		goto out;
	}
	qa.qp_type = IBV_QPT_XRC_RECV;
	qa.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	qa.xrcd = xrcd;
	tgt = ibv_create_qp_ex(ctx, &qa);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_XRC_SEND;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	qa.pd = pd;
	qa.send_cq = cq;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = 4;
	qa.cap.max_send_sge = 1;
	ini = ibv_create_qp_ex(ctx, &qa);
	if (!tgt || !ini) {
		why = !tgt ? "XRC_RECV QP" : "XRC_SEND QP (ibv_create_qp_ex, PD only)";
		goto out;
	}
	if (to_rts(tgt, ini->qp_num) || to_rts(ini, tgt->qp_num)) {
		why = "XRC QPs to RTS";
		goto out;
	}
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
	oa.qp_num = tgt->qp_num;
	oa.xrcd = xrcd;
	oa.qp_type = IBV_QPT_XRC_RECV;
	opened = ibv_open_qp(ctx, &oa);
	if (!opened || opened->qp_num != tgt->qp_num || ibv_destroy_qp(opened)) {
		why = "ibv_open_qp of the target";
		goto out;
	}
	sge.addr = (uintptr_t)(buf + BUF / 2);
	sge.length = 256;
	sge.lkey = mr->lkey;
	rwr.wr_id = 7;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	if (ibv_post_srq_recv(srq, &rwr, &rbad)) {
		why = "ibv_post_srq_recv";
		goto out;
	}
	sge.addr = (uintptr_t)buf;
	sge.length = 100;
	wr.wr_id = 8;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.qp_type.xrc.remote_srqn = srqn;
	if (ibv_post_send(ini, &wr, &bad)) {
		why = "ibv_post_send on the initiator";
		goto out;
	}
	for (got = 0; got < 2; got++) {
		if (wait_wc(cq, &wc, 5000) || wc.status != IBV_WC_SUCCESS) {
			why = "the XRC SEND did not complete";
			goto out;
		}
		if (wc.wr_id == 7)
			recv = wc.qp_num == tgt->qp_num && wc.byte_len == 100;
	}
	if (!recv || !all_bytes(buf + BUF / 2, 100, 'X')) {
		why = "the receive completion or its data";
		goto out;
	}
	wr.wr_id = 9;
	wr.qp_type.xrc.remote_srqn = srqn + 1;
	if (ibv_post_send(ini, &wr, &bad) || wait_wc(cq, &wc, 5000) ||
	    wc.wr_id != 9 || wc.status != IBV_WC_REM_INV_REQ_ERR)
		why = "a SEND to another SRQ number did not fail REM_INV_REQ_ERR";
out:
	if (ini)
		ibv_destroy_qp(ini);
	if (tgt)
		ibv_destroy_qp(tgt);
	if (srq)
		ibv_destroy_srq(srq);
	if (cq)
		ibv_destroy_cq(cq);
	if (mr)
		ibv_dereg_mr(mr);
	if (ibv_close_xrcd(xrcd) && !why)
		why = "ibv_close_xrcd";
	free(buf);
	return why;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx2;
	struct ibv_pd *pd, *pd2;
	struct ibv_mr *mr_a, *mr_b, *mr_s, *mr_r;
	uint8_t *buf_a, *buf_b, *buf_s;
	struct ibv_wc wc;
	struct pair p;
	struct hicain_qp *q;
	struct hicain_send_wqe *w;
	uint32_t k, cons;
	int i, n, st;
	pid_t pid;
	void *m;

	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argc > 1 ? argv[1] : "hicain_0"))
			ctx = ibv_open_device(list[i]);
	if (!ctx || ibv_query_gid(ctx, 1, 1, &gid)) {
		printf("BADRING-FAIL open: no device\n");
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	pd2 = ibv_alloc_pd(ctx);
	buf_a = aligned_alloc(BUF, BUF);
	buf_b = aligned_alloc(BUF, BUF);
	buf_s = aligned_alloc(BUF, BUF);
	memset(buf_a, 'A', BUF);
	memset(buf_b, 0, BUF);
	memset(buf_s, 'S', BUF);
	mr_a = ibv_reg_mr(pd, buf_a, BUF, IBV_ACCESS_LOCAL_WRITE);
	mr_b = ibv_reg_mr(pd, buf_b, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	mr_s = ibv_reg_mr(pd2, buf_s, BUF, IBV_ACCESS_LOCAL_WRITE);
	if (!pd || !pd2 || !mr_a || !mr_b || !mr_s) {
		printf("BADRING-FAIL setup: PDs and MRs\n");
		return 1;
	}

	/* control: a well-formed write through the mapped rings. */
	if (make_pair(&p, pd, pd)) {
		fail("control", "set-up");
	} else if (!to_hqp(p.a)->mapped || !to_hcq(p.cq_a)->ring.map || !to_hctx(ctx)->db) {
		fail("control", "queues not mapped");
	} else if (post_write(p.a, 1, (uintptr_t)buf_a, 64, mr_a->lkey, (uintptr_t)buf_b, mr_b->rkey) ||
		   wait_wc(p.cq_a, &wc, 5000) || wc.status != IBV_WC_SUCCESS) {
		fail("control", "the write did not complete");
	} else if (!all_bytes(buf_b, 64, 'A')) {
		fail("control", "the data did not arrive");
	} else {
		ok("control");
	}
	free_pair(&p);
	memset(buf_b, 0, BUF);

	/* lkey-other-pd: the lkey of an MR in another PD. */
	if (make_pair(&p, pd, pd) ||
	    post_write(p.a, 2, (uintptr_t)buf_s, 64, mr_s->lkey, (uintptr_t)buf_b, mr_b->rkey) ||
	    wait_wc(p.cq_a, &wc, 5000))
		fail("lkey-other-pd", "no completion");
	else if (wc.status == IBV_WC_SUCCESS || !all_bytes(buf_b, BUF, 0))
		fail("lkey-other-pd", "the other PD's bytes went out");
	else
		ok("lkey-other-pd");
	free_pair(&p);

	/* lkey-scan: every small lkey that is not this PD's, the kernel's
	 * DMA MR (IOVA = guest-physical address) and other processes'
	 * among them, as the source of a write.
	 */
	st = 0;
	for (k = 0; k < 48 && !st; k++) {
		if (k == mr_a->lkey || k == mr_b->lkey)
			continue;
		if (make_pair(&p, pd, pd) ||
		    post_write(p.a, 3, 0x100000, 64, k, (uintptr_t)buf_b, mr_b->rkey) ||
		    wait_wc(p.cq_a, &wc, 5000)) {
			fail("lkey-scan", "no completion");
			st = 1;
		} else if (wc.status == IBV_WC_SUCCESS || !all_bytes(buf_b, BUF, 0)) {
			printf("BADRING-FAIL lkey-scan: lkey %u wrote\n", k);
			failures++;
			st = 1;
		}
		free_pair(&p);
	}
	if (!st)
		ok("lkey-scan");

	/* sge-outside: the MR's lkey, a range past its end. */
	if (make_pair(&p, pd, pd) ||
	    post_write(p.a, 4, (uintptr_t)buf_a + BUF - 16, 64, mr_a->lkey, (uintptr_t)buf_b,
		       mr_b->rkey) || wait_wc(p.cq_a, &wc, 5000))
		fail("sge-outside", "no completion");
	else if (wc.status != IBV_WC_LOC_PROT_ERR || !all_bytes(buf_b, BUF, 0))
		fail("sge-outside", "not LOC_PROT_ERR, or bytes went out");
	else
		ok("sge-outside");
	free_pair(&p);

	/* opcode: a WQE with an opcode the device does not have. */
	if (make_pair(&p, pd, pd)) {
		fail("opcode", "set-up");
	} else {
		q = to_hqp(p.a);
		w = raw_wqe(q);
		w->wr_id = 5;
		w->opcode = 0xee;
		w->send_flags = IBV_SEND_SIGNALED;
		raw_publish_sq(q, ++q->sq.idx);
		st = !wait_wc(p.cq_a, &wc, 5000);
		if (!st && wait_err(p.a, 1000))
			fail("opcode", "no error completion, QP not in ERR");
		else if (st && wc.status == IBV_WC_SUCCESS)
			fail("opcode", "completed successfully");
		else
			ok("opcode");
	}
	free_pair(&p);

	fatal_case("sq-index", pd, 0);
	fatal_case("num-sge", pd, 1);
	fatal_case("inline-len", pd, 2);
	fatal_case("rq-index", pd, 3);

	/* cq-cons: a consumer index far ahead of the device's producer
	 * holds completions back; with the index put right they arrive.
	 */
	if (make_pair(&p, pd, pd)) {
		fail("cq-cons", "set-up");
	} else {
		struct hicain_cq *c = to_hcq(p.cq_a);

		cons = c->ring.idx;
		__atomic_store_n(&c->dbrec->cons, cons + 12345, __ATOMIC_RELEASE);
		if (post_write(p.a, 6, (uintptr_t)buf_a, 64, mr_a->lkey, (uintptr_t)buf_b, mr_b->rkey)) {
			fail("cq-cons", "post");
		} else {
			usleep(200000);
			__atomic_store_n(&c->dbrec->cons, cons, __ATOMIC_RELEASE);
			hicain_ring_db(to_hctx(ctx), to_hctx(ctx)->caps.db_cq);
			if (wait_wc(p.cq_a, &wc, 5000) || wc.status != IBV_WC_SUCCESS || wc.wr_id != 6)
				fail("cq-cons", "no completion after the index was put right");
			else
				ok("cq-cons");
		}
	}
	free_pair(&p);

	/* fork: the child has no mapping of the rings (VM_DONTCOPY). */
	if (make_pair(&p, pd, pd)) {
		fail("fork", "set-up");
	} else {
		q = to_hqp(p.a);
		pid = fork();
		if (pid == 0) {
			volatile uint8_t *b = q->sq.buf;

			b[0] = 1;
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid)
			fail("fork", "fork");
		else if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGSEGV)
			fail("fork", "the child wrote the parent's ring");
		else
			ok("fork");
		/* cross-context: another context cannot map these rings. */
		ctx2 = ibv_open_device(ctx->device);
		if (!ctx2) {
			fail("cross-context", "second context");
		} else {
			m = mmap(NULL, q->sq.map_len, PROT_READ | PROT_WRITE, MAP_SHARED, ctx2->cmd_fd,
				 q->sq.key);
			if (m != MAP_FAILED) {
				fail("cross-context", "another context mapped the SQ");
				munmap(m, q->sq.map_len);
			} else {
				ok("cross-context");
			}
			ibv_close_device(ctx2);
		}
	}
	free_pair(&p);

	/* resize-cq: a mapped CQ with completions in it moves to a larger
	 * ring (ibv_resize_cq); the unpolled ones come first, in order,
	 * and the CQ holds as many as its new size: 52 unpolled.
	 */
	if (make_pair(&p, pd, pd)) {
		fail("resize-cq", "set-up");
	} else {
		struct ibv_sge sge = { .addr = (uintptr_t)buf_a, .length = 8, .lkey = mr_a->lkey };
		struct ibv_send_wr wr, *bad;
		struct ibv_wc wcs[64];
		int got = 0, posted = 0, bad_order = 0;

		memset(&wr, 0, sizeof(wr));
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)buf_b;
		wr.wr.rdma.rkey = mr_b->rkey;
		for (; posted < 10; posted++) {
			wr.wr_id = posted;
			if (ibv_post_send(p.a, &wr, &bad))
				break;
		}
		usleep(300000);
		for (k = 0; k < 3 && !wait_wc(p.cq_a, &wc, 5000); k++)
			bad_order |= wc.wr_id != (uint64_t)got++;
		if (ibv_resize_cq(p.cq_a, 60) || p.cq_a->cqe < 60) {
			fail("resize-cq", "ibv_resize_cq");
		} else {
			/* 7 left from before and 45 more, none polled until the
			 * end: more than the old 16 entries hold.
			 */
			for (k = 0; posted < 55 && k < 500;) {
				wr.wr_id = posted;
				if (ibv_post_send(p.a, &wr, &bad)) {
					usleep(20000);	/* the SQ is full until the device takes WQEs */
					k++;
					continue;
				}
				posted++;
			}
			usleep(300000);
			while (got < posted && !wait_wc(p.cq_a, &wc, 5000))
				bad_order |= wc.wr_id != (uint64_t)got++ || wc.status != IBV_WC_SUCCESS;
			if (got != 55 || bad_order || ibv_poll_cq(p.cq_a, 64, wcs) != 0)
				fail("resize-cq", "completions lost, out of order or failed");
			else
				ok("resize-cq");
		}
	}
	free_pair(&p);

	/* rereg-mr: ibv_rereg_mr changes an MR in place and its keys stay
	 * (ABI 1.8 REREG_MR). Translation and access: a write through the
	 * rkey lands in the new buffer only. Access without remote write:
	 * the same rkey is refused. Another PD: QPs of the old PD no longer
	 * reach it, QPs of the new one do.
	 */
	{
		uint8_t *r1 = aligned_alloc(BUF, BUF), *r2 = aligned_alloc(BUF, BUF);
		const char *why = NULL;
		uint32_t lk, rk;

		memset(r1, 0, BUF);
		memset(r2, 0, BUF);
		memset(&p, 0, sizeof(p));
		mr_r = ibv_reg_mr(pd, r1, BUF, IBV_ACCESS_LOCAL_WRITE);
		if (!mr_r) {
			why = "reg";
			goto rereg_done;
		}
		lk = mr_r->lkey;
		rk = mr_r->rkey;
		if (ibv_rereg_mr(mr_r, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS, NULL,
				 r2, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)) {
			why = "ibv_rereg_mr translation and access";
		} else if (mr_r->lkey != lk || mr_r->rkey != rk) {
			why = "the keys changed";
		} else if (make_pair(&p, pd, pd) ||
			   post_write(p.a, 8, (uintptr_t)buf_a, 64, mr_a->lkey, (uintptr_t)r2, rk) ||
			   wait_wc(p.cq_a, &wc, 5000) || wc.status != IBV_WC_SUCCESS ||
			   !all_bytes(r2, 64, 'A') || !all_bytes(r1, BUF, 0)) {
			why = "a write to the new translation";
		}
		free_pair(&p);
		if (!why && ibv_rereg_mr(mr_r, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
					 IBV_ACCESS_LOCAL_WRITE)) {
			why = "ibv_rereg_mr access";
		} else if (!why && (make_pair(&p, pd, pd) ||
				    post_write(p.a, 9, (uintptr_t)buf_a, 64, mr_a->lkey, (uintptr_t)r2 + 64, rk) ||
				    wait_wc(p.cq_a, &wc, 5000) || wc.status == IBV_WC_SUCCESS ||
				    !all_bytes(r2 + 64, BUF - 64, 0))) {
			why = "a write without remote write access went through";
		}
		free_pair(&p);
		if (!why && ibv_rereg_mr(mr_r, IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS, pd2, NULL,
					 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)) {
			why = "ibv_rereg_mr PD";
		} else if (!why && (make_pair(&p, pd, pd) ||
				    post_write(p.a, 10, (uintptr_t)buf_a, 64, mr_a->lkey, (uintptr_t)r2 + 64, rk) ||
				    wait_wc(p.cq_a, &wc, 5000) || wc.status == IBV_WC_SUCCESS ||
				    !all_bytes(r2 + 64, BUF - 64, 0))) {
			why = "a QP of the old PD still reaches it";
		}
		free_pair(&p);
		if (!why && (make_pair(&p, pd2, pd2) ||
			     post_write(p.a, 11, (uintptr_t)buf_s, 64, mr_s->lkey, (uintptr_t)r2 + 64, rk) ||
			     wait_wc(p.cq_a, &wc, 5000) || wc.status != IBV_WC_SUCCESS ||
			     !all_bytes(r2 + 64, 64, 'S')))
			why = "a QP of the new PD does not reach it";
		free_pair(&p);
rereg_done:
		if (mr_r)
			ibv_dereg_mr(mr_r);
		free(r1);
		free(r2);
		if (why)
			fail("rereg-mr", why);
		else
			ok("rereg-mr");
	}

	/* cq-ex: extended CQs, through the poll API and every accessor of
	 * IBV_WC_STANDARD_FLAGS and both timestamps, on both sides of an
	 * RDMA WRITE with immediate; a flag the CQ does not offer is
	 * refused. The stamps are the device's nanosecond clock (the
	 * host's real time): the guest's clock agrees within a day, and
	 * ibv_query_rt_values_ex (ABI 1.17) reads that clock before and
	 * after them.
	 */
	{
		struct ibv_cq_init_attr_ex bad_attr = { .cqe = 4,
			.wc_flags = IBV_WC_EX_WITH_CVLAN };
		struct ibv_device_attr_ex dx;
		struct timespec now;
		uint64_t ts_a = 0, ts_b = 0, wall, day = 86400ULL * 1000000000ULL;
		struct ibv_values_ex rt0 = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK }, rt1 = rt0;
		struct ibv_values_ex rtbad = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK << 1 };
		struct ibv_sge sge = { .addr = (uintptr_t)buf_a, .length = 64, .lkey = mr_a->lkey };
		struct ibv_sge rsge = { .addr = (uintptr_t)buf_b, .length = 64, .lkey = mr_b->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 21, .sg_list = &rsge, .num_sge = 1 }, *rbad;
		struct ibv_send_wr wr, *bad;
		struct ibv_cq_ex *xa, *xb;
		const char *why = NULL;

		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 20;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.imm_data = htonl(0x12345678);
		wr.wr.rdma.remote_addr = (uintptr_t)buf_b;
		wr.wr.rdma.rkey = mr_b->rkey;
		if (ibv_create_cq_ex(ctx, &bad_attr) || errno != EOPNOTSUPP)
			why = "a CVLAN CQ was not refused";
		else if (ibv_query_device_ex(ctx, NULL, &dx) ||
			 dx.completion_timestamp_mask != UINT64_MAX || dx.hca_core_clock != 1000000)
			why = "query_device_ex has no nanosecond completion clock";
		else if (ibv_query_rt_values_ex(ctx, &rtbad) != EINVAL)
			why = "query_rt_values_ex took an unknown comp_mask bit";
		else if (make_pair_cq(&p, pd, pd, 1))
			why = "set-up";
		else if (ibv_query_rt_values_ex(ctx, &rt0) ||
			 rt0.comp_mask != IBV_VALUES_MASK_RAW_CLOCK || rt0.raw_clock.tv_sec != 0)
			why = "query_rt_values_ex gave no raw clock";
		else if (!to_hcq(p.cq_a)->ring.map)
			why = "the extended CQ is not mapped";
		else if (ibv_post_recv(p.b, &rwr, &rbad) || ibv_post_send(p.a, &wr, &bad))
			why = "post";
		xa = (struct ibv_cq_ex *)p.cq_a;
		xb = (struct ibv_cq_ex *)p.cq_b;
		if (!why && wait_ex(xa, 5000))
			why = "no send completion";
		else if (!why && (xa->status != IBV_WC_SUCCESS || xa->wr_id != 20 ||
				  ibv_wc_read_opcode(xa) != IBV_WC_RDMA_WRITE ||
				  ibv_wc_read_qp_num(xa) != p.a->qp_num))
			why = "the send completion reads wrong";
		else if (!why) {
			ts_a = ibv_wc_read_completion_ts(xa);
			if (ibv_wc_read_completion_wallclock_ns(xa) != ts_a)
				why = "the send completion's two stamps differ";
		}
		if (!why) {
			if (ibv_next_poll(xa) != ENOENT)
				why = "a second send completion";
			ibv_end_poll(xa);
		}
		if (!why && wait_ex(xb, 5000))
			why = "no receive completion";
		else if (!why && (xb->status != IBV_WC_SUCCESS || xb->wr_id != 21 ||
				  ibv_wc_read_opcode(xb) != IBV_WC_RECV_RDMA_WITH_IMM ||
				  ibv_wc_read_byte_len(xb) != 64 ||
				  ibv_wc_read_imm_data(xb) != htonl(0x12345678) ||
				  !(ibv_wc_read_wc_flags(xb) & IBV_WC_WITH_IMM) ||
				  ibv_wc_read_qp_num(xb) != p.b->qp_num ||
				  ibv_wc_read_src_qp(xb) != p.a->qp_num ||
				  ibv_wc_read_sl(xb) != 0 || ibv_wc_read_dlid_path_bits(xb) != 0 ||
				  ibv_wc_read_slid(xb) != 0))
			why = "the receive completion reads wrong";
		if (!why) {
			ts_b = ibv_wc_read_completion_wallclock_ns(xb);
			ibv_end_poll(xb);
			clock_gettime(CLOCK_REALTIME, &now);
			wall = (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
			if (!ts_a || !ts_b || ts_a + day < wall || ts_a > wall + day ||
			    ts_b + day < wall || ts_b > wall + day)
				why = "a completion timestamp is not the real time";
		}
		if (!why) {
			uint64_t c0 = (uint64_t)rt0.raw_clock.tv_nsec, c1 = 0;

			if (ibv_query_rt_values_ex(ctx, &rt1) || rt1.comp_mask != IBV_VALUES_MASK_RAW_CLOCK)
				why = "the second query_rt_values_ex failed";
			else
				c1 = (uint64_t)rt1.raw_clock.tv_nsec;
			if (!why && (ts_a < c0 || ts_b < c0 || ts_a > c1 || ts_b > c1))
				why = "the stamps are not between two readings of the device clock";
		}
		if (!why) {
			if (!all_bytes(buf_b, 64, 'A'))
				why = "the data did not arrive";
		}
		if (why)
			fail("cq-ex", why);
		else
			ok("cq-ex");
		free_pair(&p);
	}

	/* parent-domain: QPs, an MR and an extended CQ on a parent domain
	 * move a write; its PD cannot go before it.
	 */
	{
		struct ibv_parent_domain_init_attr pa = { .pd = pd };
		struct ibv_cq_init_attr_ex ca = { .cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS,
						  .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD };
		struct ibv_pd *par = ibv_alloc_parent_domain(ctx, &pa);
		struct ibv_mr *pm = NULL;
		struct ibv_cq_ex *pcq = NULL;
		const char *why = NULL;

		memset(&p, 0, sizeof(p));
		memset(buf_b, 0, BUF);
		ca.parent_domain = par;
		if (!par)
			why = "ibv_alloc_parent_domain";
		else if (ibv_dealloc_pd(pd) != EBUSY)
			why = "the PD under a parent domain was not EBUSY";
		else if (!(pm = ibv_reg_mr(par, buf_b, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)))
			why = "an MR on the parent domain";
		else if (!(pcq = ibv_create_cq_ex(ctx, &ca)))
			why = "an extended CQ on the parent domain";
		else if (!(p.cq_a = ibv_cq_ex_to_cq(pcq)) || !(p.cq_b = ibv_create_cq(ctx, 16, NULL, NULL, 0)) ||
			 !(p.a = new_qp(pd, p.cq_a)) || !(p.b = new_qp(par, p.cq_b)) ||
			 to_rts(p.a, p.b->qp_num) || to_rts(p.b, p.a->qp_num))
			why = "QPs on the parent domain";
		else if (post_write(p.a, 50, (uintptr_t)buf_a, 64, mr_a->lkey, (uintptr_t)buf_b, pm->rkey) ||
			 wait_wc(p.cq_a, &wc, 5000) || wc.status != IBV_WC_SUCCESS || !all_bytes(buf_b, 64, 'A'))
			why = "a write to the parent domain's MR";
		free_pair(&p);
		if (pm)
			ibv_dereg_mr(pm);
		if (par && ibv_dealloc_pd(par) && !why)
			why = "dealloc of the parent domain";
		if (why)
			fail("parent-domain", why);
		else
			ok("parent-domain");
		memset(buf_b, 0, BUF);
	}

	/* import: a second context over a dup of the uverbs file takes the
	 * PD and the MR by handle (ibv_import_device, ibv_import_pd,
	 * ibv_import_mr); its CQ is mapped through the same doorbell page,
	 * and a QP of the imported PD writes with the imported lkey into a
	 * QP of the original context. A handle the file does not hold is
	 * refused.
	 */
	{
		struct ibv_context *ictx = NULL;
		struct ibv_pd *ipd = NULL;
		struct ibv_mr *imr = NULL;
		const char *why = NULL;
		int fd = dup(ctx->cmd_fd);

		memset(&p, 0, sizeof(p));
		memset(buf_b, 0, BUF);
		if (fd < 0 || !(ictx = ibv_import_device(fd)))
			why = "ibv_import_device";
		else if (ibv_import_pd(ictx, pd->handle + 1000) || errno == 0)
			why = "a PD handle the file does not hold was imported";
		else if (!(ipd = ibv_import_pd(ictx, pd->handle)) || ipd->handle != pd->handle)
			why = "ibv_import_pd";
		else if (!(imr = ibv_import_mr(ipd, mr_a->handle)) || imr->lkey != mr_a->lkey ||
			 imr->rkey != mr_a->rkey || imr->length != mr_a->length)
			why = "ibv_import_mr";
		else if (!(p.cq_a = ibv_create_cq(ictx, 16, NULL, NULL, 0)) || !to_hcq(p.cq_a)->ring.map ||
			 !(p.cq_b = ibv_create_cq(ctx, 16, NULL, NULL, 0)) ||
			 !(p.a = new_qp(ipd, p.cq_a)) || !(p.b = new_qp(pd, p.cq_b)) ||
			 to_rts(p.a, p.b->qp_num) || to_rts(p.b, p.a->qp_num))
			why = "a mapped CQ and a QP on the imported context";
		else if (post_write(p.a, 60, (uintptr_t)buf_a, 64, imr->lkey, (uintptr_t)buf_b, mr_b->rkey) ||
			 wait_wc(p.cq_a, &wc, 5000) || wc.status != IBV_WC_SUCCESS || !all_bytes(buf_b, 64, 'A'))
			why = "a write with the imported MR";
		free_pair(&p);
		if (imr)
			ibv_unimport_mr(imr);
		if (ipd)
			ibv_unimport_pd(ipd);
		if (ictx)
			ibv_close_device(ictx);
		else if (fd >= 0)
			close(fd);
		/* The originals live on after the unimport. */
		if (!why && (make_pair(&p, pd, pd) ||
			     post_write(p.a, 61, (uintptr_t)buf_a, 64, mr_a->lkey, (uintptr_t)buf_b + 64, mr_b->rkey) ||
			     wait_wc(p.cq_a, &wc, 5000) || wc.status != IBV_WC_SUCCESS ||
			     !all_bytes(buf_b + 64, 64, 'A')))
			why = "the original PD and MR after the unimport";
		free_pair(&p);
		if (why)
			fail("import", why);
		else
			ok("import");
		memset(buf_b, 0, BUF);
	}

	/* rq-full: an RQ takes its depth of receives and no more (ENOMEM),
	 * although the device has taken them out of the ring meanwhile; a
	 * completion, once polled, makes room for one.
	 */
	{
		struct ibv_sge rs = { .addr = (uintptr_t)buf_b, .length = 64, .lkey = mr_b->lkey };
		struct ibv_recv_wr rw = { .wr_id = 40, .sg_list = &rs, .num_sge = 1 }, *rb;
		struct ibv_sge ss = { .addr = (uintptr_t)buf_a, .length = 64, .lkey = mr_a->lkey };
		struct ibv_send_wr sw = { .wr_id = 41, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *sb;
		const char *why = NULL;
		uint32_t d;

		if (make_pair(&p, pd, pd)) {
			why = "set-up";
		} else {
			d = to_hqp(p.b)->rq.depth;
			for (k = 0; k < d && !why; k++)
				if (ibv_post_recv(p.b, &rw, &rb))
					why = "a receive within the depth was refused";
			usleep(200000);	/* the device takes them out of the ring */
			if (!why && ibv_post_recv(p.b, &rw, &rb) != ENOMEM)
				why = "a receive beyond the depth was not refused with ENOMEM";
			else if (!why && (ibv_post_send(p.a, &sw, &sb) || wait_wc(p.cq_a, &wc, 5000) ||
					  wc.status != IBV_WC_SUCCESS || wait_wc(p.cq_b, &wc, 5000) ||
					  wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV))
				why = "the send";
			else if (!why && ibv_post_recv(p.b, &rw, &rb))
				why = "no room after a receive completed";
			else if (!why && ibv_post_recv(p.b, &rw, &rb) != ENOMEM)
				why = "room for two after one receive completed";
		}
		if (why)
			fail("rq-full", why);
		else
			ok("rq-full");
		free_pair(&p);
		memset(buf_b, 0, BUF);
	}

	/* qp-ex: the extended post API (qp_ex_case). */
	{
		const char *why = qp_ex_case(pd);

		if (why)
			fail("qp-ex", why);
		else
			ok("qp-ex");
	}

	/* xrc: XRC domain, SRQ and QPs (xrc_case). */
	{
		const char *why = xrc_case(pd);

		if (why)
			fail("xrc", why);
		else
			ok("xrc");
	}

	/* paged-cq: a CQ larger than one contiguous allocation (ofi_rxm's
	 * 98304 entries: a ring of 131072, 8 MiB) is mapped page by page
	 * (device ABI 1.9), next to mapped QPs, and its completions cross
	 * pages in order, before and after a resize to a larger paged ring.
	 */
	{
		struct ibv_device_attr da;
		struct ibv_cq *big = NULL;
		const char *why = NULL;
		int i;

		memset(&p, 0, sizeof(p));
		if (ibv_query_device(ctx, &da) || da.max_cqe < 131072)
			why = "the device's max_cqe is below 131072";
		else if (!(big = ibv_create_cq(ctx, 98304, NULL, NULL, 0)))
			why = "a CQ of 98304 entries";
		else if (!to_hcq(big)->ring.map || to_hcq(big)->ring.depth != 131072)
			why = "the 8 MiB CQ was not mapped";
		else if (!(p.cq_b = ibv_create_cq(ctx, 16, NULL, NULL, 0)) ||
			 !(p.a = new_qp(pd, big)) || !(p.b = new_qp(pd, p.cq_b)) ||
			 to_rts(p.a, p.b->qp_num) || to_rts(p.b, p.a->qp_num))
			why = "set-up";
		else if (!to_hqp(p.a)->mapped)
			why = "the QP was not mapped";
		for (i = 0; !why && i < 200; i++) { /* 64 CQEs a page: four pages */
			memset(buf_b, 0, 64);
			if (post_write(p.a, 1000 + i, (uintptr_t)buf_a, 64, mr_a->lkey,
				       (uintptr_t)buf_b, mr_b->rkey))
				why = "post";
			else if (wait_wc(big, &wc, 5000) || wc.status != IBV_WC_SUCCESS ||
				 wc.wr_id != (uint64_t)(1000 + i) || !all_bytes(buf_b, 64, 'A'))
				why = "a write through the paged CQ";
			/* halfway, a resize to another paged ring (16 MiB) */
			if (!why && i == 99 && (ibv_resize_cq(big, 200000) || big->cqe < 200000 ||
						!to_hcq(big)->ring.map))
				why = "a resize of the paged CQ";
		}
		if (why)
			fail("paged-cq", why);
		else
			ok("paged-cq");
		free_pair(&p);
		if (big)
			ibv_destroy_cq(big);
	}

	/* mw: memory windows (ABI 1.10). */
	{
		const char *why = mw_case(pd, pd2, mr_a, buf_a, buf_b);

		if (why)
			fail("mw", why);
		else
			ok("mw");
	}

	/* after: the device still serves this process. */
	memset(buf_b, 0, BUF);
	if (make_pair(&p, pd, pd) ||
	    post_write(p.a, 7, (uintptr_t)buf_a, BUF, mr_a->lkey, (uintptr_t)buf_b, mr_b->rkey) ||
	    wait_wc(p.cq_a, &wc, 5000) || wc.status != IBV_WC_SUCCESS || !all_bytes(buf_b, BUF, 'A'))
		fail("after", "a well-formed write failed");
	else
		ok("after");
	free_pair(&p);

	printf("BADRING-DONE failures=%d\n", failures);
	return failures;
}
