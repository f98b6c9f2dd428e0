// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * hicain - the libibverbs provider of the HiNIC emulated RDMA NIC.
 *
 * Set-up goes through the kernel driver hicain_ib.ko (ibv_cmd_* with
 * the driver's udata, hicain_uverbs_abi.h). The data path does not: the
 * kernel maps each CQ, QP and SRQ ring of the process into it, and the
 * provider posts send and receive WQEs, polls CQEs and arms CQs in
 * those rings, in the device's formats (hicain_abi.h), ringing the
 * device's doorbell through a mapped doorbell page: no system call in
 * steady state. Completion events still come through the kernel (its
 * interrupt handler sees the device's per-CQ event count move) and the
 * completion channel. A context the kernel cannot map (the doorbell
 * page shares its page with other devices, an ABI 1.6 device), or a
 * queue too large to map, keeps the uverbs commands for that object.
 *
 * libibverbs loads the provider for the ib_devices of the hicain_net
 * PCI driver (the kernel driver has no driver_id of its own:
 * RDMA_DRIVER_UNKNOWN), whatever their name: the kernel names them
 * hicain_N, and distributions rename RDMA devices after their slot
 * (Debian's rdma-core udev rule: rocep0s4).
 */
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>

#include "hicain.h"

struct hicain_device {
	struct verbs_device vdev;
};

/* Core response, then the driver's bytes right after it (no padding:
 * the kernel writes them at exactly sizeof(core)).
 */
struct hicain_get_context_resp {
	struct ib_uverbs_get_context_resp core;
	struct hicain_ib_alloc_ucontext_resp drv;
};

struct hicain_alloc_pd_resp {
	struct ib_uverbs_alloc_pd_resp core;
	struct hicain_ib_alloc_pd_resp drv;
};

struct hicain_create_cq_resp {
	struct ib_uverbs_create_cq_resp core;
	struct hicain_ib_create_cq_resp drv;
};

struct hicain_create_cq_ex_resp {
	struct ib_uverbs_ex_create_cq_resp core;
	struct hicain_ib_create_cq_resp drv;
};

struct hicain_resize_cq_resp {
	struct ib_uverbs_resize_cq_resp core;
	struct hicain_ib_create_cq_resp drv;
};

struct hicain_create_qp_resp {
	struct ib_uverbs_create_qp_resp core;
	struct hicain_ib_create_qp_resp drv;
};

struct hicain_create_qp_ex_resp {
	struct ib_uverbs_ex_create_qp_resp core;
	struct hicain_ib_create_qp_resp drv;
};

/* An RSS QP's command: its hash in the driver data. */
struct hicain_create_qp_rss_cmd {
	struct ibv_create_qp_ex ibv_cmd;
	struct hicain_ib_create_qp_rss drv;
};

struct hicain_create_wq_resp {
	struct ib_uverbs_ex_create_wq_resp core;
	struct hicain_ib_create_wq_resp drv;
};

struct hicain_create_srq_resp {
	struct ib_uverbs_create_srq_resp core;
	struct hicain_ib_create_srq_resp drv;
};

struct hicain_create_ah_resp {
	struct ib_uverbs_create_ah_resp core;
	struct hicain_ib_create_ah_resp drv;
};

HICAIN_STATIC_ASSERT(offsetof(struct hicain_get_context_resp, drv) ==
		     sizeof(struct ib_uverbs_get_context_resp));
HICAIN_STATIC_ASSERT(sizeof(struct hicain_get_context_resp) == 8 + 48);
HICAIN_STATIC_ASSERT(offsetof(struct hicain_alloc_pd_resp, drv) ==
		     sizeof(struct ib_uverbs_alloc_pd_resp));
HICAIN_STATIC_ASSERT(sizeof(struct hicain_alloc_pd_resp) == 4 + 8);
HICAIN_STATIC_ASSERT(sizeof(struct hicain_ib_queue) == 24);
HICAIN_STATIC_ASSERT(offsetof(struct hicain_create_cq_resp, drv) ==
		     sizeof(struct ib_uverbs_create_cq_resp));
HICAIN_STATIC_ASSERT(sizeof(struct hicain_create_cq_resp) == 8 + 32);
HICAIN_STATIC_ASSERT(offsetof(struct hicain_create_cq_ex_resp, drv) ==
		     sizeof(struct ib_uverbs_ex_create_cq_resp));
HICAIN_STATIC_ASSERT(offsetof(struct hicain_resize_cq_resp, drv) ==
		     sizeof(struct ib_uverbs_resize_cq_resp));
HICAIN_STATIC_ASSERT(offsetof(struct hicain_create_qp_resp, drv) ==
		     sizeof(struct ib_uverbs_create_qp_resp));
HICAIN_STATIC_ASSERT(sizeof(struct hicain_create_qp_resp) == 32 + 64);
HICAIN_STATIC_ASSERT(offsetof(struct hicain_create_srq_resp, drv) ==
		     sizeof(struct ib_uverbs_create_srq_resp));
HICAIN_STATIC_ASSERT(sizeof(struct hicain_create_srq_resp) == 16 + 64);
HICAIN_STATIC_ASSERT(offsetof(struct hicain_create_ah_resp, drv) ==
		     sizeof(struct ib_uverbs_create_ah_resp));
HICAIN_STATIC_ASSERT(sizeof(struct hicain_create_ah_resp) == 4 + 8);
HICAIN_STATIC_ASSERT(sizeof(struct hicain_cqe) == 64);
HICAIN_STATIC_ASSERT(sizeof(struct hicain_send_wqe) == 64);
HICAIN_STATIC_ASSERT(sizeof(struct hicain_recv_wqe) == 16);
HICAIN_STATIC_ASSERT(sizeof(struct hicain_tm_op_wqe) == 64);
HICAIN_STATIC_ASSERT(sizeof(struct hicain_tm_dbrec) == 16);
HICAIN_STATIC_ASSERT(offsetof(struct hicain_cqe, tm_tag) == 40);

/* ---- mapped rings ---- */

/*
 * hicain_map_ring - map the ring q of a create response. A queue with
 * mmap_key 0 is not mapped (r->map stays NULL). The kernel gave the
 * sizes; the provider checks that the ring and the dbrec lie inside the
 * mapping before it uses them.
 */
static int hicain_map_ring(struct ibv_context *ibctx, const struct hicain_ib_queue *q,
			   uint32_t max_sge, size_t dbrec_size, struct hicain_ring *r, void **dbrec)
{
	void *m;

	memset(r, 0, sizeof(*r));
	if (!q->mmap_key)
		return 0;
	if (!q->depth || (q->depth & (q->depth - 1)) || !q->stride ||
	    (uint64_t)q->depth * q->stride > q->dbrec_off ||
	    (uint64_t)q->dbrec_off + dbrec_size > q->mmap_len)
		return EINVAL;
	m = mmap(NULL, q->mmap_len, PROT_READ | PROT_WRITE, MAP_SHARED, ibctx->cmd_fd,
		 q->mmap_key);
	if (m == MAP_FAILED)
		return errno;
	r->map = m;
	r->map_len = q->mmap_len;
	r->key = q->mmap_key;
	r->buf = m;
	r->depth = q->depth;
	r->stride = q->stride;
	r->max_sge = max_sge;
	*dbrec = (uint8_t *)m + q->dbrec_off;
	return 0;
}

static void hicain_unmap_ring(struct hicain_ring *r)
{
	if (r->map)
		munmap(r->map, r->map_len);
	r->map = NULL;
}

static inline uint32_t hicain_load_acquire(const __le32 *p)
{
	return le32toh(__atomic_load_n(p, __ATOMIC_ACQUIRE));
}

static inline void hicain_store_release(__le32 *p, uint32_t v)
{
	__atomic_store_n(p, htole32(v), __ATOMIC_RELEASE);
}

static int hicain_query_device_ex(struct ibv_context *context,
				  const struct ibv_query_device_ex_input *input,
				  struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw;
	int ret;

	ret = ibv_cmd_query_device_any(context, input, attr, attr_size, &resp, &resp_size);
	if (ret)
		return ret;
	fw = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver), "%u.%u.%u",
		 (unsigned int)(fw >> 32) & 0xffff, (unsigned int)(fw >> 16) & 0xffff,
		 (unsigned int)fw & 0xffff);
	return 0;
}

static int hicain_query_port(struct ibv_context *context, uint8_t port,
			     struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd;

	return ibv_cmd_query_port(context, port, attr, &cmd, sizeof(cmd));
}

static struct ibv_pd *hicain_alloc_pd(struct ibv_context *context)
{
	struct hicain_alloc_pd_resp resp = {};
	struct ibv_alloc_pd cmd;
	struct hicain_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_alloc_pd(context, &pd->ibv_pd, &cmd, sizeof(cmd), &resp.core, sizeof(resp));
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	pd->pdn = resp.drv.pdn;
	return &pd->ibv_pd;
}

/*
 * hicain_alloc_parent_domain - a parent domain over attr->pd: a PD as
 * far as every verb goes (libibverbs' ibv_initialize_parent_domain: the
 * same context and uverbs handle), which QPs, SRQs, AHs, MRs and
 * extended CQs take. Its allocators are accepted and never called: the
 * provider allocates no queue memory of its own (the rings are the
 * kernel's, mapped). No thread domains are offered (ibv_alloc_td is
 * EOPNOTSUPP), so attr->td must be NULL.
 */
static struct ibv_pd *hicain_alloc_parent_domain(struct ibv_context *context,
						 struct ibv_parent_domain_init_attr *attr)
{
	struct hicain_pd *pd, *prot;

	if (!attr->pd || attr->pd->context != context || to_hpd(attr->pd)->protection) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->td || (attr->comp_mask & ~(uint32_t)(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
						       IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	prot = to_hpd(attr->pd);
	pd->ibv_pd.context = context;
	pd->ibv_pd.handle = attr->pd->handle;
	pd->pdn = prot->pdn;
	pd->protection = prot;
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = attr->pd_context;
	__atomic_add_fetch(&prot->parents, 1, __ATOMIC_RELAXED);
	return &pd->ibv_pd;
}

static int hicain_dealloc_pd(struct ibv_pd *ibpd)
{
	struct hicain_pd *pd = to_hpd(ibpd);
	int ret;

	if (pd->protection) {
		__atomic_sub_fetch(&pd->protection->parents, 1, __ATOMIC_RELAXED);
		free(pd);
		return 0;
	}
	if (__atomic_load_n(&pd->parents, __ATOMIC_RELAXED))
		return EBUSY;
	ret = ibv_cmd_dealloc_pd(ibpd);
	if (ret)
		return ret;
	free(to_hpd(ibpd));
	return 0;
}

/* hicain_ioctl - one uverbs ioctl method with n attributes. */
static int hicain_ioctl(int cmd_fd, uint16_t object, uint16_t method,
			struct ib_uverbs_attr *attrs, unsigned int n)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[4];
	} buf;

	if (n > 4)
		return EINVAL;
	memset(&buf, 0, sizeof(buf));
	buf.hdr.length = sizeof(buf.hdr) + n * sizeof(buf.attrs[0]);
	buf.hdr.object_id = object;
	buf.hdr.method_id = method;
	buf.hdr.num_attrs = n;
	buf.hdr.driver_id = RDMA_DRIVER_UNKNOWN;
	memcpy(buf.attrs, attrs, n * sizeof(*attrs));
	if (ioctl(cmd_fd, RDMA_VERBS_IOCTL, &buf.hdr))
		return errno;
	memcpy(attrs, buf.attrs, n * sizeof(*attrs));
	return 0;
}

/*
 * hicain_import_pd - ibv_import_pd: a PD of the context's file, by
 * handle; hicain_ib's PD_QUERY checks that the file holds it and gives
 * its number. unimport forgets it and leaves the kernel object alone.
 */
static struct ibv_pd *hicain_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	struct hicain_pd *pd;
	uint32_t pdn = 0;
	struct ib_uverbs_attr a[2] = {
		{ .attr_id = HICAIN_IB_ATTR_QUERY_PD_HANDLE, .flags = UVERBS_ATTR_F_MANDATORY,
		  .data = pd_handle },
		{ .attr_id = HICAIN_IB_ATTR_QUERY_PD_RESP_PDN, .len = sizeof(pdn),
		  .flags = UVERBS_ATTR_F_MANDATORY, .data = (uintptr_t)&pdn },
	};
	int ret;

	ret = hicain_ioctl(context->cmd_fd, UVERBS_OBJECT_PD, HICAIN_IB_METHOD_PD_QUERY, a, 2);
	if (ret) {
		errno = ret;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->ibv_pd.context = context;
	pd->ibv_pd.handle = pd_handle;
	pd->pdn = pdn;
	return &pd->ibv_pd;
}

static void hicain_unimport_pd(struct ibv_pd *ibpd)
{
	free(to_hpd(ibpd));
}

/* hicain_import_mr - ibv_import_mr: the keys and length of an MR of the
 * PD's file (QUERY_MR); its address is not known (NULL).
 */
static struct ibv_mr *hicain_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	struct verbs_mr *vmr = calloc(1, sizeof(*vmr));
	int ret = vmr ? ibv_cmd_query_mr(pd, vmr, mr_handle) : ENOMEM;

	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

static void hicain_unimport_mr(struct ibv_mr *mr)
{
	free(mr);
}

/* ---- memory windows (ABI 1.10) ---- */

/*
 * hicain_made - obj, an object a create command of the kernel filled,
 * when the command's ret is 0; otherwise obj is freed, errno is ret and
 * the result is NULL. hicain_gone is the destroy side: it frees obj once
 * the kernel destroyed it and returns ret.
 */
static void *hicain_made(void *obj, int ret)
{
	if (!ret)
		return obj;
	free(obj);
	errno = ret;
	return NULL;
}

static int hicain_gone(void *obj, int ret)
{
	if (!ret)
		free(obj);
	return ret;
}

static struct ibv_mw *hicain_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ib_uverbs_alloc_mw_resp resp = {};
	struct ibv_alloc_mw cmd = {};
	struct ibv_mw *mw;

	mw = calloc(1, sizeof(*mw));
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	return hicain_made(mw, ibv_cmd_alloc_mw(pd, type, mw, &cmd, sizeof(cmd), &resp, sizeof(resp)));
}

