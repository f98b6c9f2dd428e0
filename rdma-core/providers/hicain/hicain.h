/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * hicain.h - the objects of the hicain provider: its context, CQs, QPs,
 * SRQs and AHs, and the mapped rings behind them (hicain_uverbs_abi.h).
 *
 * A mapped queue is shared with the device: the provider writes WQEs
 * and publishes prod with a release store, then rings the doorbell; it
 * reads a CQ's prod with an acquire load before the CQEs, and publishes
 * cons with a release store (hicain_abi.h). The device never trusts
 * what it reads there. The provider keeps its own producer and consumer
 * indices in these structs and never reads them back from the shared
 * dbrecs.
 */
#ifndef HICAIN_PROVIDER_H
#define HICAIN_PROVIDER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "verbs_private.h"
#include "hicain_abi.h"
#include "hicain_uverbs_abi.h"

struct hicain_context {
	struct verbs_context vctx;
	struct hicain_ib_alloc_ucontext_resp caps;
	void *db_page;			/* the doorbell page; NULL: not mapped */
	volatile uint32_t *db;		/* the doorbell register in it */
	bool ring_all_recv;		/* HICAIN_RECV_DOORBELL=always */
};

/*
 * A PD, or a parent domain (ibv_alloc_parent_domain) over one: the same
 * uverbs handle and device PD, and a reference on the PD, which cannot
 * go while parent domains use it.
 */
struct hicain_pd {
	struct ibv_pd ibv_pd;
	uint32_t pdn;
	struct hicain_pd *protection;	/* a parent domain's PD, or NULL */
	int parents;			/* parent domains over this PD (atomic) */
	void *pd_context;		/* a parent domain's, given back by nothing */
};

/* One mapped ring and its dbrec. */
struct hicain_ring {
	void *map;			/* NULL: the queue is not mapped */
	size_t map_len;
	uint64_t key;			/* its mmap offset on the uverbs file */
	uint8_t *buf;
	uint32_t depth;			/* power of two */
	uint32_t stride;
	uint32_t max_sge;
	uint32_t idx;			/* the provider's prod (WQ) or cons (CQ) */
};

struct hicain_cq {
	union {				/* rdma-core's struct verbs_cq */
		struct ibv_cq ibv_cq;
		struct ibv_cq_ex ibv_cq_ex;
	};
	pthread_spinlock_t lock;
	struct hicain_ring ring;	/* struct hicain_cqe */
	struct hicain_cq_dbrec *dbrec;
	uint32_t cqn;
	struct ibv_wc cur;		/* the completion start/next_poll took */
	uint64_t cur_ts;		/* its CQE's timestamp (ABI 1.12) */
	struct ibv_wc_tm_info cur_tm;	/* its tag and app_ctx (ABI 1.13) */
	struct hicain_qp *rq_qps;	/* mapped RQs completing here, under lock */
};

struct hicain_qp {
	struct verbs_qp vqp;		/* vqp.qp is the ibv_qp */
	pthread_spinlock_t sq_lock;
	pthread_spinlock_t rq_lock;
	struct hicain_ring sq;		/* send WQEs */
	struct hicain_wq_dbrec *sq_dbrec;
	struct hicain_ring rq;		/* receive WQEs; not mapped with an SRQ */
	struct hicain_wq_dbrec *rq_dbrec;
	uint32_t max_inline;
	bool mapped;
	/* The ibv_wr_* batch between wr_start and wr_complete, under
	 * sq_lock: WQEs go into the SQ from sq.idx to wr_cur, published at
	 * wr_complete; wr_err is the first error, which drops the batch.
	 */
	uint32_t wr_cur;
	int wr_err;
	/*
	 * Receives of the mapped RQ that completed (successful, in error or
	 * flushed), counted by the recv CQ's poll: the device takes WQEs
	 * out of the ring before they complete, so the ring's room alone
	 * would let more than the RQ's depth be outstanding (IBA 11.4.1.2:
	 * a post beyond it fails). Atomic: poll writes, post reads.
	 */
	uint32_t rq_done;
	struct hicain_qp *rcq_next;	/* in recv_cq's rq_qps */
};

/* The tag handles of a TM SRQ: the device's busy set covers 64. */
#define HICAIN_TM_HANDLES	64

struct hicain_srq {
	struct verbs_srq vsrq;		/* vsrq.srq is the ibv_srq */
	pthread_spinlock_t lock;
	struct hicain_ring ring;	/* receive WQEs */
	struct hicain_wq_dbrec *dbrec;
	uint32_t srqn;
	/*
	 * A tag-matching SRQ (ABI 1.13): its ops ring of struct
	 * hicain_tm_op_wqe, under lock. A handle is free when the device's
	 * busy set (ops_dbrec->busy) has it clear and the last ADD posted
	 * with it has been taken (its ops index before the device's cons):
	 * adding[] holds that index for the handles in "pending".
	 */
	struct hicain_ring ops;
	struct hicain_tm_dbrec *ops_dbrec;
	uint32_t max_num_tags;
	uint32_t max_ops;
	uint64_t pending;
	uint32_t adding[HICAIN_TM_HANDLES];
};

/*
 * A receive work queue (ibv_wq, ABI 1.16): the device's raw packet QP
 * without a send queue, its RQ mapped (posting is an RQ's).
 */
struct hicain_rwq {
	struct ibv_wq wq;
	pthread_spinlock_t lock;
	struct hicain_ring rq;
	struct hicain_wq_dbrec *dbrec;
};

struct hicain_ah {
	struct ibv_ah ibv_ah;
	uint32_t handle;		/* the device's AH */
};

#define hicain_container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

static inline struct hicain_context *to_hctx(struct ibv_context *ibctx)
{
	return hicain_container_of(ibctx, struct hicain_context, vctx.context);
}

static inline struct hicain_pd *to_hpd(struct ibv_pd *ibpd)
{
	return hicain_container_of(ibpd, struct hicain_pd, ibv_pd);
}

static inline struct hicain_cq *to_hcq(struct ibv_cq *ibcq)
{
	return hicain_container_of(ibcq, struct hicain_cq, ibv_cq);
}

static inline struct hicain_qp *to_hqp(struct ibv_qp *ibqp)
{
	return hicain_container_of(ibqp, struct hicain_qp, vqp.qp);
}

static inline struct hicain_srq *to_hsrq(struct ibv_srq *ibsrq)
{
	return hicain_container_of(ibsrq, struct hicain_srq, vsrq.srq);
}

static inline struct hicain_ah *to_hah(struct ibv_ah *ibah)
{
	return hicain_container_of(ibah, struct hicain_ah, ibv_ah);
}

/*
 * hicain_ring_db - ring the device's doorbell value v (db_qp or db_cq).
 * The release fence orders the WQEs, CQ indices and arm words written
 * before it ahead of the doorbell store; on x86-64, stores to write-back
 * memory are not reordered with a later store to the uncached doorbell
 * page, so the fence costs no instruction there.
 */
static inline void hicain_ring_db(struct hicain_context *ctx, uint32_t v)
{
	__atomic_thread_fence(__ATOMIC_RELEASE);
	*ctx->db = v;
}

#endif /* HICAIN_PROVIDER_H */
