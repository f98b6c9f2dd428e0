// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * hicain - the libibverbs provider of the HiNIC emulated RDMA NIC.
 *
 * Every verb goes through the kernel driver hicain_ib.ko (ibv_cmd_*):
 * the device's work and completion queues are rings the kernel driver
 * owns, so posting and polling are uverbs write() commands too, and the
 * provider adds only the driver's private udata (hicain_uverbs_abi.h)
 * to the core commands. libibverbs loads it for the ib_devices of the
 * hicain_net PCI driver (the kernel driver has no driver_id of its own:
 * RDMA_DRIVER_UNKNOWN), whatever their name: the kernel names them
 * hicain_N, and distributions rename RDMA devices after their slot
 * (Debian's rdma-core udev rule: rocep0s4).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/ib_user_ioctl_verbs.h>

#include "verbs_private.h"
#include "hicain_uverbs_abi.h"

struct hicain_device {
	struct verbs_device vdev;
};

struct hicain_context {
	struct verbs_context vctx;
	struct hicain_ib_alloc_ucontext_resp caps;
};

struct hicain_pd {
	struct ibv_pd ibv_pd;
	uint32_t pdn;
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

HICAIN_STATIC_ASSERT(offsetof(struct hicain_get_context_resp, drv) ==
		     sizeof(struct ib_uverbs_get_context_resp));
HICAIN_STATIC_ASSERT(sizeof(struct hicain_get_context_resp) == 8 + 16);
HICAIN_STATIC_ASSERT(offsetof(struct hicain_alloc_pd_resp, drv) ==
		     sizeof(struct ib_uverbs_alloc_pd_resp));
HICAIN_STATIC_ASSERT(sizeof(struct hicain_alloc_pd_resp) == 4 + 8);

static inline struct hicain_context *to_hctx(struct ibv_context *ibctx)
{
	return (struct hicain_context *)((char *)ibctx - offsetof(struct hicain_context, vctx.context));
}

static inline struct hicain_pd *to_hpd(struct ibv_pd *ibpd)
{
	return (struct hicain_pd *)((char *)ibpd - offsetof(struct hicain_pd, ibv_pd));
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

static int hicain_dealloc_pd(struct ibv_pd *ibpd)
{
	int ret;

	ret = ibv_cmd_dealloc_pd(ibpd);
	if (ret)
		return ret;
	free(to_hpd(ibpd));
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

static int hicain_dereg_mr(struct verbs_mr *vmr)
{
	int ret;

	ret = ibv_cmd_dereg_mr(vmr);
	if (ret)
		return ret;
	free(vmr);
	return 0;
}

static struct ibv_cq *hicain_create_cq(struct ibv_context *context, int cqe,
				       struct ibv_comp_channel *channel, int comp_vector)
{
	struct ib_uverbs_create_cq_resp resp;
	struct ibv_create_cq cmd;
	struct ibv_cq *cq;
	int ret;

	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_create_cq(context, cqe, channel, comp_vector, cq, &cmd, sizeof(cmd), &resp,
				sizeof(resp));
	if (ret) {
		free(cq);
		errno = ret;
		return NULL;
	}
	return cq;
}

static int hicain_destroy_cq(struct ibv_cq *cq)
{
	int ret;

	ret = ibv_cmd_destroy_cq(cq);
	if (ret)
		return ret;
	free(cq);
	return 0;
}

static struct ibv_qp *hicain_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ib_uverbs_create_qp_resp resp;
	struct ibv_create_qp cmd;
	struct ibv_qp *qp;
	int ret;

	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_create_qp(pd, qp, attr, &cmd, sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(qp);
		errno = ret;
		return NULL;
	}
	return qp;
}

static int hicain_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct ibv_modify_qp cmd;

	return ibv_cmd_modify_qp(qp, attr, attr_mask, &cmd, sizeof(cmd));
}

static int hicain_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
			   struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd;

	return ibv_cmd_query_qp(qp, attr, attr_mask, init_attr, &cmd, sizeof(cmd));
}

static int hicain_destroy_qp(struct ibv_qp *qp)
{
	int ret;

	ret = ibv_cmd_destroy_qp(qp);
	if (ret)
		return ret;
	free(qp);
	return 0;
}

static struct ibv_ah *hicain_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ib_uverbs_create_ah_resp resp;
	struct ibv_ah *ah;
	int ret;

	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	/* The kernel resolves the RoCE DMAC and SGID of the address. */
	ret = ibv_cmd_create_ah(pd, ah, attr, &resp, sizeof(resp));
	if (ret) {
		free(ah);
		errno = ret;
		return NULL;
	}
	return ah;
}