static int hicain_dealloc_mw(struct ibv_mw *mw)
{
	return hicain_gone(mw, ibv_cmd_dealloc_mw(mw));
}

static int hicain_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			    struct ibv_send_wr **bad_wr);

/*
 * hicain_bind_mw - ibv_bind_mw (type 1; libibverbs refuses type 2): a
 * BIND_MW WQE with the next R_Key (ibv_inc_rkey), which the window
 * takes at once, as rxe does; a bind that completes with an error
 * leaves the device's window as it was, and the caller must restore
 * mw->rkey (the verbs' rule).
 */
static int hicain_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind)
{
	struct ibv_send_wr wr = {}, *bad;
	int ret;

	if (mw_bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED)
		return EINVAL;
	if (!to_hqp(qp)->mapped)
		return EOPNOTSUPP;	/* the kernel's post_send has no binds */
	wr.wr_id = mw_bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = mw_bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = mw_bind->bind_info;
	ret = hicain_post_send(qp, &wr, &bad);
	if (ret)
		return ret;
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}

static struct ibv_mr *hicain_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
				    uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_reg_mr(pd, addr, length, hca_va, access, vmr, &cmd, sizeof(cmd), &resp,
			     sizeof(resp));
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

/*
 * hicain_rereg_mr - ibv_rereg_mr through the kernel: a device of ABI 1.8
 * changes the MR in place and the keys stay; an older one registers it
 * anew. Either way the keys of the response are the MR's now
 * (ibv_cmd_rereg_mr stores them).
 */
static int hicain_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr,
			   size_t length, int access)
{
	struct ib_uverbs_rereg_mr_resp resp;
	struct ibv_rereg_mr cmd;

	if (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED)
		return EOPNOTSUPP;
	return ibv_cmd_rereg_mr(vmr, flags, addr, length, (uintptr_t)addr, access, pd, &cmd,
				sizeof(cmd), &resp, sizeof(resp));
}

static int hicain_dereg_mr(struct verbs_mr *vmr)
{
	int ret;

	ret = ibv_cmd_dereg_mr(vmr);
	if (ret)
		return ret;
	free(vmr);
	return 0;
}

/* ---- completion queues ---- */

static struct ibv_cq *hicain_create_cq(struct ibv_context *context, int cqe,
				       struct ibv_comp_channel *channel, int comp_vector)
{
	struct hicain_create_cq_resp resp = {};
	struct ibv_create_cq cmd;
	struct hicain_cq *cq;
	void *dbrec = NULL;
	int ret;

	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_create_cq(context, cqe, channel, comp_vector, &cq->ibv_cq, &cmd, sizeof(cmd),
				&resp.core, sizeof(resp));
	if (ret) {
		free(cq);
		errno = ret;
		return NULL;
	}
	ret = hicain_map_ring(context, &resp.drv.cq, 0, sizeof(struct hicain_cq_dbrec), &cq->ring,
			      &dbrec);
	if (ret) {
		ibv_cmd_destroy_cq(&cq->ibv_cq);
		free(cq);
		errno = ret;
		return NULL;
	}
	cq->dbrec = dbrec;
	cq->cqn = resp.drv.cqn;
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	return &cq->ibv_cq;
}

static int hicain_destroy_cq(struct ibv_cq *ibcq)
{
	struct hicain_cq *cq = to_hcq(ibcq);
	int ret;

	ret = ibv_cmd_destroy_cq(ibcq);
	if (ret)
		return ret;
	hicain_unmap_ring(&cq->ring);
	pthread_spin_destroy(&cq->lock);
	free(cq);
	return 0;
}

/*
 * hicain_resize_cq - a mapped CQ moves to a new ring (the kernel's
 * resize_cq, RESIZE_CQ in the device): under the CQ's lock, so that no
 * poll runs meanwhile; the device copied the unpolled completions to
 * the new ring's first entries, so polling goes on there from 0. A CQ
 * on the system-call path is not resized (EOPNOTSUPP from the kernel).
 */
static int hicain_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct hicain_cq *cq = to_hcq(ibcq);
	struct hicain_resize_cq_resp resp = {};
	struct ibv_resize_cq cmd;
	struct hicain_ring nr, old;
	void *dbrec = NULL;
	int ret;

	if (!cq->ring.map)
		return EOPNOTSUPP;
	pthread_spin_lock(&cq->lock);
	ret = ibv_cmd_resize_cq(ibcq, cqe, &cmd, sizeof(cmd), &resp.core, sizeof(resp));
	if (!ret)
		ret = hicain_map_ring(ibcq->context, &resp.drv.cq, 0, sizeof(struct hicain_cq_dbrec),
				      &nr, &dbrec);
	if (!ret && !nr.map)
		ret = EINVAL;
	if (!ret) {
		/* The old ring is dead to the device already. */
		old = cq->ring;
		cq->ring = nr;
		cq->dbrec = dbrec;
		hicain_unmap_ring(&old);
	}
	pthread_spin_unlock(&cq->lock);
	return ret;
}

/* CQE rsvd[3] (its last byte) of an entry hicain_cq_clean took out: poll skips it. */
#define HICAIN_CQE_SKIP	0xff

static bool hicain_wc_is_tm(uint32_t opcode)
{
	return opcode >= IBV_WC_TM_ADD && opcode <= IBV_WC_TM_NO_TAG;
}

static void hicain_cqe_to_wc(const struct hicain_cqe *c, struct ibv_wc *wc)
{
	/* The CQE fields carry ibv_wc's values; the immediate data is
	 * ibv_wc.imm_data's bits.
	 */
	wc->wr_id = le64toh(c->wr_id);
	wc->status = le32toh(c->status);
	wc->opcode = le32toh(c->opcode);
	wc->vendor_err = le32toh(c->vendor_err);
	wc->byte_len = le32toh(c->byte_len);
	memcpy(&wc->imm_data, &c->imm_data, sizeof(wc->imm_data));
	wc->qp_num = le32toh(c->qp_num);
	wc->src_qp = le32toh(c->src_qp);
	wc->wc_flags = le32toh(c->wc_flags);
	if (hicain_wc_is_tm(wc->opcode)) {
		/* ABI 1.13: tm_tag is where the UD fields are. */
		wc->pkey_index = 0;
		wc->slid = 0;
		wc->sl = 0;
		wc->dlid_path_bits = 0;
		return;
	}
	wc->pkey_index = le16toh(c->pkey_index);
	wc->slid = le16toh(c->slid);
	wc->sl = c->sl;
	wc->dlid_path_bits = c->dlid_path_bits;
}

/*
 * hicain_cq_count_recv - count the receive completions of wc[0..n) to
 * their QPs' rq_done; under cq->lock. A count never passes the QP's
 * posts: completions of receives a Reset dropped (modify_qp forgets
 * those) may still come.
 */
static void hicain_cq_count_recv(struct hicain_cq *cq, const struct ibv_wc *wc, int n)
{
	struct hicain_qp *qp;
	uint32_t done;
	int i;

	if (!cq->rq_qps)
		return;
	for (i = 0; i < n; i++) {
		if (!(wc[i].opcode & IBV_WC_RECV))
			continue;
		for (qp = cq->rq_qps; qp; qp = qp->rcq_next) {
			if (qp->vqp.qp.qp_num != wc[i].qp_num)
				continue;
			done = __atomic_load_n(&qp->rq_done, __ATOMIC_RELAXED);
			if (done != __atomic_load_n(&qp->rq.idx, __ATOMIC_RELAXED))
				__atomic_store_n(&qp->rq_done, done + 1, __ATOMIC_RELAXED);
			break;
		}
	}
}

/*
 * hicain_poll_cq - the CQEs up to the device's prod (acquire), then cons
 * handed back (release). When the ring was full the device holds
 * completions back until it sees the room: the CQ doorbell tells it.
 */
static int hicain_poll_cq_ts(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc, uint64_t *ts,
			     struct ibv_wc_tm_info *tm)
{
	struct hicain_cq *cq = to_hcq(ibcq);
	struct hicain_context *ctx;
	uint32_t prod, start;
	int n = 0;

	if (!cq->ring.map) {
		n = ibv_cmd_poll_cq(ibcq, ne, wc);
		if (n > 0) {
			pthread_spin_lock(&cq->lock);
			hicain_cq_count_recv(cq, wc, n);
			pthread_spin_unlock(&cq->lock);
		}
		return n;
	}
	pthread_spin_lock(&cq->lock);
	prod = hicain_load_acquire(&cq->dbrec->prod);
	/* An index beyond the ring is the device's bug: take nothing. */
	if (prod - cq->ring.idx > cq->ring.depth)
		prod = cq->ring.idx;
	start = cq->ring.idx;
	while (n < ne && cq->ring.idx != prod) {
		const struct hicain_cqe *c = (const struct hicain_cqe *)
			(cq->ring.buf + (size_t)(cq->ring.idx & (cq->ring.depth - 1)) * 64);

		cq->ring.idx++;
		if (c->rsvd[3] == HICAIN_CQE_SKIP)
			continue;
		if (ts)
			ts[n] = le64toh(c->timestamp);
		if (tm) {
			tm[n].tag = 0;
			tm[n].priv = 0;
			if (hicain_wc_is_tm(le32toh(c->opcode))) {
				tm[n].tag = le64toh(c->tm_tag);
				tm[n].priv = le32toh(c->imm_data);
			}
		}
		hicain_cqe_to_wc(c, &wc[n++]);
	}
	hicain_cq_count_recv(cq, wc, n);
	if (cq->ring.idx != start) {
		hicain_store_release(&cq->dbrec->cons, cq->ring.idx);
		if (prod - start == cq->ring.depth) {
			ctx = to_hctx(ibcq->context);
			hicain_ring_db(ctx, ctx->caps.db_cq);
		}
	}
	pthread_spin_unlock(&cq->lock);
	return n;
}

static int hicain_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	return hicain_poll_cq_ts(ibcq, ne, wc, NULL, NULL);
}

