/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * verbs_private.h - the parts of libibverbs' private provider ABI
 * (IBVERBS_PRIVATE_34, rdma-core v44 as shipped by Debian 12) that the
 * hicain provider uses, declared from the documented layouts
 * (docs/device-facts.md section 4) because libibverbs-dev does not ship
 * driver.h or kern-abi.h.
 *
 * The provider is tied to exactly this ABI: the library reads these
 * structs with its own layout, so every size and offset is asserted
 * below, and the link (-Wl,-z,defs) fails against a libibverbs without
 * verbs_register_driver_34.
 */
#ifndef HICAIN_VERBS_PRIVATE_H
#define HICAIN_VERBS_PRIVATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>

#define HICAIN_STATIC_ASSERT(e) _Static_assert(e, #e)

/* ccan/list.h */
struct list_node {
	struct list_node *next, *prev;
};

enum {
	VERBS_MATCH_SENTINEL = 0,
	VERBS_MATCH_PCI = 1,
	VERBS_MATCH_MODALIAS = 2,
	VERBS_MATCH_DRIVER_ID = 3,
};

struct verbs_match_ent {
	void *driver_data;
	union {
		const char *modalias;
		uint64_t driver_id;
	} u;
	uint16_t vendor;
	uint16_t device;
	uint8_t kind;
};

/* Matches the ib_device by name: fnmatch on "rdma_device:N<name>". */
#define VERBS_NAME_MATCH(name_prefix, data)                                    \
	{                                                                      \
		.driver_data = (data),                                         \
		.u.modalias = "rdma_device:*N" name_prefix "*",                \
		.kind = VERBS_MATCH_MODALIAS,                                  \
	}

struct verbs_sysfs_dev {
	struct list_node entry;
	void *provider_data;
	const struct verbs_match_ent *match;
	unsigned int flags;
	char sysfs_name[64];
	dev_t sysfs_cdev;
	char ibdev_name[64];
	char ibdev_path[256];
	char modalias[512];
	uint64_t node_guid;
	uint32_t driver_id;
	enum ibv_node_type node_type;
	int ibdev_idx;
	uint32_t num_ports;
	uint32_t abi_ver;
	struct timespec time_created;
};

struct verbs_device;

struct verbs_device_ops {
	const char *name;
	uint32_t match_min_abi_version;
	uint32_t match_max_abi_version;
	const struct verbs_match_ent *match_table;
	const struct verbs_device_ops **static_providers;
	bool (*match_device)(struct verbs_sysfs_dev *sysfs_dev);
	struct verbs_context *(*alloc_context)(struct ibv_device *device, int cmd_fd,
					       void *private_data);
	struct verbs_context *(*import_context)(struct ibv_device *device, int cmd_fd);
	struct verbs_device *(*alloc_device)(struct verbs_sysfs_dev *sysfs_dev);
	void (*uninit_device)(struct verbs_device *device);
};

struct verbs_device {
	struct ibv_device device;	/* must be first */
	const struct verbs_device_ops *ops;
	atomic_int refcount;
	struct list_node entry;
	struct verbs_sysfs_dev *sysfs;
	uint64_t core_support;
};

enum ibv_mr_type {
	IBV_MR_TYPE_MR,
	IBV_MR_TYPE_NULL_MR,
	IBV_MR_TYPE_IMPORTED_MR,
	IBV_MR_TYPE_DMABUF_MR,
};

struct verbs_mr {
	struct ibv_mr ibv_mr;
	enum ibv_mr_type mr_type;
	int access;
};

/* verbs_qp.comp_mask */
enum {
	VERBS_QP_XRCD = 1 << 0,
	VERBS_QP_EX = 1 << 1,	/* ibv_qp_to_qp_ex gives qp_ex */
};

/* An XRC domain: libibverbs' handle to the kernel object. */
struct verbs_xrcd {
	struct ibv_xrcd xrcd;
	uint32_t comp_mask;
	uint32_t handle;
};

/* An SRQ of the extended API (ibv_create_srq_ex): ibv_cmd_create_srq_ex
 * fills srq_type, xrcd, cq and, for an XRC SRQ, srq_num.
 */
