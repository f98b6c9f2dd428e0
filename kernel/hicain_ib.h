/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hicain_ib.h - what the files of hicain_ib.ko share: the driver's objects
 * and the functions one file calls in another. hicain_ib_main.c holds the
 * module, probe and remove and the event and completion interrupts;
 * hicain_ib_verbs.c the verbs; hicain_ib_user.c user contexts and mapped
 * queues; hicain_ib_mad.c process_mad; hicain_ib_admin.c admin commands.
 */
#ifndef HICAIN_IB_H
#define HICAIN_IB_H

#include <linux/atomic.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "hicain_net.h"
#include "hicain_uverbs_abi.h"

/* ib_core's GID table per port: the default link-local GID, the IPv4 and
 * IPv6 addresses of the netdev (RoCE v2 GIDs, IBA annex A17).
 */
#define HICAIN_GID_TBL_LEN	16
#define HICAIN_PKEY_TBL_LEN	1

/* REG_MR page sizes: 4 KiB to 1 GiB (page_shift 12..30). */
#define HICAIN_MR_PGSZ_BITMAP	GENMASK_ULL(30, 12)
#define HICAIN_MR_MAX_PAGES	(1U << 20)

/* IB_QP_STATE .. IB_QP_DEST_QPN: what MODIFY_QP understands. */
#define HICAIN_QP_ATTR_MASK	(IB_QP_DEST_QPN * 2 - 1)

/*
 * Inline data a send WQE carries (IB_SEND_INLINE). post_send gathers it
 * through a buffer on the stack before it takes the SQ lock, since
 * copying from a user QP's buffers may fault; the device offers 256.
 */
#define HICAIN_MAX_INLINE	256

/*
 * struct hicain_ibdev - the ib_device of one HiNIC function. epoch counts
 * device resets: an object made in an earlier epoch no longer exists in
 * the device, so destroying it sends no admin command.
 */
struct hicain_ibdev {
	struct ib_device ibdev;		/* first: ib_alloc_device */
	struct hicain_dev *hdev;
	struct net_device *netdev;	/* RoCE only; NULL on InfiniBand */
	bool ib;			/* InfiniBand link layer */
	u32 ib_gid_tbl_len;		/* InfiniBand: the device's tables */
	u32 ib_pkey_tbl_len;
	u32 cap_set;			/* modify_port's capability bits (IsSM) */
	atomic_t epoch;
	struct xarray qps;		/* qpn -> hicain_qp, IRQ-safe lock */
	struct xarray srqs;		/* srqn -> hicain_srq, IRQ-safe lock */
	struct xarray cqs;		/* cqn -> hicain_cq, IRQ-safe lock */
	struct xarray *vec_cqs;		/* per comp vector: cqn -> hicain_cq */
	struct mutex addr_lock;		/* addrs, refreshing gids, cap_set */
	struct hicain_cmd_set_addr addrs;	/* what SET_ADDR last set */
	/*
	 * The device's own GID table as QUERY_GID last read it, after each
	 * SET_ADDR: an AH created in atomic context translates its SGID
	 * here, without an admin command.
	 */
	spinlock_t gid_lock;
	u8 gids[HICAIN_GID_TBL_LEN][16];
	int n_gids;
	/* Device AHs destroyed in atomic context, for ah_free_work. */
	spinlock_t ah_free_lock;
	struct list_head ah_free;
	struct work_struct ah_free_work;
	/* BAR0's page, when user contexts may map it (hicain_db_page). */
	unsigned long db_pfn;
	bool db_mappable;
};

/*
 * Mapped queues. An mmap entry of a user context is its doorbell page
 * (BAR0's page, uncached) or the memory of one user queue: the ring and
 * its dbrec, whole pages of their own (alloc_pages_exact, zeroed) that
 * the process maps with vm_insert_page. The pages are freed in
 * mmap_free, once the queue was destroyed and no mmap() still holds the
 * entry; a mapping that outlives the queue holds its own page
 * references, and the device no longer reads those pages.
 */