/*
 * hicain_req_notify_cq - arm the CQ for its next (or next solicited)
 * completion, then ring the CQ doorbell so that completions already in
 * the ring raise the event too. The kernel's interrupt handler sees the
 * device's event count move and signals the completion channel.
 */
static int hicain_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct hicain_cq *cq = to_hcq(ibcq);
	struct hicain_context *ctx;

	if (!cq->ring.map)
		return ibv_cmd_req_notify_cq(ibcq, solicited_only);
	ctx = to_hctx(ibcq->context);
	hicain_store_release(&cq->dbrec->arm,
			     solicited_only ? HICAIN_CQ_ARM_SOLICITED : HICAIN_CQ_ARM_NEXT);
	hicain_ring_db(ctx, ctx->caps.db_cq);
	return 0;
}

/*
 * hicain_cq_clean - take the completions of a destroyed QP out of a
 * mapped CQ that the process has not polled yet, as the kernel's
 * poll_cq drops those of QPs it no longer knows.
 */
static void hicain_cq_clean(struct ibv_cq *ibcq, uint32_t qpn)
{
	struct hicain_cq *cq;
	uint32_t prod, i;

	if (!ibcq)
		return;
	cq = to_hcq(ibcq);
	if (!cq->ring.map)
		return;
	pthread_spin_lock(&cq->lock);
	prod = hicain_load_acquire(&cq->dbrec->prod);
	if (prod - cq->ring.idx <= cq->ring.depth) {
		for (i = cq->ring.idx; i != prod; i++) {
			struct hicain_cqe *c = (struct hicain_cqe *)
				(cq->ring.buf + (size_t)(i & (cq->ring.depth - 1)) * 64);

			if (le32toh(c->qp_num) == qpn)
				c->rsvd[3] = HICAIN_CQE_SKIP;
		}
	}
	pthread_spin_unlock(&cq->lock);
}

/* ---- extended CQs ---- */

/*
 * The extended poll API (ibv_start_poll, ibv_next_poll, ibv_end_poll and
 * the ibv_wc_read_* accessors) over the same rings: start and next take
 * one completion with hicain_poll_cq into cq->cur (the mapped ring, or
 * the uverbs command for a CQ the kernel polls), the accessors read it.
 * No lock is held between start_poll and end_poll.
 */
static inline struct hicain_cq *cqx_to_hcq(struct ibv_cq_ex *cqx)
{
	return hicain_container_of(cqx, struct hicain_cq, ibv_cq_ex);
}

static int hicain_cqx_next(struct ibv_cq_ex *cqx)
{
	struct hicain_cq *cq = cqx_to_hcq(cqx);
	int n;

	n = hicain_poll_cq_ts(&cq->ibv_cq, 1, &cq->cur, &cq->cur_ts, &cq->cur_tm);
	if (n < 0)
		return EINVAL;
	if (n == 0)
		return ENOENT;
	cqx->status = cq->cur.status;
	cqx->wr_id = cq->cur.wr_id;
	return 0;
}

static int hicain_cqx_start(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	if (attr->comp_mask)
		return EINVAL;
	return hicain_cqx_next(cqx);
}

static void hicain_cqx_end(struct ibv_cq_ex *cqx)
{
}

static enum ibv_wc_opcode hicain_cqx_opcode(struct ibv_cq_ex *cqx)
{
	return cqx_to_hcq(cqx)->cur.opcode;
}

static uint32_t hicain_cqx_vendor_err(struct ibv_cq_ex *cqx)
{
	return cqx_to_hcq(cqx)->cur.vendor_err;
}

static uint32_t hicain_cqx_byte_len(struct ibv_cq_ex *cqx)
{
	return cqx_to_hcq(cqx)->cur.byte_len;
}

static __be32 hicain_cqx_imm_data(struct ibv_cq_ex *cqx)
{
	return cqx_to_hcq(cqx)->cur.imm_data;
}

static uint32_t hicain_cqx_qp_num(struct ibv_cq_ex *cqx)
{
	return cqx_to_hcq(cqx)->cur.qp_num;
}

static uint32_t hicain_cqx_src_qp(struct ibv_cq_ex *cqx)
{
	return cqx_to_hcq(cqx)->cur.src_qp;
}

static unsigned int hicain_cqx_wc_flags(struct ibv_cq_ex *cqx)
{
	return cqx_to_hcq(cqx)->cur.wc_flags;
}

static uint32_t hicain_cqx_slid(struct ibv_cq_ex *cqx)
{
	return cqx_to_hcq(cqx)->cur.slid;
}

static uint8_t hicain_cqx_sl(struct ibv_cq_ex *cqx)
{
	return cqx_to_hcq(cqx)->cur.sl;
}

static uint8_t hicain_cqx_dlid_path_bits(struct ibv_cq_ex *cqx)
{
	return cqx_to_hcq(cqx)->cur.dlid_path_bits;
}

/*
 * The device's clock (ABI 1.12) counts nanoseconds of the host's real
 * time, so the free-running stamp (hca_core_clock 1 GHz) and the wall
 * clock are the same number.
 */
static uint64_t hicain_cqx_ts(struct ibv_cq_ex *cqx)
{
	return cqx_to_hcq(cqx)->cur_ts;
}

/*
 * hicain_query_rt_values - ibv_query_rt_values_ex: the device clock now
 * (hicain_ib's QUERY_CLOCK, ABI 1.17), the clock completions are
 * stamped with. As other providers do, raw_clock holds the raw count of
 * hca_core_clock ticks in tv_nsec with tv_sec 0; a tick is 1 ns here.
 */
static int hicain_query_rt_values(struct ibv_context *context, struct ibv_values_ex *values)
{
	uint64_t ns = 0;
	struct ib_uverbs_attr a[] = {
		{ .attr_id = HICAIN_IB_ATTR_QUERY_CLOCK_NS, .len = sizeof(ns),
		  .flags = UVERBS_ATTR_F_MANDATORY, .data = (uintptr_t)&ns },
	};
	uint32_t done = 0;
	int ret = 0;

	if (values->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		ret = hicain_ioctl(context->cmd_fd, UVERBS_OBJECT_DEVICE, HICAIN_IB_METHOD_QUERY_CLOCK,
				   a, 1);
		if (ret == EPROTONOSUPPORT)
			ret = EOPNOTSUPP;	/* a hicain_ib without the method */
		if (!ret) {
			values->raw_clock.tv_sec = 0;
			values->raw_clock.tv_nsec = ns;
			done |= IBV_VALUES_MASK_RAW_CLOCK;
		}
	}
	values->comp_mask = done;
	return ret;
}

/* ABI 1.13: the TMH tag and app_ctx of a TM completion (0 for others). */
static void hicain_cqx_tm_info(struct ibv_cq_ex *cqx, struct ibv_wc_tm_info *tm_info)
{
	*tm_info = cqx_to_hcq(cqx)->cur_tm;
}