struct verbs_srq {
	struct ibv_srq srq;
	enum ibv_srq_type srq_type;
	struct verbs_xrcd *xrcd;
	struct ibv_cq *cq;
	uint32_t srq_num;
};

/* A QP of the extended API: libibverbs' ibv_qp_to_qp_ex reads comp_mask. */
struct verbs_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;
	};
	uint32_t comp_mask;
	struct verbs_xrcd *xrcd;
};

/* An op this provider leaves to the library's default (EOPNOTSUPP). */
typedef void (*verbs_unused_op)(void);

/* The library reads this with its own layout (verbs_set_ops): the order
 * and count of the 76 pointers must be v44's exactly.
 */
struct verbs_context_ops {
	verbs_unused_op advise_mr;
	verbs_unused_op alloc_dm;
	struct ibv_mw *(*alloc_mw)(struct ibv_pd *pd, enum ibv_mw_type type);
	verbs_unused_op alloc_null_mr;
	struct ibv_pd *(*alloc_parent_domain)(struct ibv_context *context,
					      struct ibv_parent_domain_init_attr *attr);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	verbs_unused_op alloc_td;
	void (*async_event)(struct ibv_context *context, struct ibv_async_event *event);
	verbs_unused_op attach_counters_point_flow;
	int (*attach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
	int (*bind_mw)(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind);
	int (*close_xrcd)(struct ibv_xrcd *xrcd);
	void (*cq_event)(struct ibv_cq *cq);
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
	verbs_unused_op create_counters;
	struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe,
				    struct ibv_comp_channel *channel, int comp_vector);
	struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *context,
					  struct ibv_cq_init_attr_ex *init_attr);
	struct ibv_flow *(*create_flow)(struct ibv_qp *qp, struct ibv_flow_attr *flow_attr);
	verbs_unused_op create_flow_action_esp;
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *context,
				       struct ibv_qp_init_attr_ex *attr);
	struct ibv_rwq_ind_table *(*create_rwq_ind_table)(struct ibv_context *context,
							  struct ibv_rwq_ind_table_init_attr *init_attr);
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
	struct ibv_srq *(*create_srq_ex)(struct ibv_context *context,
					 struct ibv_srq_init_attr_ex *attr);
	struct ibv_wq *(*create_wq)(struct ibv_context *context, struct ibv_wq_init_attr *wq_init_attr);
	int (*dealloc_mw)(struct ibv_mw *mw);
	int (*dealloc_pd)(struct ibv_pd *pd);
	verbs_unused_op dealloc_td;
	int (*dereg_mr)(struct verbs_mr *vmr);
	int (*destroy_ah)(struct ibv_ah *ah);
	verbs_unused_op destroy_counters;
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*destroy_flow)(struct ibv_flow *flow);
	verbs_unused_op destroy_flow_action;
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*destroy_rwq_ind_table)(struct ibv_rwq_ind_table *rwq_ind_table);
	int (*destroy_srq)(struct ibv_srq *srq);
	int (*destroy_wq)(struct ibv_wq *wq);
	int (*detach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
	void (*free_context)(struct ibv_context *context);
	verbs_unused_op free_dm;
	int (*get_srq_num)(struct ibv_srq *srq, uint32_t *srq_num);
	verbs_unused_op import_dm;
	struct ibv_mr *(*import_mr)(struct ibv_pd *pd, uint32_t mr_handle);
	struct ibv_pd *(*import_pd)(struct ibv_context *context, uint32_t pd_handle);
	verbs_unused_op modify_cq;
	verbs_unused_op modify_flow_action_esp;
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
	verbs_unused_op modify_qp_rate_limit;
	int (*modify_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr, int attr_mask);
	int (*modify_wq)(struct ibv_wq *wq, struct ibv_wq_attr *wq_attr);
	struct ibv_qp *(*open_qp)(struct ibv_context *context, struct ibv_qp_open_attr *attr);
	struct ibv_xrcd *(*open_xrcd)(struct ibv_context *context,
				      struct ibv_xrcd_init_attr *attr);
	int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
	int (*post_srq_ops)(struct ibv_srq *srq, struct ibv_ops_wr *op,
			    struct ibv_ops_wr **bad_op);
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr);
	int (*query_device_ex)(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr, size_t attr_size);
	verbs_unused_op query_ece;
	int (*query_port)(struct ibv_context *context, uint8_t port_num,
			  struct ibv_port_attr *port_attr);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
			struct ibv_qp_init_attr *init_attr);
	verbs_unused_op query_qp_data_in_order;
	int (*query_rt_values)(struct ibv_context *context, struct ibv_values_ex *values);
	int (*query_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr);
	verbs_unused_op read_counters;
	verbs_unused_op reg_dm_mr;
	verbs_unused_op reg_dmabuf_mr;
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length,
				 uint64_t hca_va, int access);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*rereg_mr)(struct verbs_mr *vmr, int flags, struct ibv_pd *pd, void *addr,
			size_t length, int access);
	int (*resize_cq)(struct ibv_cq *cq, int cqe);
	verbs_unused_op set_ece;
	verbs_unused_op unimport_dm;
	void (*unimport_mr)(struct ibv_mr *mr);
	void (*unimport_pd)(struct ibv_pd *pd);
};