enum hicain_mmap_type {
	HICAIN_MMAP_DB,
	HICAIN_MMAP_QUEUE,
};

struct hicain_mmap_entry {
	struct rdma_user_mmap_entry rdma;
	enum hicain_mmap_type type;
	bool kept;			/* QUEUE: never freed (hicain_uq_keep) */
	unsigned long pfn;		/* DB: BAR0's page */
	void *cpu;			/* QUEUE: the pages */
	size_t size;
};

/*
 * struct hicain_uq - the memory of one mapped user queue: contiguous
 * pages (dma is the ring's address), or, for a CQ ring larger than
 * alloc_pages_exact gives (ABI 1.9), vmalloc_user pages mapped one by one
 * with a page table for the device (dma is the table's address; pg_dma
 * the pages', the last one the dbrec's).
 */
struct hicain_uq {
	void *cpu;
	dma_addr_t dma;
	size_t size;			/* whole pages */
	u32 dbrec_off;
	dma_addr_t dbrec_dma;
	struct hicain_mmap_entry *entry;	/* NULL: not mapped */
	dma_addr_t *pg_dma;		/* paged: size / PAGE_SIZE pages */
	__le64 *tbl;			/* paged: the ring's page table */
	dma_addr_t tbl_dma;
	size_t tbl_size;
};

struct hicain_ucontext {
	struct ib_ucontext ibuc;	/* first: INIT_RDMA_OBJ_SIZE */
	struct hicain_mmap_entry *db;	/* NULL: queues are not mapped */
};

struct hicain_pd {
	struct ib_pd ibpd;		/* first: INIT_RDMA_OBJ_SIZE */
	u32 pdn;
	int epoch;
};

/* A memory window (ABI 1.10); the device knows it by ibmw.rkey's index. */
struct hicain_mw {
	struct ib_mw ibmw;		/* first: INIT_RDMA_OBJ_SIZE */
	int epoch;
};

/*
 * struct hicain_cq - a CQ ring in guest memory. The device writes CQEs
 * and dbrec->prod; poll_cq (under lock) consumes and publishes cons.
 * armed says req_notify_cq armed the CQ and no completion event went
 * out since: the device clears dbrec->arm when it raises the vector,
 * which tells the interrupt which CQs of the vector fired.
 */
struct hicain_cq {
	struct ib_cq ibcq;		/* first: INIT_RDMA_OBJ_SIZE */
	u32 cqn;
	int epoch;
	unsigned int vector;
	u32 depth;
	struct hicain_cqe *ring;
	dma_addr_t ring_dma;
	struct hicain_cq_dbrec *dbrec;
	dma_addr_t dbrec_dma;
	spinlock_t lock;		/* cons, polling */
	u32 cons;
	bool armed;
	/* A mapped user CQ: the process polls and arms it; the interrupt
	 * compares dbrec->events with events_seen (ABI 1.7).
	 */
	struct hicain_uq uq;
	u32 events_seen;
};

/* One send or receive queue of a QP: a ring in guest memory. */
struct hicain_wq {
	void *ring;
	dma_addr_t ring_dma;
	u32 depth;			/* power of two */
	u32 stride;			/* bytes per WQE */
	u32 max_sge;
	u32 prod;			/* under lock */
	struct hicain_wq_dbrec *dbrec;
	dma_addr_t dbrec_dma;
	spinlock_t lock;
	struct hicain_uq uq;		/* a mapped user queue's memory */
};

/*
 * A device AH that destroy_ah had to leave to a work item (it was called
 * in atomic context and DESTROY_AH sleeps). Allocated with the AH, so
 * that the deferred destroy needs no allocation and cannot fail.
 */
struct hicain_ah_release {
	struct list_head list;		/* hicain_ibdev.ah_free */
	u32 handle;
	int epoch;
};