#define HICAIN_WC_TS_FLAGS \
	(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

/*
 * hicain_create_cq_ex - ibv_create_cq_ex: the fields of ibv_wc
 * (IBV_WC_STANDARD_FLAGS) and, on a device that stamps its CQEs
 * (HICAIN_CAP_CQE_TS), both completion timestamps; also for a parent
 * domain (IBV_CQ_INIT_ATTR_MASK_PD, which must be one); on a device with
 * tag matching (ABI 1.13, HICAIN_CAP_TM) the TM info of its completions.
 * CVLAN and flow tags are not offered, nor IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN.
 * SINGLE_THREADED is a hint the CQ takes without change.
 */
static struct ibv_cq_ex *hicain_create_cq_ex(struct ibv_context *context,
					     struct ibv_cq_init_attr_ex *attr)
{
	struct hicain_create_cq_ex_resp resp = {};
	struct ibv_create_cq_ex cmd;
	struct ibv_cq_ex *cqx;
	struct hicain_cq *cq;
	void *dbrec = NULL;
	int ret;

	/* A parent domain may come along; a PD that is none is wrong. */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    (!attr->parent_domain || attr->parent_domain->context != context ||
	     !to_hpd(attr->parent_domain)->protection)) {
		errno = EINVAL;
		return NULL;
	}
	uint64_t wc_ok = IBV_WC_STANDARD_FLAGS;

	if (to_hctx(context)->caps.dev_caps & HICAIN_CAP_CQE_TS)
		wc_ok |= HICAIN_WC_TS_FLAGS;
	if (to_hctx(context)->caps.dev_caps & HICAIN_CAP_TM)
		wc_ok |= IBV_WC_EX_WITH_TM_INFO;
	if ((attr->wc_flags & ~wc_ok) ||
	    (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	     (attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	cqx = &cq->ibv_cq_ex;
	ret = ibv_cmd_create_cq_ex(context, attr, cqx, &cmd, sizeof(cmd), &resp.core, sizeof(resp), 0);
	if (ret) {
		free(cq);
		errno = ret;
		return NULL;
	}
	ret = hicain_map_ring(context, &resp.drv.cq, 0, sizeof(struct hicain_cq_dbrec), &cq->ring,
			      &dbrec);
	/* The kernel's poll_cq fallback has no stamps or tags to give. */
	if (!ret && !cq->ring.map && (attr->wc_flags & (HICAIN_WC_TS_FLAGS | IBV_WC_EX_WITH_TM_INFO)))
		ret = EOPNOTSUPP;
	if (ret) {
		hicain_unmap_ring(&cq->ring);
		ibv_cmd_destroy_cq(&cq->ibv_cq);
		free(cq);
		errno = ret;
		return NULL;
	}
	cq->dbrec = dbrec;
	cq->cqn = resp.drv.cqn;
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	cqx->start_poll = hicain_cqx_start;
	cqx->next_poll = hicain_cqx_next;
	cqx->end_poll = hicain_cqx_end;
	cqx->read_opcode = hicain_cqx_opcode;
	cqx->read_vendor_err = hicain_cqx_vendor_err;
	cqx->read_wc_flags = hicain_cqx_wc_flags;
	if (attr->wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		cqx->read_byte_len = hicain_cqx_byte_len;
	if (attr->wc_flags & IBV_WC_EX_WITH_IMM)
		cqx->read_imm_data = hicain_cqx_imm_data;
	if (attr->wc_flags & IBV_WC_EX_WITH_QP_NUM)
		cqx->read_qp_num = hicain_cqx_qp_num;
	if (attr->wc_flags & IBV_WC_EX_WITH_SRC_QP)
		cqx->read_src_qp = hicain_cqx_src_qp;
	if (attr->wc_flags & IBV_WC_EX_WITH_SLID)
		cqx->read_slid = hicain_cqx_slid;
	if (attr->wc_flags & IBV_WC_EX_WITH_SL)
		cqx->read_sl = hicain_cqx_sl;
	if (attr->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		cqx->read_dlid_path_bits = hicain_cqx_dlid_path_bits;
	if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		cqx->read_completion_ts = hicain_cqx_ts;
	if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		cqx->read_completion_wallclock_ns = hicain_cqx_ts;
	if (attr->wc_flags & IBV_WC_EX_WITH_TM_INFO)
		cqx->read_tm_info = hicain_cqx_tm_info;
	return cqx;
}

/* ---- queue pairs ---- */

/*
 * hicain_qp_map - map the SQ and RQ of a created QP (resp) and take its
 * limits. On an error the rings are unmapped again; the caller destroys
 * the QP.
 */
static int hicain_qp_map(struct ibv_context *ibctx, struct hicain_qp *qp, bool srq,
			 const struct hicain_create_qp_resp *resp)
{
	void *dbrec = NULL;
	int ret;

	ret = hicain_map_ring(ibctx, &resp->drv.sq, resp->drv.max_send_sge,
			      sizeof(struct hicain_wq_dbrec), &qp->sq, &dbrec);
	qp->sq_dbrec = dbrec;
	if (!ret && qp->sq.map && !srq) {
		ret = hicain_map_ring(ibctx, &resp->drv.rq, resp->drv.max_recv_sge,
				      sizeof(struct hicain_wq_dbrec), &qp->rq, &dbrec);
		qp->rq_dbrec = dbrec;
		if (!ret && !qp->rq.map)
			ret = EINVAL;	/* the kernel maps both or neither */
	}
	if (!ret && qp->sq.map && qp->sq.stride < sizeof(struct hicain_send_wqe) +
	    (uint64_t)qp->sq.max_sge * sizeof(struct hicain_sge))
		ret = EINVAL;
	if (ret) {
		hicain_unmap_ring(&qp->sq);
		hicain_unmap_ring(&qp->rq);
		return ret;
	}
	qp->mapped = qp->sq.map;
	qp->max_inline = resp->drv.max_inline;
	if (qp->mapped && qp->max_inline > qp->sq.stride - sizeof(struct hicain_send_wqe))
		qp->max_inline = qp->sq.stride - sizeof(struct hicain_send_wqe);
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
	if (qp->rq.map && qp->vqp.qp.recv_cq) {
		struct hicain_cq *rcq = to_hcq(qp->vqp.qp.recv_cq);

		pthread_spin_lock(&rcq->lock);
		qp->rcq_next = rcq->rq_qps;
		rcq->rq_qps = qp;
		pthread_spin_unlock(&rcq->lock);
	}
	return 0;
}

/* hicain_qp_untrack - take a QP out of its recv CQ's rq_qps. */
static void hicain_qp_untrack(struct hicain_qp *qp)
{
	struct hicain_cq *rcq;
	struct hicain_qp **pp;

	if (!qp->rq.map || !qp->vqp.qp.recv_cq)
		return;
	rcq = to_hcq(qp->vqp.qp.recv_cq);
	pthread_spin_lock(&rcq->lock);
	for (pp = &rcq->rq_qps; *pp; pp = &(*pp)->rcq_next) {
		if (*pp == qp) {
			*pp = qp->rcq_next;
			break;
		}
	}
	pthread_spin_unlock(&rcq->lock);
}

static struct ibv_qp *hicain_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct hicain_create_qp_resp resp = {};
	struct ibv_create_qp cmd;
	struct hicain_qp *qp;
	int ret;

	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_create_qp(pd, &qp->vqp.qp, attr, &cmd, sizeof(cmd), &resp.core, sizeof(resp));
	if (ret) {
		free(qp);
		errno = ret;
		return NULL;
	}
	/* ibv_create_qp_ex with only IBV_QP_INIT_ATTR_PD comes here too,
	 * XRC initiators included: those have no RQ.
	 */
	ret = hicain_qp_map(pd->context, qp, attr->srq || attr->qp_type == IBV_QPT_XRC_SEND,
			    &resp);
	if (ret) {
		ibv_cmd_destroy_qp(&qp->vqp.qp);
		free(qp);
		errno = ret;
		return NULL;
	}
	return &qp->vqp.qp;
}

/*
 * A QP that enters Reset drops its receives (none is outstanding), and
 * its completions still in mapped CQs go, as mlx5's provider cleans
 * them: a restarted QP's first poll must not find its old flushes.
 */
static int hicain_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct hicain_qp *qp = to_hqp(ibqp);
	struct ibv_modify_qp cmd;
	int ret;

	ret = ibv_cmd_modify_qp(ibqp, attr, attr_mask, &cmd, sizeof(cmd));
	if (!ret && (attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET && qp->rq.map) {
		pthread_spin_lock(&qp->rq_lock);
		__atomic_store_n(&qp->rq_done, qp->rq.idx, __ATOMIC_RELAXED);
		pthread_spin_unlock(&qp->rq_lock);
	}
	if (!ret && (attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET) {
		hicain_cq_clean(ibqp->send_cq, ibqp->qp_num);
		if (ibqp->recv_cq != ibqp->send_cq)
			hicain_cq_clean(ibqp->recv_cq, ibqp->qp_num);
	}
	return ret;
}

static int hicain_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
			   struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd;

	return ibv_cmd_query_qp(qp, attr, attr_mask, init_attr, &cmd, sizeof(cmd));
}

static int hicain_destroy_qp(struct ibv_qp *ibqp)
{
	struct hicain_qp *qp = to_hqp(ibqp);
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;
	hicain_qp_untrack(qp);
	hicain_cq_clean(ibqp->send_cq, ibqp->qp_num);
	if (ibqp->recv_cq != ibqp->send_cq)
		hicain_cq_clean(ibqp->recv_cq, ibqp->qp_num);
	hicain_unmap_ring(&qp->sq);
	hicain_unmap_ring(&qp->rq);
	pthread_spin_destroy(&qp->sq_lock);
	pthread_spin_destroy(&qp->rq_lock);
	free(qp);
	return 0;
}

/* ---- posting ---- */

static void hicain_write_sges(struct hicain_sge *dst, const struct ibv_sge *src, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		dst[i].addr = htole64(src[i].addr);
		dst[i].length = htole32(src[i].length);
		dst[i].lkey = htole32(src[i].lkey);
	}
}

/*
 * hicain_wqe_bind - the operands of a BIND_MW WQE (ABI 1.10, see
 * HICAIN_WR_BIND_MW): the window by its R_Key, the key it gets, what it
 * covers. The device checks them when the WQE executes and completes a
 * bad bind with IBV_WC_MW_BIND_ERR.
 */
static void hicain_wqe_bind(struct hicain_send_wqe *w, const struct ibv_mw *mw, uint32_t rkey,
			    const struct ibv_mw_bind_info *info)
{
	uint32_t lkey = info->mr ? info->mr->lkey : 0;

	w->opcode = HICAIN_WR_BIND_MW;
	w->num_sge = 0;
	w->rkey = htole32(mw->rkey);
	w->imm_data = htole32(rkey);
	w->remote_addr = htole64(info->addr);
	w->compare_add = htole64(info->length);
	w->swap = htole64((uint64_t)info->mw_access_flags << 32 | lkey);
}

/*
 * hicain_build_send - one send WQE at w, as hicain_ib's kernel path
 * writes it: the opcodes of the device (IBV_WR_* numbering), the SGEs
 * verbatim (the device checks lkey and range against the QP's PD), or
 * the inline bytes gathered from the process's buffers, which need not
 * lie in an MR.
 */
static int hicain_build_send(struct hicain_qp *qp, const struct ibv_send_wr *wr,
			     struct hicain_send_wqe *w)
{
	uint8_t *data = (uint8_t *)(w + 1);
	uint32_t len = 0;
	int i;

	if (wr->send_flags & ~(IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED |
			       IBV_SEND_INLINE))
		return EINVAL;
	if (wr->num_sge < 0 ||
	    (!(wr->send_flags & IBV_SEND_INLINE) && (uint32_t)wr->num_sge > qp->sq.max_sge))
		return EINVAL;
	memset(w, 0, sizeof(*w));
	switch (wr->opcode) {
	case IBV_WR_SEND:
		break;
	case IBV_WR_SEND_WITH_IMM:
		memcpy(&w->imm_data, &wr->imm_data, sizeof(w->imm_data));
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		memcpy(&w->imm_data, &wr->imm_data, sizeof(w->imm_data));
		/* fallthrough */
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_WRITE:	/* the 8 bytes: the SGE or inline data */
		w->remote_addr = htole64(wr->wr.rdma.remote_addr);
		w->rkey = htole32(wr->wr.rdma.rkey);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w->remote_addr = htole64(wr->wr.atomic.remote_addr);
		w->rkey = htole32(wr->wr.atomic.rkey);
		w->compare_add = htole64(wr->wr.atomic.compare_add);
		w->swap = htole64(wr->wr.atomic.swap);
		break;
	case IBV_WR_SEND_WITH_INV:
		w->imm_data = htole32(wr->invalidate_rkey);
		break;
	case IBV_WR_LOCAL_INV:
		w->imm_data = htole32(wr->invalidate_rkey);
		break;
	case IBV_WR_BIND_MW:
		if (!wr->bind_mw.mw)
			return EINVAL;
		hicain_wqe_bind(w, wr->bind_mw.mw, wr->bind_mw.rkey, &wr->bind_mw.bind_info);
		break;
	default:
		return EINVAL;
	}
	if (qp->vqp.qp.qp_type != IBV_QPT_RC &&
	    (wr->opcode == IBV_WR_SEND_WITH_INV || wr->opcode == IBV_WR_LOCAL_INV ||
	     wr->opcode == IBV_WR_BIND_MW || wr->opcode == IBV_WR_ATOMIC_WRITE))
		return EINVAL;	/* memory windows and ATOMIC WRITE are RC's */
	/* A raw packet QP sends whole Ethernet frames: SENDs only. */
	if (qp->vqp.qp.qp_type == IBV_QPT_RAW_PACKET && wr->opcode != IBV_WR_SEND)
		return EINVAL;
	if (qp->vqp.qp.qp_type == IBV_QPT_UD) {
		/* A datagram is a SEND through an AH of the QP's PD. */
		if ((wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM) ||
		    !wr->wr.ud.ah)
			return EINVAL;
		w->ah = htole32(to_hah(wr->wr.ud.ah)->handle);
		w->remote_qpn = htole32(wr->wr.ud.remote_qpn);
		w->remote_qkey = htole32(wr->wr.ud.remote_qkey);
	}
	if (qp->vqp.qp.qp_type == IBV_QPT_XRC_SEND)
		w->remote_srqn = htole32(wr->qp_type.xrc.remote_srqn);
	w->wr_id = htole64(wr->wr_id);
	w->opcode = wr->opcode;
	w->send_flags = htole16(wr->send_flags);
	if (wr->opcode == IBV_WR_LOCAL_INV || wr->opcode == IBV_WR_BIND_MW) {
		/* Local operations: no data. */
		w->send_flags &= htole16(~IBV_SEND_INLINE);
		return 0;
	}
	if (wr->send_flags & IBV_SEND_INLINE) {
		for (i = 0; i < wr->num_sge; i++) {
			if (wr->sg_list[i].length > qp->max_inline - len)
				return EINVAL;
			memcpy(data + len, (const void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			len += wr->sg_list[i].length;
		}
		w->inline_len = htole32(len);
	} else {
		w->num_sge = wr->num_sge;
		hicain_write_sges((struct hicain_sge *)data, wr->sg_list, wr->num_sge);
	}
	return 0;
}

/*
 * hicain_post_send - WQEs into the mapped SQ while it has room (the
 * device's cons, acquire), then prod (release) and one doorbell.
 */
static int hicain_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			    struct ibv_send_wr **bad_wr)
{
	struct hicain_qp *qp = to_hqp(ibqp);
	struct hicain_ring *sq = &qp->sq;
	struct hicain_context *ctx;
	uint32_t start;
	int ret = 0;

	if (!qp->mapped)
		return ibv_cmd_post_send(ibqp, wr, bad_wr);
	pthread_spin_lock(&qp->sq_lock);
	start = sq->idx;
	for (; wr; wr = wr->next) {
		if (sq->idx - hicain_load_acquire(&qp->sq_dbrec->cons) >= sq->depth) {
			ret = ENOMEM;
			break;
		}
		ret = hicain_build_send(qp, wr, (struct hicain_send_wqe *)
					(sq->buf + (size_t)(sq->idx & (sq->depth - 1)) * sq->stride));
		if (ret)
			break;
		sq->idx++;
	}
	if (sq->idx != start) {
		ctx = to_hctx(ibqp->context);
		hicain_store_release(&qp->sq_dbrec->prod, sq->idx);
		hicain_ring_db(ctx, ctx->caps.db_qp);
	}
	pthread_spin_unlock(&qp->sq_lock);
	if (ret)
		*bad_wr = wr;
	return ret;
}

/*
 * hicain_post_wq - receive WQEs into a mapped RQ or SRQ ring, while the
 * ring has room and, for an RQ (done: its rq_done), fewer than its depth
 * are outstanding.
 */
static int hicain_post_wq(struct ibv_context *ibctx, struct hicain_ring *rq,
			  struct hicain_wq_dbrec *dbrec, pthread_spinlock_t *lock,
			  const uint32_t *done, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr)
{
	struct hicain_context *ctx = to_hctx(ibctx);
	struct hicain_recv_wqe *w;
	uint32_t start;
	int ret = 0;

	pthread_spin_lock(lock);
	start = rq->idx;
	for (; wr; wr = wr->next) {
		if (rq->idx - hicain_load_acquire(&dbrec->cons) >= rq->depth ||
		    (done && rq->idx - __atomic_load_n(done, __ATOMIC_RELAXED) >= rq->depth)) {
			ret = ENOMEM;
			break;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge) {
			ret = EINVAL;
			break;
		}
		w = (struct hicain_recv_wqe *)(rq->buf + (size_t)(rq->idx & (rq->depth - 1)) * rq->stride);
		w->wr_id = htole64(wr->wr_id);
		w->num_sge = htole32(wr->num_sge);
		w->rsvd = 0;
		hicain_write_sges((struct hicain_sge *)(w + 1), wr->sg_list, wr->num_sge);
		__atomic_store_n(&rq->idx, rq->idx + 1, __ATOMIC_RELAXED);
	}
	if (rq->idx != start) {
		hicain_store_release(&dbrec->prod, rq->idx);
		/*
		 * ABI 1.18: no_db non-zero says the device holds enough WQEs
		 * and fetches the ring by itself before it runs short. The
		 * full barrier orders the store of prod before the load; the
		 * device stores 0 before it fetches (hicain_abi.h). A kernel
		 * or device before 1.18 leaves the word 0: ring.
		 */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (ctx->ring_all_recv || !__atomic_load_n(&dbrec->no_db, __ATOMIC_RELAXED))
			hicain_ring_db(ctx, ctx->caps.db_qp);
	}
	pthread_spin_unlock(lock);
	if (ret)
		*bad_wr = wr;
	return ret;
}

static int hicain_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
			    struct ibv_recv_wr **bad_wr)
{
	struct hicain_qp *qp = to_hqp(ibqp);

	if (!qp->mapped)
		return ibv_cmd_post_recv(ibqp, wr, bad_wr);
	/* A QP on an SRQ takes its receives from there (IBA 10.2.9.5), and
	 * a QP in Reset takes none (IBA 10.3.1, the state libibverbs keeps
	 * from ibv_modify_qp and ibv_query_qp).
	 */
	if (!qp->rq.map || ibqp->state == IBV_QPS_RESET) {
		*bad_wr = wr;
		return EINVAL;
	}
	return hicain_post_wq(ibqp->context, &qp->rq, qp->rq_dbrec, &qp->rq_lock, &qp->rq_done, wr,
			      bad_wr);
}

/* ---- the extended post API ---- */

/*
 * ibv_wr_start ... ibv_wr_complete on a mapped SQ: each ibv_wr_<op>
 * writes a WQE header into the next free SQ entry past the provider's
 * prod (the device reads nothing there until prod moves), the setters
 * that follow fill its data (SGEs, inline bytes, the UD address), and
 * wr_complete publishes the batch with one prod store (release) and
 * one doorbell, as post_send does. The first error drops the whole
 * batch: wr_complete returns it and prod does not move. wr_abort drops
 * the batch too. sq_lock is held from wr_start to wr_complete or
 * wr_abort (the API's own rule: one batch at a time per QP).
 */
#define HICAIN_WR_FLAGS (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | \
			 IBV_SEND_INLINE)

static inline struct hicain_qp *qpx_to_hqp(struct ibv_qp_ex *qpx)
{
	return hicain_container_of(qpx, struct hicain_qp, vqp.qp_ex);
}

static inline struct hicain_send_wqe *hicain_sq_wqe(struct hicain_qp *qp, uint32_t idx)
{
	return (struct hicain_send_wqe *)(qp->sq.buf +
					  (size_t)(idx & (qp->sq.depth - 1)) * qp->sq.stride);
}

/*
 * hicain_wr_new - the batch's next WQE, with the wr_id and wr_flags of
 * qpx; NULL after an earlier error, or when the SQ has no room (ENOMEM,
 * as post_send). IBV_SEND_INLINE in wr_flags means nothing here: the
 * data is inline when ibv_wr_set_inline_data(_list) gives it.
 */
static struct hicain_send_wqe *hicain_wr_new(struct ibv_qp_ex *qpx, uint8_t opcode)
{
	struct hicain_qp *qp = qpx_to_hqp(qpx);
	struct hicain_send_wqe *w;

	if (qp->wr_err)
		return NULL;
	if (qpx->wr_flags & ~HICAIN_WR_FLAGS) {
		qp->wr_err = EINVAL;
		return NULL;
	}
	if (qp->wr_cur - hicain_load_acquire(&qp->sq_dbrec->cons) >= qp->sq.depth) {
		qp->wr_err = ENOMEM;
		return NULL;
	}
	w = hicain_sq_wqe(qp, qp->wr_cur++);
	memset(w, 0, sizeof(*w));
	w->wr_id = htole64(qpx->wr_id);
	w->opcode = opcode;
	w->send_flags = htole16(qpx->wr_flags & ~IBV_SEND_INLINE);
	return w;
}

/* hicain_wr_last - the WQE the setters fill; EINVAL before any ibv_wr_<op>. */
static struct hicain_send_wqe *hicain_wr_last(struct hicain_qp *qp)
{
	if (qp->wr_err)
		return NULL;
	if (qp->wr_cur == qp->sq.idx) {
		qp->wr_err = EINVAL;
		return NULL;
	}
	return hicain_sq_wqe(qp, qp->wr_cur - 1);
}

static void hicain_wr_remote(struct hicain_send_wqe *w, uint32_t rkey, uint64_t remote_addr)
{
	w->remote_addr = htole64(remote_addr);
	w->rkey = htole32(rkey);
}

static void hicain_wr_send(struct ibv_qp_ex *qpx)
{
	hicain_wr_new(qpx, HICAIN_WR_SEND);
}

static void hicain_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	struct hicain_send_wqe *w = hicain_wr_new(qpx, HICAIN_WR_SEND_IMM);

	if (w)
		memcpy(&w->imm_data, &imm_data, sizeof(w->imm_data));
}

static void hicain_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr)
{
	struct hicain_send_wqe *w = hicain_wr_new(qpx, HICAIN_WR_RDMA_WRITE);

	if (w)
		hicain_wr_remote(w, rkey, remote_addr);
}