/* Command buffers: the uverbs header, then the kernel's core struct; the
 * library fills both and passes what follows as the driver's udata.
 */
struct ibv_get_context {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_get_context core;
};

struct ibv_query_port {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_query_port core;
};

struct ibv_alloc_pd {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_alloc_pd core;
};

struct ibv_alloc_mw {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_alloc_mw core;
};

struct ibv_reg_mr {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_reg_mr core;
};

struct ibv_create_cq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_create_cq core;
};

struct ibv_rereg_mr {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_rereg_mr core;
};

struct ibv_resize_cq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_resize_cq core;
};

struct ibv_create_cq_ex {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
	struct ib_uverbs_ex_create_cq core;
};

struct ibv_create_qp_ex {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
	struct ib_uverbs_ex_create_qp core;
};

struct ibv_create_wq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
	struct ib_uverbs_ex_create_wq core;
};

struct ibv_modify_wq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
	struct ib_uverbs_ex_modify_wq core;
};

struct ibv_create_qp {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_create_qp core;
};

struct ibv_modify_qp {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_modify_qp core;
};

struct ibv_query_qp {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_query_qp core;
};

struct ibv_create_srq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_create_srq core;
};

struct ibv_modify_srq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_modify_srq core;
};

struct ibv_query_srq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_query_srq core;
};

struct ibv_open_xrcd {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_open_xrcd core;
};

struct ibv_create_xsrq {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_create_xsrq core;
};

struct ibv_open_qp {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_open_qp core;
};