/*
 * An address handle for UD sends: a device object (CREATE_AH, whose
 * handle goes into each WQE), or, when ib_core asks for one in atomic
 * context where admin commands cannot run, a software AH: no device
 * object, its address vector goes into each WQE (HICAIN_SEND_AV).
 */
struct hicain_ah {
	struct ib_ah ibah;		/* first: INIT_RDMA_OBJ_SIZE */
	bool sw;			/* software AH: no handle, no release */
	u32 handle;
	int epoch;
	struct hicain_ah_release *release;
	/* The address vector as the device gets it (and query_ah returns
	 * it), and ib_core's index of its SGID.
	 */
	struct hicain_ah_attr attr;
	u8 sgid_index;
};

/*
 * struct hicain_srq - a shared receive queue: a ring of receive WQEs in
 * guest memory with its own dbrec, which the QPs created on it take
 * from (device-abi.md, shared receive queues).
 */
/* Tag-matching SRQs (ABI 1.13): the tag list's bound, the operations in
 * flight (the device's max_tm_ops) and the entries of the ops ring
 * hicain_ib maps for each, twice those (hicain_tm_dbrec).
 */
#define HICAIN_TM_MAX_TAGS	64
#define HICAIN_TM_MAX_OPS	32
#define HICAIN_TM_OPS_DEPTH	(2 * HICAIN_TM_MAX_OPS)

struct hicain_srq {
	struct ib_srq ibsrq;		/* first: INIT_RDMA_OBJ_SIZE */
	u32 srqn;
	int epoch;
	struct hicain_wq wq;
	struct hicain_wq_dbrec *dbrec;
	dma_addr_t dbrec_dma;
	struct hicain_wq ops;		/* IB_SRQT_TM: the mapped ops ring */
};

struct hicain_qp {
	struct ib_qp ibqp;		/* first: INIT_RDMA_OBJ_SIZE */
	u32 qpn;
	int epoch;
	struct hicain_wq sq;
	struct hicain_wq rq;		/* no ring with an SRQ */
	struct hicain_wq_dbrec *dbrecs;	/* [0] SQ, [1] RQ */
	dma_addr_t dbrecs_dma;
	struct ib_qp_cap cap;
	enum ib_sig_type sq_sig_type;
	u32 av_room;			/* UD, GSI: WQE bytes kept for an AV */
};

/*
 * struct hicain_flow - a flow steering frames to a raw packet QP
 * (hicain_ib_raw.c); driver-allocated, as ib_core wants ib_flow.
 */
struct hicain_flow {
	struct ib_flow ibflow;
	struct hicain_ibdev *hidev;
	u32 handle;
	int epoch;
};

/*
 * struct hicain_rwq - a receive work queue (ibv_wq, IB_WQT_RQ): the
 * device's raw packet QP without a send queue, its RQ mapped to user
 * space (hicain_ib_raw.c). Driver-allocated, as ib_core wants ib_wq.
 */
struct hicain_rwq {
	struct ib_wq ibwq;
	struct hicain_wq rq;
	u32 qpn;
	int epoch;
	enum ib_wq_state state;
};

/* struct hicain_rwq_ind_table - ib_core's table (of hicain_rwqs). */
struct hicain_rwq_ind_table {
	struct ib_rwq_ind_table ibtbl;	/* first: INIT_RDMA_OBJ_SIZE */
};

/* struct hicain_xrcd - an XRC domain of the device (hicain_ib_xrc.c). */
struct hicain_xrcd {
	struct ib_xrcd ibxrcd;		/* first: INIT_RDMA_OBJ_SIZE */
	u32 xrcdn;
	int epoch;
};

struct hicain_mr {
	struct ib_mr ibmr;		/* driver-allocated */
	struct ib_umem *umem;
	int epoch;
	int access;			/* what REG_MR got, for a rereg */
};

/*
 * HICAIN_TO - fn(), the driver object of type hicain_##obj that embeds
 * the ib_core object ib_##ibobj as its member of that name.
 */