static void hicain_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
				     __be32 imm_data)
{
	struct hicain_send_wqe *w = hicain_wr_new(qpx, HICAIN_WR_RDMA_WRITE_IMM);

	if (!w)
		return;
	hicain_wr_remote(w, rkey, remote_addr);
	memcpy(&w->imm_data, &imm_data, sizeof(w->imm_data));
}

static void hicain_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr)
{
	struct hicain_send_wqe *w = hicain_wr_new(qpx, HICAIN_WR_RDMA_READ);

	if (w)
		hicain_wr_remote(w, rkey, remote_addr);
}

static void hicain_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
				     uint64_t compare, uint64_t swap)
{
	struct hicain_send_wqe *w = hicain_wr_new(qpx, HICAIN_WR_ATOMIC_CMP_SWP);

	if (!w)
		return;
	hicain_wr_remote(w, rkey, remote_addr);
	w->compare_add = htole64(compare);
	w->swap = htole64(swap);
}

static void hicain_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				       uint64_t remote_addr, uint64_t add)
{
	struct hicain_send_wqe *w = hicain_wr_new(qpx, HICAIN_WR_ATOMIC_FETCH_ADD);

	if (!w)
		return;
	hicain_wr_remote(w, rkey, remote_addr);
	w->compare_add = htole64(add);
}

/*
 * hicain_wr_atomic_write - IBA 1.5 ATOMIC WRITE of the 8 bytes at
 * atomic_wr, carried in the WQE's compare_add (no SGE: ABI 1.10), so the
 * QP needs no inline room.
 */
static void hicain_wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t remote_addr,
				   const void *atomic_wr)
{
	struct hicain_send_wqe *w = hicain_wr_new(qpx, HICAIN_WR_ATOMIC_WRITE);

	if (!w)
		return;
	if (!atomic_wr) {
		qpx_to_hqp(qpx)->wr_err = EINVAL;
		return;
	}
	hicain_wr_remote(w, rkey, remote_addr);
	memcpy(&w->compare_add, atomic_wr, sizeof(w->compare_add));
}

static void hicain_wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct hicain_send_wqe *w = hicain_wr_new(qpx, HICAIN_WR_SEND_INV);

	if (w)
		w->imm_data = htole32(invalidate_rkey);
}

static void hicain_wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct hicain_send_wqe *w = hicain_wr_new(qpx, HICAIN_WR_LOCAL_INV);

	if (w)
		w->imm_data = htole32(invalidate_rkey);
}

static void hicain_wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
			      const struct ibv_mw_bind_info *info)
{
	struct hicain_send_wqe *w = hicain_wr_new(qpx, HICAIN_WR_BIND_MW);

	if (!w)
		return;
	if (!mw || !info) {
		qpx_to_hqp(qpx)->wr_err = EINVAL;
		return;
	}
	hicain_wqe_bind(w, mw, rkey, info);
}

static void hicain_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t remote_qpn,
				  uint32_t remote_qkey)
{
	struct hicain_qp *qp = qpx_to_hqp(qpx);
	struct hicain_send_wqe *w = hicain_wr_last(qp);

	if (!w)
		return;
	if (!ah) {
		qp->wr_err = EINVAL;
		return;
	}
	w->ah = htole32(to_hah(ah)->handle);
	w->remote_qpn = htole32(remote_qpn);
	w->remote_qkey = htole32(remote_qkey);
}

/* hicain_wr_set_xrc_srqn - the XRC SRQ at the target the WQE is for. */
static void hicain_wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t remote_srqn)
{
	struct hicain_qp *qp = qpx_to_hqp(qpx);
	struct hicain_send_wqe *w = hicain_wr_last(qp);

	if (w)
		w->remote_srqn = htole32(remote_srqn);
}

static void hicain_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
				   const struct ibv_sge *sg_list)
{
	struct hicain_qp *qp = qpx_to_hqp(qpx);
	struct hicain_send_wqe *w = hicain_wr_last(qp);

	if (!w)
		return;
	if (num_sge > qp->sq.max_sge) {
		qp->wr_err = EINVAL;
		return;
	}
	w->send_flags &= htole16(~IBV_SEND_INLINE);
	w->inline_len = 0;
	w->num_sge = num_sge;
	hicain_write_sges((struct hicain_sge *)(w + 1), sg_list, num_sge);
}

static void hicain_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr,
			      uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	hicain_wr_set_sge_list(qpx, 1, &sge);
}

/* The bytes are copied now: the caller may reuse its buffers at once. */
static void hicain_wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
					   const struct ibv_data_buf *buf_list)
{
	struct hicain_qp *qp = qpx_to_hqp(qpx);
	struct hicain_send_wqe *w = hicain_wr_last(qp);
	uint8_t *data;
	size_t i, len = 0;

	if (!w)
		return;
	data = (uint8_t *)(w + 1);
	for (i = 0; i < num_buf; i++) {
		if (buf_list[i].length > qp->max_inline - len) {
			qp->wr_err = ENOMEM;
			return;
		}
		memcpy(data + len, buf_list[i].addr, buf_list[i].length);
		len += buf_list[i].length;
	}
	w->num_sge = 0;
	w->inline_len = htole32(len);
	w->send_flags |= htole16(IBV_SEND_INLINE);
}

static void hicain_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	hicain_wr_set_inline_data_list(qpx, 1, &buf);
}

static void hicain_wr_start(struct ibv_qp_ex *qpx)
{
	struct hicain_qp *qp = qpx_to_hqp(qpx);

	pthread_spin_lock(&qp->sq_lock);
	qp->wr_cur = qp->sq.idx;
	qp->wr_err = 0;
}

/*
 * hicain_wr_complete - publish the batch. A QP in Reset, Init or RTR
 * takes no send (IBA 10.8.2.3; the state libibverbs keeps): EINVAL, as
 * the kernel's post_send answers.
 */