/* Layouts, x86-64 (device-facts.md 4.2, 4.3, 4.6). */
HICAIN_STATIC_ASSERT(sizeof(struct verbs_match_ent) == 24);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_match_ent, u) == 8);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_match_ent, vendor) == 16);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_match_ent, device) == 18);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_match_ent, kind) == 20);
HICAIN_STATIC_ASSERT(sizeof(struct verbs_sysfs_dev) == 992);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, provider_data) == 16);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, match) == 24);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, flags) == 32);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, sysfs_name) == 36);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, sysfs_cdev) == 104);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, ibdev_name) == 112);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, ibdev_path) == 176);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, modalias) == 432);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, node_guid) == 944);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, driver_id) == 952);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, node_type) == 956);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, ibdev_idx) == 960);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, num_ports) == 964);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, abi_ver) == 968);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_sysfs_dev, time_created) == 976);
HICAIN_STATIC_ASSERT(sizeof(struct verbs_device_ops) == 72);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_device_ops, match_min_abi_version) == 8);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_device_ops, match_max_abi_version) == 12);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_device_ops, match_table) == 16);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_device_ops, static_providers) == 24);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_device_ops, match_device) == 32);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_device_ops, alloc_context) == 40);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_device_ops, import_context) == 48);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_device_ops, alloc_device) == 56);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_device_ops, uninit_device) == 64);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_device) == 664);
HICAIN_STATIC_ASSERT(sizeof(struct verbs_device) == 712);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_device, ops) == 664);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_device, refcount) == 672);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_device, entry) == 680);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_device, sysfs) == 696);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_device, core_support) == 704);
HICAIN_STATIC_ASSERT(sizeof(struct verbs_mr) == 56);
HICAIN_STATIC_ASSERT(offsetof(struct ibv_qp_ex, qp_base) == 0);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_qp_ex) == 352);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_qp, comp_mask) == sizeof(struct ibv_qp_ex));
HICAIN_STATIC_ASSERT(offsetof(struct verbs_qp, xrcd) == sizeof(struct ibv_qp_ex) + 8);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, create_qp_ex) == 0x0a0);
HICAIN_STATIC_ASSERT(sizeof(struct verbs_context) == 648);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context, context) == 320);
HICAIN_STATIC_ASSERT(sizeof(struct verbs_context_ops) == 76 * sizeof(void *));
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, alloc_parent_domain) == 0x020);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, alloc_pd) == 0x028);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, attach_mcast) == 0x048);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, create_ah) == 0x068);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, create_srq) == 0x0b0);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, destroy_ah) == 0x0e8);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, destroy_srq) == 0x120);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, detach_mcast) == 0x130);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, modify_srq) == 0x188);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, post_srq_ops) == 0x1c0);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, post_srq_recv) == 0x1c8);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, query_srq) == 0x200);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, async_event) == 0x038);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, cq_event) == 0x060);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, create_cq) == 0x078);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, create_qp) == 0x098);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, dealloc_pd) == 0x0d0);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, dereg_mr) == 0x0e0);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, destroy_cq) == 0x0f8);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, destroy_qp) == 0x110);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, free_context) == 0x138);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, modify_qp) == 0x178);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, poll_cq) == 0x1a8);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, post_recv) == 0x1b0);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, post_send) == 0x1b8);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, query_device_ex) == 0x1d0);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, query_port) == 0x1e0);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, query_qp) == 0x1e8);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, reg_mr) == 0x220);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, req_notify_cq) == 0x228);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, unimport_pd) == 0x258);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_get_context) == 16);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_query_port) == 24);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_alloc_pd) == 16);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_reg_mr) == 48);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_alloc_mw) == 24);
HICAIN_STATIC_ASSERT(sizeof(struct ib_uverbs_alloc_mw_resp) == 8);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_create_cq) == 40);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_create_qp) == 64);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_resize_cq) == 24);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_create_cq_ex) == 56);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_create_qp_ex) == 88);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_create_wq) == 64);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_modify_wq) == 48);
HICAIN_STATIC_ASSERT(sizeof(struct ib_uverbs_ex_create_qp_resp) == 40);
HICAIN_STATIC_ASSERT(sizeof(struct ib_uverbs_ex_create_wq_resp) == 24);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, create_wq) == 0x0c0);
HICAIN_STATIC_ASSERT(sizeof(struct ib_uverbs_ex_create_cq_resp) == 16);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, create_cq_ex) == 0x080);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_rereg_mr) == 56);
HICAIN_STATIC_ASSERT(sizeof(struct ib_uverbs_rereg_mr_resp) == 8);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, rereg_mr) == 0x230);
HICAIN_STATIC_ASSERT(sizeof(struct ib_uverbs_resize_cq_resp) == 8);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, resize_cq) == 0x238);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_modify_qp) == 120);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_query_qp) == 24);
HICAIN_STATIC_ASSERT(sizeof(struct ib_uverbs_get_context_resp) == 8);
HICAIN_STATIC_ASSERT(sizeof(struct ib_uverbs_reg_mr_resp) == 12);
HICAIN_STATIC_ASSERT(sizeof(struct ib_uverbs_create_cq_resp) == 8);
HICAIN_STATIC_ASSERT(sizeof(struct ib_uverbs_create_qp_resp) == 32);
HICAIN_STATIC_ASSERT(sizeof(struct ib_uverbs_alloc_pd_resp) == 4);
HICAIN_STATIC_ASSERT(sizeof(struct ib_uverbs_create_srq_resp) == 16);
HICAIN_STATIC_ASSERT(sizeof(struct ib_uverbs_create_ah_resp) == 4);
HICAIN_STATIC_ASSERT(sizeof(struct verbs_xrcd) == 16);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_srq) == 128);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_srq, srq_type) == 128);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_srq, xrcd) == 136);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_srq, cq) == 144);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_srq, srq_num) == 152);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, close_xrcd) == 0x058);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, create_srq_ex) == 0x0b8);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, get_srq_num) == 0x148);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, open_qp) == 0x198);
HICAIN_STATIC_ASSERT(offsetof(struct verbs_context_ops, open_xrcd) == 0x1a0);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_open_xrcd) == 24);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_create_xsrq) == 56);
HICAIN_STATIC_ASSERT(sizeof(struct ibv_open_qp) == 40);
HICAIN_STATIC_ASSERT(sizeof(struct ib_uverbs_open_xrcd_resp) == 4);