#define HICAIN_TO(fn, obj, ibobj)						\
static inline struct hicain_##obj *fn(struct ib_##ibobj *p)			\
{										\
	return container_of(p, struct hicain_##obj, ib##ibobj);			\
}

HICAIN_TO(to_hmw, mw, mw)
HICAIN_TO(to_hpd, pd, pd)
HICAIN_TO(to_hcq, cq, cq)
HICAIN_TO(to_hqp, qp, qp)
HICAIN_TO(to_hmr, mr, mr)
HICAIN_TO(to_hah, ah, ah)
HICAIN_TO(to_hsrq, srq, srq)
HICAIN_TO(to_hxrcd, xrcd, xrcd)

static inline struct hicain_ibdev *to_hidev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct hicain_ibdev, ibdev);
}

/*
 * hicain_destroy_status - the result of a destroy command. An object of
 * an earlier epoch, or of a device that is no longer live (-EIO), was
 * destroyed by the device reset. One of a dead device (-ENODEV) is gone
 * with it: the caller keeps its memory (hicain_ib_dead).
 */
static inline int hicain_destroy_status(int ret)
{
	return ret == -EIO || ret == -ENODEV ? 0 : ret;
}

/*
 * hicain_ib_dead - the function's backend died (hicain_dev_dead): every
 * handle is gone with it, but what the device was given stays allocated
 * until the function is removed.
 */
static inline bool hicain_ib_dead(struct hicain_ibdev *hidev)
{
	return hicain_dev_dead(hidev->hdev);
}

static inline struct device *hicain_dma_dev(struct hicain_ibdev *hidev)
{
	return &hidev->hdev->pdev->dev;
}

/* hicain_ib_xrc.c: XRC domains, XRC SRQs, XRC target QPs */
bool hicain_has_cap(struct hicain_ibdev *hidev, u16 minor, u32 cap);
bool hicain_xrc_ok(struct hicain_ibdev *hidev);
int hicain_alloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata);
int hicain_dealloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata);
int hicain_xrc_srq_cmd(struct hicain_ibdev *hidev, const struct ib_srq_init_attr *init,
		       struct hicain_cmd_create_srq *c);
int hicain_create_xrc_tgt(struct ib_qp *ibqp, struct ib_qp_init_attr *init);

/* hicain_ib_raw.c: flows, work queues and RSS QPs (ABI 1.16) */
bool hicain_raw_ok(struct hicain_ibdev *hidev);
struct ib_flow *hicain_create_flow(struct ib_qp *ibqp, struct ib_flow_attr *attr,
				   struct ib_udata *udata);
int hicain_destroy_flow(struct ib_flow *ibflow);
struct ib_wq *hicain_create_wq(struct ib_pd *ibpd, struct ib_wq_init_attr *init,
			       struct ib_udata *udata);
int hicain_modify_wq(struct ib_wq *ibwq, struct ib_wq_attr *attr, u32 mask, struct ib_udata *udata);
int hicain_destroy_wq(struct ib_wq *ibwq, struct ib_udata *udata);
int hicain_create_rwq_ind_table(struct ib_rwq_ind_table *tbl,
				struct ib_rwq_ind_table_init_attr *init, struct ib_udata *udata);
int hicain_destroy_rwq_ind_table(struct ib_rwq_ind_table *tbl);
int hicain_create_rss_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init, struct ib_udata *udata);

/* hicain_ib_admin.c: admin commands */
int hicain_admin_query(struct hicain_ibdev *hidev, u16 opcode, u32 handle,
		       void *out, size_t len);
int hicain_admin_handle(struct hicain_ibdev *hidev, u16 opcode, u32 handle,
			struct hicain_admin_cqe *cqe);
bool hicain_undo_create(struct hicain_ibdev *hidev, u16 opcode, u32 handle);
int hicain_create_handle(struct hicain_ibdev *hidev, struct hicain_admin_cmd *cmd, u16 opcode,
			 int *epoch, u32 *handle);