static int hicain_wr_complete(struct ibv_qp_ex *qpx)
{
	struct hicain_qp *qp = qpx_to_hqp(qpx);
	struct hicain_context *ctx;
	int ret = qp->wr_err;

	if (!ret && qp->wr_cur != qp->sq.idx &&
	    (qpx->qp_base.state == IBV_QPS_RESET || qpx->qp_base.state == IBV_QPS_INIT ||
	     qpx->qp_base.state == IBV_QPS_RTR))
		ret = EINVAL;
	if (!ret && qp->wr_cur != qp->sq.idx) {
		ctx = to_hctx(qpx->qp_base.context);
		qp->sq.idx = qp->wr_cur;
		hicain_store_release(&qp->sq_dbrec->prod, qp->sq.idx);
		hicain_ring_db(ctx, ctx->caps.db_qp);
	}
	pthread_spin_unlock(&qp->sq_lock);
	return ret;
}

static void hicain_wr_abort(struct ibv_qp_ex *qpx)
{
	pthread_spin_unlock(&qpx_to_hqp(qpx)->sq_lock);
}

/* The send_ops_flags each QP type takes: what the device executes. */
#define HICAIN_QP_EX_UD_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)
#define HICAIN_QP_EX_UC_OPS (HICAIN_QP_EX_UD_OPS | IBV_QP_EX_WITH_RDMA_WRITE | \
			     IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
#define HICAIN_QP_EX_RC_OPS (HICAIN_QP_EX_UC_OPS | IBV_QP_EX_WITH_RDMA_READ | \
			     IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
			     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV | \
			     IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | \
			     IBV_QP_EX_WITH_ATOMIC_WRITE)

static int hicain_qp_ex_ops(const struct ibv_qp_init_attr_ex *attr)
{
	uint64_t ops;

	if (attr->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
					  IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_XRCD |
					  IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH))
		return EOPNOTSUPP;
	/* An RSS QP (ABI 1.16): a raw packet QP with both, receiving only. */
	if (attr->comp_mask & (IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH))
		return attr->qp_type == IBV_QPT_RAW_PACKET &&
		       (attr->comp_mask & IBV_QP_INIT_ATTR_IND_TABLE) &&
		       (attr->comp_mask & IBV_QP_INIT_ATTR_RX_HASH) && attr->rwq_ind_tbl &&
		       !(attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ? 0 : EOPNOTSUPP;
	/* No create flag is offered; an empty set is no request. */
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)
		return EOPNOTSUPP;
	/* An XRC target QP has its domain and nothing else: no PD, CQs,
	 * queues or send operations; every other type has a PD.
	 */
	if (attr->qp_type == IBV_QPT_XRC_RECV)
		return (attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) && attr->xrcd &&
		       !(attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ? 0 : EINVAL;
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD))
		return EINVAL;
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return 0;
	switch (attr->qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_XRC_SEND:
		ops = HICAIN_QP_EX_RC_OPS;
		break;
	case IBV_QPT_UC:
		ops = HICAIN_QP_EX_UC_OPS;
		break;
	case IBV_QPT_UD:
		ops = HICAIN_QP_EX_UD_OPS;
		break;
	case IBV_QPT_RAW_PACKET:
		ops = IBV_QP_EX_WITH_SEND;
		break;
	default:
		return EOPNOTSUPP;
	}
	if (attr->send_ops_flags & ~ops)
		return EOPNOTSUPP;
	return 0;
}

static void hicain_set_qp_ex_ops(struct hicain_qp *qp, uint64_t flags)
{
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;

	if (flags & IBV_QP_EX_WITH_SEND)
		qpx->wr_send = hicain_wr_send;
	if (flags & IBV_QP_EX_WITH_SEND_WITH_IMM)
		qpx->wr_send_imm = hicain_wr_send_imm;
	if (flags & IBV_QP_EX_WITH_RDMA_WRITE)
		qpx->wr_rdma_write = hicain_wr_rdma_write;
	if (flags & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
		qpx->wr_rdma_write_imm = hicain_wr_rdma_write_imm;
	if (flags & IBV_QP_EX_WITH_RDMA_READ)
		qpx->wr_rdma_read = hicain_wr_rdma_read;
	if (flags & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)
		qpx->wr_atomic_cmp_swp = hicain_wr_atomic_cmp_swp;
	if (flags & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
		qpx->wr_atomic_fetch_add = hicain_wr_atomic_fetch_add;
	if (flags & IBV_QP_EX_WITH_SEND_WITH_INV)
		qpx->wr_send_inv = hicain_wr_send_inv;
	if (flags & IBV_QP_EX_WITH_LOCAL_INV)
		qpx->wr_local_inv = hicain_wr_local_inv;
	if (flags & IBV_QP_EX_WITH_BIND_MW)
		qpx->wr_bind_mw = hicain_wr_bind_mw;
	if (flags & IBV_QP_EX_WITH_ATOMIC_WRITE)
		qpx->wr_atomic_write = hicain_wr_atomic_write;
	if (qp->vqp.qp.qp_type == IBV_QPT_UD)
		qpx->wr_set_ud_addr = hicain_wr_set_ud_addr;
	if (qp->vqp.qp.qp_type == IBV_QPT_XRC_SEND)
		qpx->wr_set_xrc_srqn = hicain_wr_set_xrc_srqn;
	qpx->wr_set_sge = hicain_wr_set_sge;
	qpx->wr_set_sge_list = hicain_wr_set_sge_list;
	qpx->wr_set_inline_data = hicain_wr_set_inline_data;
	qpx->wr_set_inline_data_list = hicain_wr_set_inline_data_list;
	qpx->wr_start = hicain_wr_start;
	qpx->wr_complete = hicain_wr_complete;
	qpx->wr_abort = hicain_wr_abort;
}

/*
 * hicain_create_rss_qp - an RSS QP (ABI 1.16): a raw packet QP without
 * queues over an indirection table of work queues, its Toeplitz hash in
 * the driver data. It receives through the work queues only.
 */
static struct ibv_qp *hicain_create_rss_qp(struct ibv_context *context,
					   struct ibv_qp_init_attr_ex *attr)
{
	struct hicain_create_qp_ex_resp resp = {};
	struct hicain_create_qp_rss_cmd cmd = {};
	struct ibv_rx_hash_conf *h = &attr->rx_hash_conf;
	struct hicain_qp *qp;
	int ret;

	if (h->rx_hash_key_len != sizeof(cmd.drv.rx_hash_key) || !h->rx_hash_key) {
		errno = EINVAL;
		return NULL;
	}
	cmd.drv.rx_hash_fields_mask = h->rx_hash_fields_mask;
	cmd.drv.rx_hash_function = h->rx_hash_function;
	cmd.drv.rx_hash_key_len = h->rx_hash_key_len;
	memcpy(cmd.drv.rx_hash_key, h->rx_hash_key, sizeof(cmd.drv.rx_hash_key));
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_create_qp_ex2(context, &qp->vqp, attr, &cmd.ibv_cmd, sizeof(cmd), &resp.core,
				    sizeof(resp));
	if (ret) {
		free(qp);
		errno = ret;
		return NULL;
	}
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
	return &qp->vqp.qp;
}

/*
 * hicain_create_qp_ex - ibv_create_qp_ex: a QP as create_qp's (the same
 * command and udata), and with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS the
 * ibv_wr_* API for the operations the device executes on the QP's type
 * (EOPNOTSUPP for others: TSO; send with invalidate, local
 * invalidate, MW binds and atomic write are RC's). The API writes into the mapped SQ, so a
 * QP whose SQ the kernel could not map (a context without the doorbell
 * page, an SQ too large to map) is refused it with EOPNOTSUPP; a plain
 * ibv_create_qp still gives such a QP. Create flags (the empty set is
 * taken: pyverbs sends it), RSS and TSO are not offered. XRC (ABI
 * 1.11): an IBV_QPT_XRC_SEND QP is an RC send queue whose WQEs name the
 * target's XRC SRQ (remote_srqn); an IBV_QPT_XRC_RECV QP belongs to its
 * XRC domain and has nothing to map.
 */
static struct ibv_qp *hicain_create_qp_ex(struct ibv_context *context,
					  struct ibv_qp_init_attr_ex *attr)
{
	struct hicain_create_qp_resp resp = {};
	struct ibv_qp_init_attr_ex a;
	struct ibv_create_qp cmd;
	struct hicain_qp *qp;
	int ret;

	ret = hicain_qp_ex_ops(attr);
	if (ret) {
		errno = ret;
		return NULL;
	}
	if (attr->comp_mask & IBV_QP_INIT_ATTR_IND_TABLE)
		return hicain_create_rss_qp(context, attr);
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	/* libibverbs' command knows no create flags: the empty set goes. */
	a = *attr;
	a.comp_mask &= ~(uint32_t)IBV_QP_INIT_ATTR_CREATE_FLAGS;
	ret = ibv_cmd_create_qp_ex(context, &qp->vqp, &a, &cmd, sizeof(cmd), &resp.core,
				   sizeof(resp));
	if (ret) {
		free(qp);
		errno = ret;
		return NULL;
	}
	attr->cap = a.cap;	/* what the QP got */
	/* An XRC initiator has no RQ; an XRC target no queue at all (the
	 * kernel creates it without udata: its response is empty).
	 */
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
		pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
		ret = 0;
	} else
		ret = hicain_qp_map(context, qp, attr->srq || attr->qp_type == IBV_QPT_XRC_SEND,
				    &resp);
	if (!ret && (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && !qp->mapped) {
		hicain_unmap_ring(&qp->sq);
		hicain_unmap_ring(&qp->rq);
		ret = EOPNOTSUPP;
	}
	if (ret) {
		ibv_cmd_destroy_qp(&qp->vqp.qp);
		free(qp);
		errno = ret;
		return NULL;
	}
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		hicain_set_qp_ex_ops(qp, attr->send_ops_flags);
		qp->vqp.comp_mask |= VERBS_QP_EX;
	}
	return &qp->vqp.qp;
}

/* ---- receive work queues and indirection tables (ABI 1.16) ---- */

static inline struct hicain_rwq *to_hrwq(struct ibv_wq *wq)
{
	return hicain_container_of(wq, struct hicain_rwq, wq);
}

static int hicain_post_wq_recv(struct ibv_wq *wq, struct ibv_recv_wr *wr,
			       struct ibv_recv_wr **bad_wr)
{
	struct hicain_rwq *rwq = to_hrwq(wq);

	if (wq->state == IBV_WQS_RESET) {
		*bad_wr = wr;
		return EINVAL;
	}
	return hicain_post_wq(wq->context, &rwq->rq, rwq->dbrec, &rwq->lock, NULL, wr, bad_wr);
}

/*
 * hicain_create_wq - ibv_create_wq (IBV_WQT_RQ): the kernel creates the
 * device's raw packet QP without a send queue and maps its RQ, which
 * ibv_post_wq_recv fills as ibv_post_recv fills a QP's.
 */
static struct ibv_wq *hicain_create_wq(struct ibv_context *context,
				       struct ibv_wq_init_attr *attr)
{
	struct hicain_create_wq_resp resp = {};
	struct ibv_create_wq cmd = {};
	struct hicain_rwq *rwq;
	void *dbrec = NULL;
	int ret;

	if (attr->wq_type != IBV_WQT_RQ || attr->comp_mask) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	rwq = calloc(1, sizeof(*rwq));
	if (!rwq) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_create_wq(context, attr, &rwq->wq, &cmd, sizeof(cmd), &resp.core,
				sizeof(resp));
	if (ret) {
		free(rwq);
		errno = ret;
		return NULL;
	}
	ret = hicain_map_ring(context, &resp.drv.rq, resp.drv.max_sge, sizeof(struct hicain_wq_dbrec),
			      &rwq->rq, &dbrec);
	if (!ret && !rwq->rq.map)
		ret = EINVAL;	/* the kernel maps a work queue always */
	if (ret) {
		ibv_cmd_destroy_wq(&rwq->wq);
		free(rwq);
		errno = ret;
		return NULL;
	}
	rwq->dbrec = dbrec;
	pthread_spin_init(&rwq->lock, PTHREAD_PROCESS_PRIVATE);
	rwq->wq.post_recv = hicain_post_wq_recv;
	rwq->wq.state = IBV_WQS_RESET;
	return &rwq->wq;
}

static int hicain_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr)
{
	struct ibv_modify_wq cmd = {};
	int ret;

	ret = ibv_cmd_modify_wq(wq, attr, &cmd, sizeof(cmd));
	if (!ret && (attr->attr_mask & IBV_WQ_ATTR_STATE))
		wq->state = attr->wq_state;
	return ret;
}