/* Exported by libibverbs.so.1 at version IBVERBS_PRIVATE_34. */
void verbs_register_driver_34(const struct verbs_device_ops *ops);
void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd, size_t alloc_size,
				    struct verbs_context *context_offset, uint32_t driver_id);
void verbs_uninit_context(struct verbs_context *context);
void verbs_set_ops(struct verbs_context *vctx, const struct verbs_context_ops *ops);

int ibv_cmd_get_context(struct verbs_context *context, struct ibv_get_context *cmd,
			size_t cmd_size, struct ib_uverbs_get_context_resp *resp,
			size_t resp_size);
int ibv_cmd_query_device_any(struct ibv_context *context,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size,
			     struct ib_uverbs_ex_query_device_resp *resp, size_t *resp_size);
int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
		       struct ibv_port_attr *port_attr, struct ibv_query_port *cmd,
		       size_t cmd_size);
int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd, struct ibv_alloc_pd *cmd,
		     size_t cmd_size, struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size);
int ibv_cmd_dealloc_pd(struct ibv_pd *pd);
int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type, struct ibv_mw *mw,
		     struct ibv_alloc_mw *cmd, size_t cmd_size,
		     struct ib_uverbs_alloc_mw_resp *resp, size_t resp_size);
int ibv_cmd_dealloc_mw(struct ibv_mw *mw);
int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va, int access,
		   struct verbs_mr *vmr, struct ibv_reg_mr *cmd, size_t cmd_size,
		   struct ib_uverbs_reg_mr_resp *resp, size_t resp_size);
int ibv_cmd_dereg_mr(struct verbs_mr *vmr);
int ibv_cmd_query_mr(struct ibv_pd *pd, struct verbs_mr *vmr, uint32_t mr_handle);
int ibv_cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags, void *addr, size_t length,
		     uint64_t hca_va, int access, struct ibv_pd *pd, struct ibv_rereg_mr *cmd,
		     size_t cmd_sz, struct ib_uverbs_rereg_mr_resp *resp, size_t resp_sz);
int ibv_cmd_create_cq(struct ibv_context *context, int cqe, struct ibv_comp_channel *channel,
		      int comp_vector, struct ibv_cq *cq, struct ibv_create_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_create_cq_resp *resp, size_t resp_size);
int ibv_cmd_destroy_cq(struct ibv_cq *cq);
/* cq is rdma-core's struct verbs_cq, a union of ibv_cq and ibv_cq_ex. */
int ibv_cmd_create_cq_ex(struct ibv_context *context, const struct ibv_cq_init_attr_ex *cq_attr,
			 struct ibv_cq_ex *cq, struct ibv_create_cq_ex *cmd, size_t cmd_size,
			 struct ib_uverbs_ex_create_cq_resp *resp, size_t resp_size,
			 uint32_t cmd_flags);
int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd, size_t cmd_size,
		      struct ib_uverbs_resize_cq_resp *resp, size_t resp_size);
int ibv_cmd_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc);
int ibv_cmd_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp, struct ibv_qp_init_attr *attr,
		      struct ibv_create_qp *cmd, size_t cmd_size,
		      struct ib_uverbs_create_qp_resp *resp, size_t resp_size);
/* attr->comp_mask: PD, XRCD and SEND_OPS_FLAGS only; the same udata as
 * ibv_cmd_create_qp's.
 */
int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp,
			 struct ibv_qp_init_attr_ex *attr_ex, struct ibv_create_qp *cmd,
			 size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
			 size_t resp_size);