int hicain_destroy_handle(struct hicain_ibdev *hidev, int epoch, u16 opcode, u32 handle);

/*
 * hicain_check_numbering - the driver hands the device the kernel's
 * IB_QPT_* (CREATE_QP's qp_type), IB_WR_* (a send WQE's opcode) and
 * IB_SEND_* (its flags) unchanged: they must be the device's.
 */
static inline void hicain_check_numbering(void)
{
	BUILD_BUG_ON(IB_WR_RDMA_WRITE != HICAIN_WR_RDMA_WRITE);
	BUILD_BUG_ON(IB_WR_RDMA_WRITE_WITH_IMM != HICAIN_WR_RDMA_WRITE_IMM);
	BUILD_BUG_ON(IB_WR_SEND != HICAIN_WR_SEND);
	BUILD_BUG_ON(IB_WR_SEND_WITH_IMM != HICAIN_WR_SEND_IMM);
	BUILD_BUG_ON(IB_WR_RDMA_READ != HICAIN_WR_RDMA_READ);
	BUILD_BUG_ON(IB_WR_ATOMIC_CMP_AND_SWP != HICAIN_WR_ATOMIC_CMP_SWP);
	BUILD_BUG_ON(IB_WR_ATOMIC_FETCH_AND_ADD != HICAIN_WR_ATOMIC_FETCH_ADD);
	BUILD_BUG_ON(IB_WR_LOCAL_INV != HICAIN_WR_LOCAL_INV);
	BUILD_BUG_ON(IB_WR_SEND_WITH_INV != HICAIN_WR_SEND_INV);
	BUILD_BUG_ON(IB_SEND_FENCE != HICAIN_SEND_FENCE);
	BUILD_BUG_ON(IB_SEND_SIGNALED != HICAIN_SEND_SIGNALED);
	BUILD_BUG_ON(IB_SEND_SOLICITED != HICAIN_SEND_SOLICITED);
	BUILD_BUG_ON(IB_SEND_INLINE != HICAIN_SEND_INLINE);
	BUILD_BUG_ON(IB_QPT_SMI != HICAIN_QPT_SMI);
	BUILD_BUG_ON(IB_QPT_GSI != HICAIN_QPT_GSI);
	BUILD_BUG_ON(IB_QPT_RC != HICAIN_QPT_RC);
	BUILD_BUG_ON(IB_QPT_UC != HICAIN_QPT_UC);
	BUILD_BUG_ON(IB_QPT_UD != HICAIN_QPT_UD);
	BUILD_BUG_ON(IB_QPT_RAW_PACKET != HICAIN_QPT_RAW_PACKET);
	BUILD_BUG_ON(IB_QPT_XRC_INI != HICAIN_QPT_XRC_INI);
	BUILD_BUG_ON(IB_QPT_XRC_TGT != HICAIN_QPT_XRC_TGT);
}

/* hicain_ib_verbs.c: verbs */
void hicain_wq_init(struct hicain_wq *wq, u32 depth, u32 stride, u32 max_sge);
int hicain_wq_alloc_user(struct hicain_ibdev *hidev, struct ib_udata *udata, struct hicain_wq *wq);
void hicain_wqs_release(struct hicain_ibdev *hidev, struct hicain_wq *a, struct hicain_wq *b,
			struct hicain_wq_dbrec **dbrecs, dma_addr_t dbrecs_dma, unsigned int n,
			bool in_use);
int hicain_query_device(struct ib_device *ibdev, struct ib_device_attr *props,
			struct ib_udata *udata);
int hicain_query_port(struct ib_device *ibdev, u32 port, struct ib_port_attr *props);
int hicain_get_port_immutable(struct ib_device *ibdev, u32 port,
			      struct ib_port_immutable *immutable);