static int hicain_destroy_wq(struct ibv_wq *wq)
{
	struct hicain_rwq *rwq = to_hrwq(wq);
	int ret;

	ret = ibv_cmd_destroy_wq(wq);
	if (ret)
		return ret;
	hicain_unmap_ring(&rwq->rq);
	pthread_spin_destroy(&rwq->lock);
	free(rwq);
	return 0;
}

static struct ibv_rwq_ind_table *hicain_create_rwq_ind_table(struct ibv_context *context,
							     struct ibv_rwq_ind_table_init_attr *attr)
{
	struct ib_uverbs_ex_create_rwq_ind_table_resp resp = {};
	struct ibv_rwq_ind_table *tbl;

	tbl = calloc(1, sizeof(*tbl));
	if (!tbl) {
		errno = ENOMEM;
		return NULL;
	}
	return hicain_made(tbl, ibv_cmd_create_rwq_ind_table(context, attr, tbl, &resp, sizeof(resp)));
}

static int hicain_destroy_rwq_ind_table(struct ibv_rwq_ind_table *tbl)
{
	return hicain_gone(tbl, ibv_cmd_destroy_rwq_ind_table(tbl));
}

/* ---- flow steering (raw packet QPs, ABI 1.16) ---- */

/*
 * hicain_create_flow - ibv_create_flow: the kernel takes the specs
 * (ib_core parses them) and the device steers the frames they match to
 * the raw packet QP; there is no driver data. A QP of another type, or
 * a spec the device cannot match, is EOPNOTSUPP from the kernel.
 */
static struct ibv_flow *hicain_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *flow_attr)
{
	struct ibv_flow *flow;

	flow = calloc(1, sizeof(*flow));
	if (!flow) {
		errno = ENOMEM;
		return NULL;
	}
	return hicain_made(flow, ibv_cmd_create_flow(qp, flow, flow_attr, NULL, 0));
}

static int hicain_destroy_flow(struct ibv_flow *flow)
{
	return hicain_gone(flow, ibv_cmd_destroy_flow(flow));
}

/*
 * hicain_open_qp - ibv_open_qp: another handle on an XRC target QP of an
 * XRC domain this process opened, by number. The kernel keeps the QP
 * while any handle is open (its creator's included) and sends the
 * handle's events to it; nothing is mapped, the QP has no queues.
 */
static struct ibv_qp *hicain_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr)
{
	struct ib_uverbs_create_qp_resp resp;
	struct ibv_open_qp cmd;
	struct hicain_qp *qp;
	int ret;

	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_open_qp(context, &qp->vqp, sizeof(qp->vqp), attr, &cmd, sizeof(cmd), &resp,
			      sizeof(resp));
	if (ret) {
		free(qp);
		errno = ret;
		return NULL;
	}
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
	return &qp->vqp.qp;
}

/* ---- address handles ---- */

static struct ibv_ah *hicain_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct hicain_create_ah_resp resp = {};
	struct hicain_ah *ah;
	int ret;

	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	/* The kernel resolves the RoCE DMAC and SGID of the address. */
	ret = ibv_cmd_create_ah(pd, &ah->ibv_ah, attr, &resp.core, sizeof(resp));
	if (ret) {
		free(ah);
		errno = ret;
		return NULL;
	}
	ah->handle = resp.drv.handle;
	return &ah->ibv_ah;
}

static int hicain_destroy_ah(struct ibv_ah *ibah)
{
	return hicain_gone(to_hah(ibah), ibv_cmd_destroy_ah(ibah));
}

/*
 * hicain_srq_mapped - the end of create_srq and create_srq_ex: map the
 * SRQ's ring that the kernel's answer names, or destroy the new SRQ.
 */
static struct ibv_srq *hicain_srq_mapped(struct ibv_context *context, struct hicain_srq *srq,
					 struct hicain_create_srq_resp *resp)
{
	void *dbrec = NULL;
	int ret;

	ret = hicain_map_ring(context, &resp->drv.srq, resp->drv.max_sge,
			      sizeof(struct hicain_wq_dbrec), &srq->ring, &dbrec);
	if (!ret && srq->vsrq.srq_type == IBV_SRQT_TM) {
		void *ops_dbrec = NULL;

		/* A TM SRQ's operations are posted only to its mapped ring. */
		ret = hicain_map_ring(context, &resp->drv.ops, 1, sizeof(struct hicain_tm_dbrec),
				      &srq->ops, &ops_dbrec);
		if (!ret && (!srq->ops.map || srq->ops.stride != sizeof(struct hicain_tm_op_wqe) ||
			     !resp->drv.max_num_tags ||
			     resp->drv.max_num_tags > HICAIN_TM_HANDLES ||
			     srq->max_ops > srq->ops.depth / 2))
			ret = EOPNOTSUPP;
		srq->ops_dbrec = ops_dbrec;
		srq->max_num_tags = resp->drv.max_num_tags;
	}
	if (ret) {
		hicain_unmap_ring(&srq->ops);
		hicain_unmap_ring(&srq->ring);
		ibv_cmd_destroy_srq(&srq->vsrq.srq);
		free(srq);
		errno = ret;
		return NULL;
	}
	srq->dbrec = dbrec;
	srq->srqn = resp->drv.srqn;
	pthread_spin_init(&srq->lock, PTHREAD_PROCESS_PRIVATE);
	return &srq->vsrq.srq;
}

/* ---- shared receive queues ---- */

static struct ibv_srq *hicain_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct hicain_create_srq_resp resp = {};
	struct ibv_create_srq cmd;
	struct hicain_srq *srq;
	int ret;

	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}
	/* attr comes back with the ring's actual max_wr and max_sge. */
	ret = ibv_cmd_create_srq(pd, &srq->vsrq.srq, attr, &cmd, sizeof(cmd), &resp.core,
				 sizeof(resp));
	if (ret) {
		free(srq);
		errno = ret;
		return NULL;
	}
	return hicain_srq_mapped(pd->context, srq, &resp);
}

/*
 * hicain_create_srq_ex - ibv_create_srq_ex: a basic SRQ, or (ABI 1.11)
 * an XRC SRQ of an XRC domain with its CQ, on the same mapped ring and
 * udata as create_srq's. The kernel returns the XRC SRQ number, which
 * libibverbs keeps in vsrq.srq_num for ibv_get_srq_num. On a device
 * with HICAIN_CAP_TM (ABI 1.13) also a tag-matching SRQ, whose ops ring
 * the kernel maps beside the receive ring (hicain_post_srq_ops).
 */
static struct ibv_srq *hicain_create_srq_ex(struct ibv_context *context,
					    struct ibv_srq_init_attr_ex *attr)
{
	struct hicain_create_srq_resp resp = {};
	struct ibv_create_xsrq cmd;
	struct hicain_srq *srq;
	int ret;

	bool tm = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type == IBV_SRQT_TM;

	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC &&
	    attr->srq_type != IBV_SRQT_XRC &&
	    !(tm && (to_hctx(context)->caps.dev_caps & HICAIN_CAP_TM))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->comp_mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
					  IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
					  IBV_SRQ_INIT_ATTR_TM)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* libibverbs checks the TM fields it sends (max_num_tags, the CQ);
	 * max_ops only the provider sees: at most half the ops ring.
	 */
	if (tm && (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TM) || !attr->tm_cap.max_ops)) {
		errno = EINVAL;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}
	if (tm)
		srq->max_ops = attr->tm_cap.max_ops;
	ret = ibv_cmd_create_srq_ex(context, &srq->vsrq, attr, &cmd, sizeof(cmd), &resp.core,
				    sizeof(resp));
	if (ret) {
		free(srq);
		errno = ret;
		return NULL;
	}
	return hicain_srq_mapped(context, srq, &resp);
}

/* hicain_get_srq_num - ibv_get_srq_num: an XRC SRQ's number. */
static int hicain_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct hicain_srq *srq = to_hsrq(ibsrq);

	if (srq->vsrq.srq_type != IBV_SRQT_XRC)
		return EINVAL;
	*srq_num = srq->vsrq.srq_num;
	return 0;
}

/* ---- XRC domains ---- */

/*
 * hicain_open_xrcd - ibv_open_xrcd: the kernel shares one domain among
 * the processes that open it through the same file (attr->fd), or makes
 * a private one (fd -1); the device allocates it once (ABI 1.11).
 */
static struct ibv_xrcd *hicain_open_xrcd(struct ibv_context *context,
					 struct ibv_xrcd_init_attr *attr)
{
	struct ib_uverbs_open_xrcd_resp resp;
	struct ibv_open_xrcd cmd;
	struct verbs_xrcd *xrcd;
	int ret;

	xrcd = calloc(1, sizeof(*xrcd));
	if (!xrcd) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_open_xrcd(context, xrcd, sizeof(*xrcd), attr, &cmd, sizeof(cmd), &resp,
				sizeof(resp));
	if (ret) {
		free(xrcd);
		errno = ret;
		return NULL;
	}
	return &xrcd->xrcd;
}

static int hicain_close_xrcd(struct ibv_xrcd *ibxrcd)
{
	struct verbs_xrcd *xrcd = hicain_container_of(ibxrcd, struct verbs_xrcd, xrcd);

	return hicain_gone(xrcd, ibv_cmd_close_xrcd(xrcd));
}

static int hicain_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int attr_mask)
{
	struct ibv_modify_srq cmd;

	return ibv_cmd_modify_srq(srq, attr, attr_mask, &cmd, sizeof(cmd));
}

static int hicain_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd;

	return ibv_cmd_query_srq(srq, attr, &cmd, sizeof(cmd));
}

static int hicain_destroy_srq(struct ibv_srq *ibsrq)
{
	struct hicain_srq *srq = to_hsrq(ibsrq);
	int ret;

	ret = ibv_cmd_destroy_srq(ibsrq);
	if (ret)
		return ret;
	hicain_unmap_ring(&srq->ring);
	hicain_unmap_ring(&srq->ops);
	pthread_spin_destroy(&srq->lock);
	free(srq);
	return 0;
}

static int hicain_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
				struct ibv_recv_wr **bad_wr)
{
	struct hicain_srq *srq = to_hsrq(ibsrq);

	if (!srq->ring.map)
		return ibv_cmd_post_srq_recv(ibsrq, wr, bad_wr);
	return hicain_post_wq(ibsrq->context, &srq->ring, srq->dbrec, &srq->lock, NULL, wr,
			      bad_wr);
}

/*
 * hicain_tm_handle - a free tag handle of srq for an ADD posted at ops
 * index idx, or -1; under srq->lock. The device's busy set is stored
 * before it moves cons past an operation (hicain_abi.h), so cons is
 * read first.
 */
static int hicain_tm_handle(struct hicain_srq *srq, uint32_t idx)
{
	uint32_t cons = hicain_load_acquire(&srq->ops_dbrec->cons);
	uint64_t busy = le64toh(__atomic_load_n(&srq->ops_dbrec->busy, __ATOMIC_ACQUIRE));
	uint32_t h;

	for (h = 0; h < srq->max_num_tags; h++) {
		uint64_t bit = 1ULL << h;

		/* An ADD the device has taken shows in busy from then on. */
		if ((srq->pending & bit) && (int32_t)(cons - srq->adding[h]) > 0)
			srq->pending &= ~bit;
		if ((srq->pending | busy) & bit)
			continue;
		srq->pending |= bit;
		srq->adding[h] = idx;
		return h;
	}
	return -1;
}

/*
 * hicain_post_srq_ops - ibv_post_srq_ops on a TM SRQ: each operation
 * becomes a struct hicain_tm_op_wqe in the mapped ops ring (ABI 1.13),
 * published with prod and the QP doorbell, which makes the device
 * execute the SRQ's operations. An ADD gets a free handle in
 * op->tm.handle. ENOMEM when max_ops operations are in the ring or no
 * handle is free; EINVAL for an unknown opcode or more than one SGE.
 */