int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
		      struct ibv_modify_qp *cmd, size_t cmd_size);
int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr, int attr_mask,
		     struct ibv_qp_init_attr *qp_init_attr, struct ibv_query_qp *cmd,
		     size_t cmd_size);
int ibv_cmd_destroy_qp(struct ibv_qp *qp);
int ibv_cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int ibv_cmd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
int ibv_cmd_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr);
int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq, struct ibv_srq_init_attr *attr,
		       struct ibv_create_srq *cmd, size_t cmd_size,
		       struct ib_uverbs_create_srq_resp *resp, size_t resp_size);
int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask,
		       struct ibv_modify_srq *cmd, size_t cmd_size);
int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		      struct ibv_query_srq *cmd, size_t cmd_size);
int ibv_cmd_destroy_srq(struct ibv_srq *srq);
int ibv_cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq,
			  struct ibv_srq_init_attr_ex *attr_ex, struct ibv_create_xsrq *cmd,
			  size_t cmd_size, struct ib_uverbs_create_srq_resp *resp,
			  size_t resp_size);
int ibv_cmd_open_xrcd(struct ibv_context *context, struct verbs_xrcd *xrcd, int vxrcd_size,
		      struct ibv_xrcd_init_attr *attr, struct ibv_open_xrcd *cmd,
		      size_t cmd_size, struct ib_uverbs_open_xrcd_resp *resp,
		      size_t resp_size);
int ibv_cmd_close_xrcd(struct verbs_xrcd *xrcd);
int ibv_cmd_open_qp(struct ibv_context *context, struct verbs_qp *qp, int vqp_sz,
		    struct ibv_qp_open_attr *attr, struct ibv_open_qp *cmd, size_t cmd_size,
		    struct ib_uverbs_create_qp_resp *resp, size_t resp_size);
int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah, struct ibv_ah_attr *attr,
		      struct ib_uverbs_create_ah_resp *resp, size_t resp_size);
int ibv_cmd_destroy_ah(struct ibv_ah *ah);
int ibv_cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp,
			  struct ibv_qp_init_attr_ex *qp_attr, struct ibv_create_qp_ex *cmd,
			  size_t cmd_size, struct ib_uverbs_ex_create_qp_resp *resp,
			  size_t resp_size);
int ibv_cmd_create_wq(struct ibv_context *context, struct ibv_wq_init_attr *wq_init_attr,
		      struct ibv_wq *wq, struct ibv_create_wq *cmd, size_t cmd_size,
		      struct ib_uverbs_ex_create_wq_resp *resp, size_t resp_size);
int ibv_cmd_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr, struct ibv_modify_wq *cmd,
		      size_t cmd_size);
int ibv_cmd_destroy_wq(struct ibv_wq *wq);
int ibv_cmd_create_rwq_ind_table(struct ibv_context *context,
				 struct ibv_rwq_ind_table_init_attr *init_attr,
				 struct ibv_rwq_ind_table *rwq_ind_table,
				 struct ib_uverbs_ex_create_rwq_ind_table_resp *resp,
				 size_t resp_size);
int ibv_cmd_destroy_rwq_ind_table(struct ibv_rwq_ind_table *rwq_ind_table);
int ibv_cmd_create_flow(struct ibv_qp *qp, struct ibv_flow *flow_id,
			struct ibv_flow_attr *flow_attr, void *ucmd, size_t ucmd_size);
int ibv_cmd_destroy_flow(struct ibv_flow *flow_id);
int ibv_cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int ibv_cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);

/*
 * verbs_init_and_alloc_context - calloc a driver context of *ctx_ptr's
 * type with its struct verbs_context at member, and initialise it.
 */
#define verbs_init_and_alloc_context(ibdev, cmd_fd, ctx_ptr, member, driver_id)     \
	((__typeof__(ctx_ptr))_verbs_init_and_alloc_context(                         \
		ibdev, cmd_fd, sizeof(*(ctx_ptr)),                                    \
		&((__typeof__(ctx_ptr))NULL)->member, (driver_id)))

#endif /* HICAIN_VERBS_PRIVATE_H */
