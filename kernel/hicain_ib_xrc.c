// SPDX-License-Identifier: GPL-2.0
/*
 * hicain_ib_xrc.c - XRC (IBA vol. 1 9.8, 10.2.x, 11.x): XRC domains, the
 * XRC fields of an SRQ and the XRC target QP, on a device of ABI 1.11
 * with HICAIN_CAP_XRC.
 *
 * ib_core keeps the domain's sharing (ibv_open_xrcd through one file
 * from several processes) and the opened handles of a target QP
 * (ib_open_qp): the device sees one ALLOC_XRCD per domain and one
 * CREATE_QP per target QP. A target QP has no PD, CQs or rings; each
 * XRC request names, in its XRCETH, an XRC SRQ of the domain, which
 * takes the receive and completes on its own CQ. The initiator is an
 * RC send queue (hicain_create_qp) whose WQEs carry the SRQ number.
 */

#include <rdma/ib_verbs.h>

#include "hicain_ib.h"

/* hicain_has_cap - the device speaks ABI 1.minor or later and says cap. */
bool hicain_has_cap(struct hicain_ibdev *hidev, u16 minor, u32 cap)
{
	return hicain_abi_minor_at_least(hidev, minor) &&
	       (le32_to_cpu(READ_ONCE(hidev->hdev->hdr->caps)) & cap);
}

/* hicain_xrc_ok - the device does XRC (ABI 1.11, HICAIN_CAP_XRC). */
bool hicain_xrc_ok(struct hicain_ibdev *hidev)
{
	return hicain_has_cap(hidev, 11, HICAIN_CAP_XRC);
}

/* hicain_tm_ok - the device does tag matching (ABI 1.13, HICAIN_CAP_TM). */
bool hicain_tm_ok(struct hicain_ibdev *hidev)
{
	return hicain_has_cap(hidev, 13, HICAIN_CAP_TM);
}

int hicain_alloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibxrcd->device);
	struct hicain_xrcd *xrcd = to_hxrcd(ibxrcd);
	struct hicain_admin_cmd cmd = {};

	if (!hicain_xrc_ok(hidev))
		return -EOPNOTSUPP;
	return hicain_create_handle(hidev, &cmd, HICAIN_CMD_ALLOC_XRCD, &xrcd->epoch, &xrcd->xrcdn);
}

int hicain_dealloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata)
{
	struct hicain_xrcd *xrcd = to_hxrcd(ibxrcd);

	return hicain_destroy_handle(to_hidev(ibxrcd->device), xrcd->epoch,
				     HICAIN_CMD_DEALLOC_XRCD, xrcd->xrcdn);
}

/*
 * hicain_xrc_srq_cmd - the XRC or TM fields of CREATE_SRQ for init; 0 for
 * a basic SRQ, -EOPNOTSUPP for a type the device lacks. A TM SRQ's ops
 * ring (HICAIN_TM_OPS_DEPTH entries) is hicain_create_srq's to map.
 */
int hicain_xrc_srq_cmd(struct hicain_ibdev *hidev, const struct ib_srq_init_attr *init,
		       struct hicain_cmd_create_srq *c)
{
	switch (init->srq_type) {
	case IB_SRQT_BASIC:
		return 0;
	case IB_SRQT_XRC:
		if (!hicain_xrc_ok(hidev) || !init->ext.xrc.xrcd || !init->ext.cq)
			return -EOPNOTSUPP;
		c->srq_type = cpu_to_le32(HICAIN_SRQT_XRC);
		c->xrcd = cpu_to_le32(to_hxrcd(init->ext.xrc.xrcd)->xrcdn);
		c->cq = cpu_to_le32(to_hcq(init->ext.cq)->cqn);
		return 0;
	case IB_SRQT_TM:
		/* The tag list's operations come from user space only
		 * (ibv_post_srq_ops through the mapped ops ring).
		 */
		if (!hicain_tm_ok(hidev) || !init->ext.cq)
			return -EOPNOTSUPP;
		if (!init->ext.tag_matching.max_num_tags ||
		    init->ext.tag_matching.max_num_tags > HICAIN_TM_MAX_TAGS)
			return -EINVAL;
		c->srq_type = cpu_to_le32(HICAIN_SRQT_TM);
		c->cq = cpu_to_le32(to_hcq(init->ext.cq)->cqn);
		c->max_num_tags = cpu_to_le32(init->ext.tag_matching.max_num_tags);
		c->max_ops = cpu_to_le32(HICAIN_TM_MAX_OPS);
		c->ops_depth = cpu_to_le32(HICAIN_TM_OPS_DEPTH);
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

/*
 * hicain_create_xrc_tgt - an XRC target QP of init->xrc's domain. ib_core
 * creates it without udata (the process holds it through ib_open_qp
 * handles) and without PD or CQs; the device wants its domain only.
 */
int hicain_create_xrc_tgt(struct ib_qp *ibqp, struct ib_qp_init_attr *init)
{
	struct hicain_ibdev *hidev = to_hidev(ibqp->device);
	struct hicain_qp *qp = to_hqp(ibqp);
	struct hicain_admin_cmd cmd = {};
	int ret;

	if (!hicain_xrc_ok(hidev) || !init->xrcd)
		return -EOPNOTSUPP;
	if (init->create_flags)
		return -EOPNOTSUPP;
	cmd.create_qp.qp_type = cpu_to_le32(HICAIN_QPT_XRC_TGT);
	cmd.create_qp.xrcd = cpu_to_le32(to_hxrcd(init->xrcd)->xrcdn);
	ret = hicain_create_handle(hidev, &cmd, HICAIN_CMD_CREATE_QP, &qp->epoch, &qp->qpn);
	if (ret)
		return ret;
	ibqp->qp_num = qp->qpn;
	ret = xa_insert_irq(&hidev->qps, qp->qpn, qp, GFP_KERNEL);
	if (ret) {
		hicain_admin_handle(hidev, HICAIN_CMD_DESTROY_QP, qp->qpn, NULL);
		return ret;
	}
	memset(&qp->cap, 0, sizeof(qp->cap));
	init->cap = qp->cap;
	return 0;
}