static int hicain_destroy_ah(struct ibv_ah *ah)
{
	int ret;

	ret = ibv_cmd_destroy_ah(ah);
	if (ret)
		return ret;
	free(ah);
	return 0;
}

static struct ibv_srq *hicain_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ib_uverbs_create_srq_resp resp;
	struct ibv_create_srq cmd;
	struct ibv_srq *srq;
	int ret;

	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}
	/* attr comes back with the ring's actual max_wr and max_sge. */
	ret = ibv_cmd_create_srq(pd, srq, attr, &cmd, sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(srq);
		errno = ret;
		return NULL;
	}
	return srq;
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

static int hicain_destroy_srq(struct ibv_srq *srq)
{
	int ret;

	ret = ibv_cmd_destroy_srq(srq);
	if (ret)
		return ret;
	free(srq);
	return 0;
}

static void hicain_free_context(struct ibv_context *ibctx)
{
	struct hicain_context *ctx = to_hctx(ibctx);

	verbs_uninit_context(&ctx->vctx);
	free(ctx);
}

/* Posting (SRQs included), polling, arming and multicast are the uverbs
 * commands as they are: the kernel driver owns the rings.
 */
static const struct verbs_context_ops hicain_ctx_ops = {
	.alloc_pd = hicain_alloc_pd,
	.attach_mcast = ibv_cmd_attach_mcast,
	.create_ah = hicain_create_ah,
	.create_cq = hicain_create_cq,
	.create_qp = hicain_create_qp,
	.create_srq = hicain_create_srq,
	.dealloc_pd = hicain_dealloc_pd,
	.dereg_mr = hicain_dereg_mr,
	.destroy_ah = hicain_destroy_ah,
	.destroy_cq = hicain_destroy_cq,
	.destroy_qp = hicain_destroy_qp,
	.destroy_srq = hicain_destroy_srq,
	.detach_mcast = ibv_cmd_detach_mcast,
	.free_context = hicain_free_context,
	.modify_qp = hicain_modify_qp,
	.modify_srq = hicain_modify_srq,
	.poll_cq = ibv_cmd_poll_cq,
	.post_recv = ibv_cmd_post_recv,
	.post_send = ibv_cmd_post_send,
	.post_srq_recv = ibv_cmd_post_srq_recv,
	.query_device_ex = hicain_query_device_ex,
	.query_port = hicain_query_port,
	.query_qp = hicain_query_qp,
	.query_srq = hicain_query_srq,
	.reg_mr = hicain_reg_mr,
	.req_notify_cq = ibv_cmd_req_notify_cq,
};

static struct verbs_context *hicain_alloc_context(struct ibv_device *ibdev, int cmd_fd,
						  void *private_data)
{
	struct hicain_get_context_resp resp = {};
	struct ibv_get_context cmd;
	struct hicain_context *ctx;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, vctx, RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;
	if (ibv_cmd_get_context(&ctx->vctx, &cmd, sizeof(cmd), &resp.core, sizeof(resp))) {
		verbs_uninit_context(&ctx->vctx);
		free(ctx);
		return NULL;
	}
	ctx->caps = resp.drv;
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
};

static void __attribute__((constructor)) hicain_register_driver(void)
{
	verbs_register_driver_34(&hicain_dev_ops);
}