static int hicain_post_srq_ops(struct ibv_srq *ibsrq, struct ibv_ops_wr *op,
			       struct ibv_ops_wr **bad_op)
{
	struct hicain_srq *srq = to_hsrq(ibsrq);
	struct hicain_context *ctx = to_hctx(ibsrq->context);
	uint32_t start, cons;
	int ret = 0, h;

	if (!srq->ops.map) {
		*bad_op = op;
		return EOPNOTSUPP;
	}
	pthread_spin_lock(&srq->lock);
	start = srq->ops.idx;
	for (; op; op = op->next) {
		struct hicain_tm_op_wqe *w = (struct hicain_tm_op_wqe *)
			(srq->ops.buf + (size_t)(srq->ops.idx & (srq->ops.depth - 1)) * srq->ops.stride);

		cons = hicain_load_acquire(&srq->ops_dbrec->cons);
		if (srq->ops.idx - cons >= srq->max_ops) {
			ret = ENOMEM;
			break;
		}
		if (op->opcode > IBV_WR_TAG_SYNC ||
		    (op->opcode == IBV_WR_TAG_ADD && (op->tm.add.num_sge < 0 || op->tm.add.num_sge > 1))) {
			ret = EINVAL;
			break;
		}
		memset(w, 0, sizeof(*w));
		w->wr_id = htole64(op->wr_id);
		w->opcode = htole32(op->opcode);
		w->flags = htole32(op->flags & (IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC));
		w->unexpected_cnt = htole32(op->tm.unexpected_cnt);
		switch (op->opcode) {
		case IBV_WR_TAG_ADD:
			h = hicain_tm_handle(srq, srq->ops.idx);
			if (h < 0) {
				ret = ENOMEM;
				break;
			}
			op->tm.handle = h;
			w->recv_wr_id = htole64(op->tm.add.recv_wr_id);
			w->tag = htole64(op->tm.add.tag);
			w->mask = htole64(op->tm.add.mask);
			if (op->tm.add.num_sge)
				hicain_write_sges(&w->sge, op->tm.add.sg_list, 1);
			break;
		case IBV_WR_TAG_DEL:
			w->handle = htole32(op->tm.handle);
			break;
		default:
			break;
		}
		if (ret)
			break;
		w->handle = htole32(op->tm.handle);
		srq->ops.idx++;
	}
	if (srq->ops.idx != start) {
		hicain_store_release(&srq->ops_dbrec->prod, srq->ops.idx);
		hicain_ring_db(ctx, ctx->caps.db_qp);
	}
	pthread_spin_unlock(&srq->lock);
	if (ret)
		*bad_op = op;
	return ret;
}

/* ---- contexts ---- */

static void hicain_free_context(struct ibv_context *ibctx)
{
	struct hicain_context *ctx = to_hctx(ibctx);

	if (ctx->db_page)
		munmap(ctx->db_page, ctx->caps.db_mmap_len);
	verbs_uninit_context(&ctx->vctx);
	free(ctx);
}

static const struct verbs_context_ops hicain_ctx_ops = {
	.alloc_mw = hicain_alloc_mw,
	.alloc_parent_domain = hicain_alloc_parent_domain,
	.alloc_pd = hicain_alloc_pd,
	.attach_mcast = ibv_cmd_attach_mcast,
	.bind_mw = hicain_bind_mw,
	.create_ah = hicain_create_ah,
	.create_cq = hicain_create_cq,
	.create_cq_ex = hicain_create_cq_ex,
	.create_flow = hicain_create_flow,
	.create_qp = hicain_create_qp,
	.create_qp_ex = hicain_create_qp_ex,
	.create_rwq_ind_table = hicain_create_rwq_ind_table,
	.create_srq = hicain_create_srq,
	.dealloc_mw = hicain_dealloc_mw,
	.create_srq_ex = hicain_create_srq_ex,
	.create_wq = hicain_create_wq,
	.close_xrcd = hicain_close_xrcd,
	.get_srq_num = hicain_get_srq_num,
	.open_qp = hicain_open_qp,
	.open_xrcd = hicain_open_xrcd,
	.dealloc_pd = hicain_dealloc_pd,
	.dereg_mr = hicain_dereg_mr,
	.destroy_ah = hicain_destroy_ah,
	.destroy_cq = hicain_destroy_cq,
	.destroy_flow = hicain_destroy_flow,
	.destroy_rwq_ind_table = hicain_destroy_rwq_ind_table,
	.destroy_qp = hicain_destroy_qp,
	.destroy_srq = hicain_destroy_srq,
	.destroy_wq = hicain_destroy_wq,
	.detach_mcast = ibv_cmd_detach_mcast,
	.free_context = hicain_free_context,
	.import_mr = hicain_import_mr,
	.import_pd = hicain_import_pd,
	.modify_qp = hicain_modify_qp,
	.modify_srq = hicain_modify_srq,
	.modify_wq = hicain_modify_wq,
	.poll_cq = hicain_poll_cq,
	.post_recv = hicain_post_recv,
	.post_send = hicain_post_send,
	.post_srq_recv = hicain_post_srq_recv,
	.post_srq_ops = hicain_post_srq_ops,
	.query_device_ex = hicain_query_device_ex,
	.query_rt_values = hicain_query_rt_values,
	.query_port = hicain_query_port,
	.query_qp = hicain_query_qp,
	.query_srq = hicain_query_srq,
	.reg_mr = hicain_reg_mr,
	.rereg_mr = hicain_rereg_mr,
	.req_notify_cq = hicain_req_notify_cq,
	.resize_cq = hicain_resize_cq,
	.unimport_mr = hicain_unimport_mr,
	.unimport_pd = hicain_unimport_pd,
};

/*
 * hicain_context_setup - take the kernel's description of the context
 * (alloc_ucontext's, or QUERY_CONTEXT's for an imported one) and map its
 * doorbell page; on an error the caller frees the context.
 */
/* hicain_env_is - whether the environment's name is value. */
static bool hicain_env_is(const char *name, const char *value)
{
	const char *v = getenv(name);

	return v && !strcmp(v, value);
}

static int hicain_context_setup(struct hicain_context *ctx, int cmd_fd,
				const struct hicain_ib_alloc_ucontext_resp *drv)
{
	uint64_t key;
	void *page;

	ctx->caps = *drv;
	/* A doorbell for every posted receive even when the device says it
	 * needs none (no_db): a switch to compare, documented in
	 * docs/verbs-driver.md.
	 */
	ctx->ring_all_recv = hicain_env_is("HICAIN_RECV_DOORBELL", "always");
	if (!(ctx->caps.flags & HICAIN_UCTX_MAPPED))
		return 0;
	key = (uint64_t)ctx->caps.db_mmap_key_hi << 32 | ctx->caps.db_mmap_key_lo;
	if (ctx->caps.db_off > ctx->caps.db_mmap_len - sizeof(uint32_t) ||
	    ctx->caps.db_mmap_len < sizeof(uint32_t)) {
		fprintf(stderr, "hicain: the kernel's doorbell page is %u bytes, the register at %u\n",
			ctx->caps.db_mmap_len, ctx->caps.db_off);
		return EINVAL;
	}
	page = mmap(NULL, ctx->caps.db_mmap_len, PROT_WRITE, MAP_SHARED, cmd_fd, key);
	if (page == MAP_FAILED)
		return errno;
	ctx->db_page = page;
	ctx->db = (volatile uint32_t *)((uint8_t *)page + ctx->caps.db_off);
	return 0;
}

/*
 * hicain_alloc_context - the device's limits and, with
 * HICAIN_UCTX_MAPPED, the doorbell page; a doorbell page the process
 * cannot map fails the context.
 */
static struct verbs_context *hicain_alloc_context(struct ibv_device *ibdev, int cmd_fd,
						  void *private_data)
{
	struct hicain_get_context_resp resp = {};
	struct ibv_get_context cmd;
	struct hicain_context *ctx;
	int ret;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, vctx, RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;
	ret = ibv_cmd_get_context(&ctx->vctx, &cmd, sizeof(cmd), &resp.core, sizeof(resp));
	if (!ret)
		ret = hicain_context_setup(ctx, cmd_fd, &resp.drv);
	if (ret) {
		verbs_uninit_context(&ctx->vctx);
		free(ctx);
		errno = ret;
		return NULL;
	}
	verbs_set_ops(&ctx->vctx, &hicain_ctx_ops);
	return &ctx->vctx;
}

/*
 * hicain_import_context - ibv_import_device: a context over a dup of
 * another's uverbs file. QUERY_CONTEXT gives the core's facts and, from
 * hicain_ib, the same description the creator had: the imported
 * context posts and polls through the same doorbell page.
 */
static struct verbs_context *hicain_import_context(struct ibv_device *ibdev, int cmd_fd)
{
	struct hicain_ib_alloc_ucontext_resp drv = {};
	uint64_t core_support = 0;
	uint32_t comp_vectors = 0;
	struct ib_uverbs_attr a[3] = {
		{ .attr_id = UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS, .len = sizeof(comp_vectors),
		  .flags = UVERBS_ATTR_F_MANDATORY, .data = (uintptr_t)&comp_vectors },
		{ .attr_id = UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT, .len = sizeof(core_support),
		  .flags = UVERBS_ATTR_F_MANDATORY, .data = (uintptr_t)&core_support },
		{ .attr_id = HICAIN_IB_ATTR_QUERY_CONTEXT_RESP_UCTX, .len = sizeof(drv),
		  .flags = UVERBS_ATTR_F_MANDATORY, .data = (uintptr_t)&drv },
	};
	struct hicain_context *ctx;
	int ret;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, vctx, RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;
	ret = hicain_ioctl(cmd_fd, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_CONTEXT, a, 3);
	if (!ret) {
		ctx->vctx.context.num_comp_vectors = comp_vectors;
		/* struct verbs_device starts with its ibv_device */
		((struct verbs_device *)ibdev)->core_support = core_support;
		ret = hicain_context_setup(ctx, cmd_fd, &drv);
	}
	if (ret) {
		verbs_uninit_context(&ctx->vctx);
		free(ctx);
		errno = ret;
		return NULL;
	}
	verbs_set_ops(&ctx->vctx, &hicain_ctx_ops);
	return &ctx->vctx;
}

static struct verbs_device *hicain_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	struct hicain_device *dev;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	return &dev->vdev;
}

static void hicain_uninit_device(struct verbs_device *vdev)
{
	free((struct hicain_device *)((char *)vdev - offsetof(struct hicain_device, vdev)));
}

static const struct verbs_match_ent hicain_match_table[] = {
	VERBS_NAME_MATCH("hicain_", NULL),
	{},
};

/*
 * hicain_match_device - ours when the kernel name matched the table, or
 * when the PCI function under the ib_device is bound to hicain_net: a
 * renamed device keeps its driver.
 */
static bool hicain_match_device(struct verbs_sysfs_dev *sysfs_dev)
{
	char path[PATH_MAX], target[PATH_MAX];
	const char *base;
	ssize_t n;

	if (sysfs_dev->match)
		return true;
	if (snprintf(path, sizeof(path), "%s/device/driver", sysfs_dev->ibdev_path) >= (int)sizeof(path))
		return false;
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	base = strrchr(target, '/');
	base = base ? base + 1 : target;
	return strcmp(base, "hicain_net") == 0;
}

static const struct verbs_device_ops hicain_dev_ops = {
	.name = "hicain",
	.match_min_abi_version = HICAIN_UVERBS_ABI_VERSION,
	.match_max_abi_version = HICAIN_UVERBS_ABI_VERSION,
	.match_table = hicain_match_table,
	.match_device = hicain_match_device,
	.alloc_device = hicain_alloc_device,
	.uninit_device = hicain_uninit_device,
	.alloc_context = hicain_alloc_context,
	.import_context = hicain_import_context,
};

static void __attribute__((constructor)) hicain_register_driver(void)
{
	verbs_register_driver_34(&hicain_dev_ops);
}