enum rdma_link_layer hicain_get_link_layer(struct ib_device *ibdev, u32 port);
int hicain_query_pkey(struct ib_device *ibdev, u32 port, u16 index, u16 *pkey);
int hicain_query_gid(struct ib_device *ibdev, u32 port, int index, union ib_gid *gid);
bool hicain_abi_minor_at_least(struct hicain_ibdev *hidev, u16 minor);
bool hicain_tm_ok(struct hicain_ibdev *hidev);
int hicain_push_port_caps(struct hicain_ibdev *hidev, u32 caps);
int hicain_modify_port(struct ib_device *ibdev, u32 port, int mask,
		       struct ib_port_modify *props);
void hicain_sync_addrs(struct hicain_ibdev *hidev);
int hicain_add_gid(const struct ib_gid_attr *attr, void **context);
int hicain_del_gid(const struct ib_gid_attr *attr, void **context);
int hicain_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);
int hicain_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);
int hicain_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int hicain_dealloc_mw(struct ib_mw *ibmw);
struct ib_mr *hicain_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				 u64 virt_addr, int access, struct ib_udata *udata);
struct ib_mr *hicain_get_dma_mr(struct ib_pd *ibpd, int access);
struct ib_mr *hicain_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start, u64 length,
				   u64 virt_addr, int access, struct ib_pd *pd,
				   struct ib_udata *udata);
int hicain_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
int hicain_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		     struct ib_udata *udata);
int hicain_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int hicain_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata);
int hicain_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int hicain_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
int hicain_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		     struct ib_udata *udata);
int hicain_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
int hicain_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		     struct ib_udata *udata);
int hicain_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		    struct ib_qp_init_attr *init);
int hicain_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		     const struct ib_send_wr **bad_wr);
int hicain_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		     const struct ib_recv_wr **bad_wr);
int hicain_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
		     struct ib_udata *udata);
int hicain_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr);
void hicain_ah_free_work(struct work_struct *work);
int hicain_destroy_ah(struct ib_ah *ibah, u32 flags);
int hicain_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		      struct ib_udata *udata);
int hicain_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		      enum ib_srq_attr_mask mask, struct ib_udata *udata);
int hicain_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int hicain_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int hicain_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr);
int hicain_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);
int hicain_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid);

/* hicain_ib_user.c: user contexts, mapped queues */
bool hicain_db_page(struct pci_dev *pdev);
int hicain_uq_alloc(struct hicain_ibdev *hidev, struct ib_udata *udata,
		    struct hicain_uq *uq, size_t ring_bytes, size_t dbrec_bytes, bool paged);
void hicain_uq_free(struct hicain_ibdev *hidev, struct hicain_uq *uq);
size_t hicain_uq_keep(struct hicain_uq *uq);
void hicain_uq_resp(const struct hicain_uq *uq, u32 depth, u32 stride,
		    struct hicain_ib_queue *q);
void hicain_mmap_free(struct rdma_user_mmap_entry *re);
int hicain_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma);
/*
 * hicain_udata_resp - the driver's part of a create response, cut to
 * what the process reads (an older provider reads less); nothing for a
 * kernel caller.
 */
static inline int hicain_udata_resp(struct ib_udata *udata, void *resp, size_t len)
{
	return udata ? ib_copy_to_udata(udata, resp, min_t(size_t, udata->outlen, len)) : 0;
}

int hicain_alloc_ucontext(struct ib_ucontext *ibuc, struct ib_udata *udata);
int hicain_query_ucontext(struct ib_ucontext *ibuc, struct uverbs_attr_bundle *attrs);
extern const struct uapi_definition hicain_ib_uapi_defs[];
void hicain_dealloc_ucontext(struct ib_ucontext *ibuc);
void hicain_disassociate_ucontext(struct ib_ucontext *ibuc);

/* hicain_ib_mad.c: process_mad */
int hicain_process_mad(struct ib_device *ibdev, int flags, u32 port,
		       const struct ib_wc *in_wc, const struct ib_grh *in_grh,
		       const struct ib_mad *in, struct ib_mad *out,
		       size_t *out_mad_size, u16 *out_mad_pkey_index);

#endif /* HICAIN_IB_H */
