/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * hicain_uverbs_abi.h - the private udata of the hicain verbs driver:
 * what hicain_ib.ko and the libibverbs provider (rdma-core/providers/
 * hicain) exchange through uverbs beyond the core command structs.
 *
 * Included by the kernel module and by the provider alike. Every struct
 * has explicit padding and a fixed size. uverbs puts the driver bytes
 * directly after the core response (offset 4 for ALLOC_PD and
 * CREATE_AH, 8 for GET_CONTEXT and CREATE_CQ, 16 for CREATE_SRQ, 32 for
 * CREATE_QP): a struct that follows a core response whose size is not a
 * multiple of 8 has only 32-bit members, since a member that needs
 * 8-byte alignment would open a hole on the provider side that the
 * kernel does not see. The provider asserts every offset.
 *
 * Mapped queues (version 2): the rings of a user CQ, QP or SRQ are
 * memory of the driver that the process maps with mmap() on its uverbs
 * file at the mmap_key of the create response, mmap_len bytes, shared,
 * read and write. Each mapping holds the ring (depth x stride bytes,
 * the device's format of hicain_abi.h) at offset 0 and the queue's
 * dbrec at dbrec_off. The process posts and polls there with the
 * memory ordering of hicain_abi.h and rings the device's doorbell
 * through the doorbell page of its context (HICAIN_UCTX_MAPPED): a
 * 32-bit store of db_qp (after a producer index moved) or db_cq (after
 * an arm word, or a consumer index of a full ring) at db_off of the
 * page mapped at db_mmap_key. A mapping never survives fork (the
 * driver marks it VM_DONTCOPY), and the rings of one context are
 * reachable only through that context's file.
 */
#ifndef HICAIN_UVERBS_ABI_H
#define HICAIN_UVERBS_ABI_H

#include <linux/types.h>

/*
 * ops.uverbs_abi_ver of the kernel driver; the provider accepts exactly
 * this version (match_min/max_abi_version), and libibverbs refuses a
 * provider and kernel of different versions with a warning that names
 * both. Bump it on any change that is not a pure addition at the end of
 * a response.
 *
 * 1: every verb through uverbs commands.
 * 2: mapped queues (create responses below, the doorbell page).
 *    Later additions at the end of a response, without a bump:
 *    hicain_ib_create_srq_resp.ops and max_num_tags (tag-matching
 *    SRQs). A provider that knows them offers tag matching only when
 *    the kernel reports tm_caps, and a kernel that does not know them
 *    refuses IB_SRQT_TM, so either pairing fails cleanly.
 */
#define HICAIN_UVERBS_ABI_VERSION	2

/* hicain_ib_alloc_ucontext_resp.flags */
#define HICAIN_UCTX_MAPPED	0x1	/* queues are mapped, db_* valid */

/* GET_CONTEXT (alloc_ucontext) response, after ib_uverbs_get_context_resp. */
struct hicain_ib_alloc_ucontext_resp {
	__u32 dev_caps;		/* HICAIN_CAP_* of hicain_abi.h */
	__u32 max_qp_wr;
	__u32 max_sge;
	__u32 max_inline;	/* inline bytes a QP takes */
	__u32 flags;		/* HICAIN_UCTX_* */
	__u32 db_off;		/* the doorbell register in the page */
	__u32 db_qp;		/* the value that rings HICAIN_DB_QP */
	__u32 db_cq;		/* the value that rings HICAIN_DB_CQ */
	__u32 db_mmap_key_lo;	/* mmap offset of the doorbell page */
	__u32 db_mmap_key_hi;
	__u32 db_mmap_len;	/* PAGE_SIZE */
	__u32 reserved;
};

/*
 * Importing (ibv_import_device, ibv_import_pd, ibv_import_mr): a second
 * process or context that holds a dup of the uverbs file takes the
 * objects it names. Driver-namespace uverbs attributes:
 *   UVERBS_OBJECT_DEVICE / UVERBS_METHOD_QUERY_CONTEXT gains
 *     HICAIN_IB_ATTR_QUERY_CONTEXT_RESP_UCTX (out, optional): the
 *     context's struct hicain_ib_alloc_ucontext_resp again, the same
 *     doorbell page key included;
 *   UVERBS_OBJECT_PD gains HICAIN_IB_METHOD_PD_QUERY:
 *     HICAIN_IB_ATTR_QUERY_PD_HANDLE (in, the PD's handle) and
 *     HICAIN_IB_ATTR_QUERY_PD_RESP_PDN (out, __u32).
 * A kernel without them answers the import with EOPNOTSUPP or
 * EPROTONOSUPPORT, which the provider passes on.
 *
 * The device clock (ibv_query_rt_values_ex):
 *   UVERBS_OBJECT_DEVICE gains HICAIN_IB_METHOD_QUERY_CLOCK:
 *     HICAIN_IB_ATTR_QUERY_CLOCK_NS (out, __u64): the device clock now,
 *     in the units of hicain_cqe.timestamp (ns; hca_core_clock 1 GHz).
 *   EOPNOTSUPP from a device older than ABI 1.17.
 */
enum hicain_ib_query_context_attrs {		/* 1 << UVERBS_ID_NS_SHIFT */
	HICAIN_IB_ATTR_QUERY_CONTEXT_RESP_UCTX = (1U << 12),
};

enum hicain_ib_device_methods {
	HICAIN_IB_METHOD_QUERY_CLOCK = (1U << 12),
};

enum hicain_ib_query_clock_attrs {
	HICAIN_IB_ATTR_QUERY_CLOCK_NS = (1U << 12),
};

enum hicain_ib_pd_methods {
	HICAIN_IB_METHOD_PD_QUERY = (1U << 12),
};

enum hicain_ib_query_pd_attrs {
	HICAIN_IB_ATTR_QUERY_PD_HANDLE = (1U << 12),
	HICAIN_IB_ATTR_QUERY_PD_RESP_PDN,
};

/* ALLOC_PD response, after ib_uverbs_alloc_pd_resp. */
struct hicain_ib_alloc_pd_resp {
	__u32 pdn;		/* the device's PD handle */
	__u32 reserved;
};

/*
 * A mapped queue in a create response. mmap_key 0: the queue is not
 * mapped (the context has no HICAIN_UCTX_MAPPED), and the process
 * posts and polls through the uverbs commands.
 */
struct hicain_ib_queue {
	__aligned_u64 mmap_key;	/* mmap offset */
	__u32 mmap_len;		/* bytes, a multiple of the page size */
	__u32 depth;		/* entries, a power of two */
	__u32 stride;		/* bytes per entry */
	__u32 dbrec_off;	/* the dbrec in the mapping */
};

/* CREATE_CQ response, after ib_uverbs_create_cq_resp (8 bytes). */
struct hicain_ib_create_cq_resp {
	struct hicain_ib_queue cq;	/* hicain_cqe, hicain_cq_dbrec */
	__u32 cqn;
	__u32 reserved;
};

/* CREATE_QP response, after ib_uverbs_create_qp_resp (32 bytes). */
struct hicain_ib_create_qp_resp {
	struct hicain_ib_queue sq;	/* send WQEs, hicain_wq_dbrec */
	struct hicain_ib_queue rq;	/* mmap_key 0 with an SRQ */
	__u32 qpn;
	__u32 max_inline;		/* inline bytes after the WQE header */
	__u32 max_send_sge;
	__u32 max_recv_sge;
};

/* CREATE_SRQ response, after ib_uverbs_create_srq_resp (16 bytes). */
struct hicain_ib_create_srq_resp {
	struct hicain_ib_queue srq;	/* receive WQEs, hicain_wq_dbrec */
	__u32 srqn;
	__u32 max_sge;
	/* IB_SRQT_TM only (mmap_key 0 otherwise) */
	struct hicain_ib_queue ops;	/* hicain_tm_op_wqe, hicain_wq_dbrec */
	__u32 max_num_tags;		/* tag handles are 0..max_num_tags-1 */
	__u32 reserved;
};

/* CREATE_AH response, after ib_uverbs_create_ah_resp (4 bytes). */
struct hicain_ib_create_ah_resp {
	__u32 handle;			/* the device's AH, for UD send WQEs */
	__u32 reserved;
};

/* CREATE_WQ response, after ib_uverbs_ex_create_wq_resp (24 bytes). */
struct hicain_ib_create_wq_resp {
	struct hicain_ib_queue rq;	/* receive WQEs, hicain_wq_dbrec */
	__u32 wqn;
	__u32 max_sge;
};

/*
 * CREATE_QP of an RSS QP (a raw packet QP with an indirection table):
 * the driver data after the core command, ibv_rx_hash_conf's fields.
 */
#define HICAIN_RX_HASH_FUNC_TOEPLITZ	1	/* IBV_RX_HASH_FUNC_TOEPLITZ */

struct hicain_ib_create_qp_rss {
	__aligned_u64 rx_hash_fields_mask;	/* IBV_RX_HASH_* (bits 0..7) */
	__u8 rx_hash_function;			/* HICAIN_RX_HASH_FUNC_TOEPLITZ */
	__u8 rx_hash_key_len;			/* HICAIN_RSS_KEY_LEN */
	__u8 reserved[6];
	__u8 rx_hash_key[40];
};

#endif /* HICAIN_UVERBS_ABI_H */
