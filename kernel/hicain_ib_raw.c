// SPDX-License-Identifier: GPL-2.0
/*
 * hicain_ib_raw.c - flow steering for raw packet QPs (ABI 1.16,
 * HICAIN_CAP_RAW).
 *
 * A raw packet QP (IB_QPT_RAW_PACKET, user space only: ib_core asks for
 * CAP_NET_RAW) is created by hicain_create_qp like any other; its send
 * WQEs carry whole Ethernet frames. It receives the frames its flows
 * select: ib_core parses ibv_create_flow's specs into an ib_flow_attr,
 * which becomes one CREATE_FLOW of the Ethernet, IPv4 or IPv6 and TCP
 * or UDP fields the device matches under their masks. A spec the
 * device cannot match (another type, inner headers, actions, a mask on
 * a field it does not compare) is EOPNOTSUPP, as for any flow the
 * hardware cannot steer.
 */

#include <linux/slab.h>
#include <linux/string.h>
#include <rdma/ib_verbs.h>

#include "hicain_ib.h"

/* hicain_raw_ok - the device has raw packet QPs (Ethernet ports only). */
bool hicain_raw_ok(struct hicain_ibdev *hidev)
{
	return !hidev->ib && hicain_has_cap(hidev, 16, HICAIN_CAP_RAW);
}

/* hicain_flow_header - note header bit in *match, once. */
static int hicain_flow_header(u32 *match, u32 bit)
{
	if (*match & bit)
		return -EINVAL;
	*match |= bit;
	return 0;
}

static int hicain_flow_eth(struct hicain_cmd_create_flow *c, u32 *match,
			   const struct ib_flow_spec_eth *s)
{
	if (s->size < sizeof(*s))
		return -EINVAL;
	memcpy(c->dmac, s->val.dst_mac, sizeof(c->dmac));
	memcpy(c->dmac_mask, s->mask.dst_mac, sizeof(c->dmac_mask));
	memcpy(c->smac, s->val.src_mac, sizeof(c->smac));
	memcpy(c->smac_mask, s->mask.src_mac, sizeof(c->smac_mask));
	memcpy(c->ether_type, &s->val.ether_type, sizeof(c->ether_type));
	memcpy(c->ether_type_mask, &s->mask.ether_type, sizeof(c->ether_type_mask));
	memcpy(c->vlan_tag, &s->val.vlan_tag, sizeof(c->vlan_tag));
	memcpy(c->vlan_tag_mask, &s->mask.vlan_tag, sizeof(c->vlan_tag_mask));
	return hicain_flow_header(match, HICAIN_FLOW_ETH);
}

/* hicain_flow_addrs - the IP addresses and masks of a spec, len bytes each. */
static void hicain_flow_addrs(struct hicain_cmd_create_flow *c, const void *src,
			      const void *src_mask, const void *dst, const void *dst_mask,
			      size_t len)
{
	memcpy(c->src_ip, src, len);
	memcpy(c->src_ip_mask, src_mask, len);
	memcpy(c->dst_ip, dst, len);
	memcpy(c->dst_ip_mask, dst_mask, len);
}

/*
 * hicain_flow_ip - the protocol (IPv4) or next header (IPv6) of an IP
 * spec, after hicain_flow_addrs: TOS, TTL and flags, traffic class, flow
 * label and hop limit cannot be matched (the caller refuses them).
 */
static int hicain_flow_ip(struct hicain_cmd_create_flow *c, u32 *match, u32 header,
			  u8 proto, u8 proto_mask)
{
	c->ip_proto = proto;
	c->ip_proto_mask = proto_mask;
	return hicain_flow_header(match, header);
}

static int hicain_flow_l4(struct hicain_cmd_create_flow *c, u32 *match,
			  const struct ib_flow_spec_tcp_udp *s, u32 bit)
{
	if (s->size < sizeof(*s))
		return -EINVAL;
	memcpy(c->src_port, &s->val.src_port, 2);
	memcpy(c->src_port_mask, &s->mask.src_port, 2);
	memcpy(c->dst_port, &s->val.dst_port, 2);
	memcpy(c->dst_port_mask, &s->mask.dst_port, 2);
	return hicain_flow_header(match, bit);
}

/* hicain_flow_spec - add one of ib_core's specs to the command. */
static int hicain_flow_spec(struct hicain_cmd_create_flow *c, u32 *match,
			    const union ib_flow_spec *s)
{
	const struct ib_flow_spec_ipv4 *v4 = &s->ipv4;
	const struct ib_flow_spec_ipv6 *v6 = &s->ipv6;

	switch (s->type) {
	case IB_FLOW_SPEC_ETH:
		return hicain_flow_eth(c, match, &s->eth);
	case IB_FLOW_SPEC_IPV4:
		if (v4->size < sizeof(*v4) || v4->mask.tos || v4->mask.ttl || v4->mask.flags)
			return v4->size < sizeof(*v4) ? -EINVAL : -EOPNOTSUPP;
		hicain_flow_addrs(c, &v4->val.src_ip, &v4->mask.src_ip, &v4->val.dst_ip, &v4->mask.dst_ip, 4);
		return hicain_flow_ip(c, match, HICAIN_FLOW_IPV4, v4->val.proto, v4->mask.proto);
	case IB_FLOW_SPEC_IPV6:
		if (v6->size < sizeof(*v6) || v6->mask.flow_label || v6->mask.traffic_class ||
		    v6->mask.hop_limit)
			return v6->size < sizeof(*v6) ? -EINVAL : -EOPNOTSUPP;
		hicain_flow_addrs(c, v6->val.src_ip, v6->mask.src_ip, v6->val.dst_ip, v6->mask.dst_ip, 16);
		return hicain_flow_ip(c, match, HICAIN_FLOW_IPV6, v6->val.next_hdr, v6->mask.next_hdr);
	case IB_FLOW_SPEC_TCP:
		return hicain_flow_l4(c, match, &s->tcp_udp, HICAIN_FLOW_TCP);
	case IB_FLOW_SPEC_UDP:
		return hicain_flow_l4(c, match, &s->tcp_udp, HICAIN_FLOW_UDP);
	default:		/* inner headers, tunnels, actions, IB */
		return -EOPNOTSUPP;
	}
}

/* hicain_flow_cmd - CREATE_FLOW from ib_core's attributes. */
static int hicain_flow_cmd(struct hicain_cmd_create_flow *c, const struct ib_flow_attr *attr)
{
	const u8 *p = (const u8 *)(attr + 1), *end = (const u8 *)attr + attr->size;
	u32 match = 0;
	int i, ret;

	if (attr->type != IB_FLOW_ATTR_NORMAL || attr->flags || attr->port != 1)
		return -EOPNOTSUPP;
	for (i = 0; i < attr->num_of_specs; i++) {
		const union ib_flow_spec *s = (const void *)p;

		if (end - p < 8 || s->size < 8 || s->size > end - p)
			return -EINVAL;
		ret = hicain_flow_spec(c, &match, s);
		if (ret)
			return ret;
		p += s->size;
	}
	if ((match & (HICAIN_FLOW_IPV4 | HICAIN_FLOW_IPV6)) == (HICAIN_FLOW_IPV4 | HICAIN_FLOW_IPV6) ||
	    (match & (HICAIN_FLOW_TCP | HICAIN_FLOW_UDP)) == (HICAIN_FLOW_TCP | HICAIN_FLOW_UDP))
		return -EINVAL;
	c->match = cpu_to_le32(match);
	c->priority = cpu_to_le16(attr->priority);
	c->port = 1;
	return 0;
}

struct ib_flow *hicain_create_flow(struct ib_qp *ibqp, struct ib_flow_attr *attr,
				   struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibqp->device);
	struct hicain_admin_cmd cmd = {};
	struct hicain_flow *flow;
	int ret;

	if (!hicain_raw_ok(hidev) || ibqp->qp_type != IB_QPT_RAW_PACKET)
		return ERR_PTR(-EOPNOTSUPP);
	if (udata && udata->inlen && !ib_is_udata_cleared(udata, 0, udata->inlen))
		return ERR_PTR(-EOPNOTSUPP);	/* no driver data is defined */
	ret = hicain_flow_cmd(&cmd.create_flow, attr);
	if (ret)
		return ERR_PTR(ret);
	cmd.create_flow.qpn = cpu_to_le32(to_hqp(ibqp)->qpn);
	flow = kzalloc(sizeof(*flow), GFP_KERNEL);
	if (!flow)
		return ERR_PTR(-ENOMEM);
	flow->hidev = hidev;
	ret = hicain_create_handle(hidev, &cmd, HICAIN_CMD_CREATE_FLOW, &flow->epoch, &flow->handle);
	if (ret) {
		kfree(flow);
		return ERR_PTR(ret);
	}
	return &flow->ibflow;
}

int hicain_destroy_flow(struct ib_flow *ibflow)
{
	struct hicain_flow *flow = container_of(ibflow, struct hicain_flow, ibflow);
	int ret;

	ret = hicain_destroy_handle(flow->hidev, flow->epoch, HICAIN_CMD_DESTROY_FLOW, flow->handle);
	if (ret)
		return ret;
	kfree(flow);
	return 0;
}

/*
 * Receive-side scaling. A work queue (ibv_create_wq, IB_WQT_RQ) is the
 * device's raw packet QP without a send queue, its RQ mapped to the
 * process; RDY is the QP's RTR. ib_core keeps an indirection table's
 * work queues; an RSS QP (a raw packet QP created with the table and
 * ibv_rx_hash_conf in the driver data) is a raw QP without queues that
 * SET_RSS gives the table and the Toeplitz hash. Its flows' frames go
 * to the work queue the hash picks.
 */

static inline struct hicain_rwq *to_hrwq(struct ib_wq *ibwq)
{
	return container_of(ibwq, struct hicain_rwq, ibwq);
}

/* hicain_rwq_release - free the work queue, or keep its ring (in_use). */
static void hicain_rwq_release(struct hicain_ibdev *hidev, struct hicain_rwq *rwq, bool in_use)
{
	struct hicain_wq_dbrec *dbrecs = NULL;	/* the dbrec is in the mapped pages */
	struct hicain_wq none = {};

	hicain_wqs_release(hidev, &rwq->rq, &none, &dbrecs, 0, 0, in_use);
	kfree(rwq);
}

struct ib_wq *hicain_create_wq(struct ib_pd *ibpd, struct ib_wq_init_attr *init,
			       struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibpd->device);
	struct hicain_dev_hdr *h = hidev->hdev->hdr;
	struct hicain_ib_create_wq_resp resp = {};
	struct hicain_admin_cmd cmd = {};
	struct hicain_cmd_create_qp *c = &cmd.create_qp;
	struct hicain_rwq *rwq;
	u32 depth, sge;
	int ret;

	if (!udata || !hicain_raw_ok(hidev) || init->wq_type != IB_WQT_RQ || init->create_flags)
		return ERR_PTR(-EOPNOTSUPP);
	if (init->max_wr > le32_to_cpu(READ_ONCE(h->max_qp_wr)) ||
	    init->max_sge > le32_to_cpu(READ_ONCE(h->max_sge)))
		return ERR_PTR(-EINVAL);
	rwq = kzalloc(sizeof(*rwq), GFP_KERNEL);
	if (!rwq)
		return ERR_PTR(-ENOMEM);
	depth = roundup_pow_of_two(max(init->max_wr, 1U));
	sge = max(init->max_sge, 1U);
	hicain_wq_init(&rwq->rq, depth, ALIGN(sizeof(struct hicain_recv_wqe) +
					     sge * sizeof(struct hicain_sge), 16), sge);
	ret = hicain_wq_alloc_user(hidev, udata, &rwq->rq);
	if (ret) {
		kfree(rwq);
		return ERR_PTR(ret < 0 ? ret : -EINVAL);	/* 1: too large to map */
	}
	c->pd = cpu_to_le32(to_hpd(ibpd)->pdn);
	c->qp_type = cpu_to_le32(IB_QPT_RAW_PACKET);
	c->send_cq = cpu_to_le32(to_hcq(init->cq)->cqn);
	c->recv_cq = c->send_cq;
	c->rq_depth = cpu_to_le32(depth);	/* sq_depth 0: no send queue */
	c->max_recv_sge = cpu_to_le32(sge);
	c->rq_stride = cpu_to_le32(rwq->rq.stride);
	c->rq_gpa = cpu_to_le64(rwq->rq.ring_dma);
	c->rq_dbrec_gpa = cpu_to_le64(rwq->rq.dbrec_dma);
	ret = hicain_create_handle(hidev, &cmd, HICAIN_CMD_CREATE_QP, &rwq->epoch, &rwq->qpn);
	if (ret)
		goto err_free;
	hicain_uq_resp(&rwq->rq.uq, depth, rwq->rq.stride, &resp.rq);
	resp.wqn = rwq->qpn;
	resp.max_sge = sge;
	ret = hicain_udata_resp(udata, &resp, sizeof(resp));
	if (ret) {
		hicain_rwq_release(hidev, rwq, !hicain_undo_create(hidev, HICAIN_CMD_DESTROY_QP, rwq->qpn));
		return ERR_PTR(ret);
	}
	rwq->ibwq.wq_num = rwq->qpn;
	rwq->state = IB_WQS_RESET;
	init->max_wr = depth;
	init->max_sge = sge;
	return &rwq->ibwq;

err_free:
	hicain_rwq_release(hidev, rwq, hicain_admin_lost(ret));
	return ERR_PTR(ret);
}

/* hicain_wq_qp_state - MODIFY_QP of a work queue's QP to state. */
static int hicain_wq_qp_state(struct hicain_ibdev *hidev, struct hicain_rwq *rwq,
			      enum ib_qp_state state)
{
	struct hicain_admin_cmd cmd = {};
	struct hicain_cmd_modify_qp *m = &cmd.modify_qp;
	u32 mask = IB_QP_STATE;

	cmd.opcode = cpu_to_le16(HICAIN_CMD_MODIFY_QP);
	m->qpn = cpu_to_le32(rwq->qpn);
	m->attr.qp_state = cpu_to_le32(state);
	if (state == IB_QPS_INIT) {
		mask |= IB_QP_PORT;
		m->attr.port_num = 1;
	}
	m->attr_mask = cpu_to_le32(mask);
	return hicain_admin_exec(hidev->hdev, &cmd, NULL);
}

int hicain_modify_wq(struct ib_wq *ibwq, struct ib_wq_attr *attr, u32 mask, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibwq->device);
	struct hicain_rwq *rwq = to_hrwq(ibwq);
	enum ib_wq_state cur = rwq->state;
	int ret = 0;

	if (mask & ~(IB_WQ_STATE | IB_WQ_CUR_STATE))
		return -EOPNOTSUPP;	/* no stripping, FCS or padding flags */
	if ((mask & IB_WQ_CUR_STATE) && attr->curr_wq_state != cur)
		return -EINVAL;
	if (!(mask & IB_WQ_STATE))
		return 0;
	switch (attr->wq_state) {
	case IB_WQS_RDY:
		if (cur == IB_WQS_ERR)
			return -EINVAL;
		if (cur == IB_WQS_RESET) {
			ret = hicain_wq_qp_state(hidev, rwq, IB_QPS_INIT);
			if (!ret)
				ret = hicain_wq_qp_state(hidev, rwq, IB_QPS_RTR);
		}
		break;
	case IB_WQS_ERR:
		ret = hicain_wq_qp_state(hidev, rwq, IB_QPS_ERR);
		break;
	case IB_WQS_RESET:
		ret = hicain_wq_qp_state(hidev, rwq, IB_QPS_RESET);
		break;
	default:
		return -EINVAL;
	}
	if (!ret)
		rwq->state = ibwq->state = attr->wq_state;
	return ret;
}

int hicain_destroy_wq(struct ib_wq *ibwq, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibwq->device);
	struct hicain_rwq *rwq = to_hrwq(ibwq);
	int ret = hicain_destroy_handle(hidev, rwq->epoch, HICAIN_CMD_DESTROY_QP, rwq->qpn);

	if (!ret)
		hicain_rwq_release(hidev, rwq, hicain_ib_dead(hidev));
	return ret;
}

/*
 * The table is ib_core's; the device gets it with the RSS QP that uses
 * it (SET_RSS), so it may hold HICAIN_RSS_MAX_TABLE work queues.
 */
int hicain_create_rwq_ind_table(struct ib_rwq_ind_table *tbl,
				struct ib_rwq_ind_table_init_attr *init, struct ib_udata *udata)
{
	static atomic_t next_tbl = ATOMIC_INIT(0);

	if (!hicain_raw_ok(to_hidev(tbl->device)))
		return -EOPNOTSUPP;
	if ((1U << init->log_ind_tbl_size) > HICAIN_RSS_MAX_TABLE)
		return -EINVAL;
	tbl->ind_tbl_num = atomic_inc_return(&next_tbl);
	return 0;
}

int hicain_destroy_rwq_ind_table(struct ib_rwq_ind_table *tbl)
{
	return 0;
}

/* hicain_rss_conf - the hash of an RSS QP's udata into SET_RSS. */
static int hicain_rss_conf(struct ib_udata *udata, struct hicain_cmd_set_rss *r)
{
	struct hicain_ib_create_qp_rss ucmd = {};
	int ret;

	if (udata->inlen < sizeof(ucmd))
		return -EINVAL;
	ret = ib_copy_from_udata(&ucmd, udata, sizeof(ucmd));
	if (ret)
		return ret;
	if (ucmd.rx_hash_function != HICAIN_RX_HASH_FUNC_TOEPLITZ ||
	    ucmd.rx_hash_key_len != HICAIN_RSS_KEY_LEN || ucmd.rx_hash_fields_mask & ~0xffULL)
		return -EOPNOTSUPP;	/* other functions, inner headers, IPsec */
	r->fields = cpu_to_le64(ucmd.rx_hash_fields_mask);
	memcpy(r->key, ucmd.rx_hash_key, sizeof(r->key));
	return 0;
}

int hicain_create_rss_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibqp->device);
	struct ib_rwq_ind_table *tbl = init->rwq_ind_tbl;
	struct hicain_qp *qp = to_hqp(ibqp);
	struct hicain_ib_create_qp_resp resp = {};
	struct hicain_admin_cmd cmd = {}, rss = {};
	struct hicain_cmd_create_qp *c = &cmd.create_qp;
	struct hicain_cmd_set_rss *r = &rss.set_rss;
	u32 i;
	int ret;

	if (init->create_flags || init->srq || init->cap.max_send_wr || init->cap.max_recv_wr)
		return -EOPNOTSUPP;
	ret = hicain_rss_conf(udata, r);
	if (ret)
		return ret;
	r->log_table = cpu_to_le32(tbl->log_ind_tbl_size);
	for (i = 0; i < (1U << tbl->log_ind_tbl_size); i++)
		r->table[i] = cpu_to_le32(to_hrwq(tbl->ind_tbl[i])->qpn);
	c->pd = cpu_to_le32(to_hpd(ibqp->pd)->pdn);
	c->qp_type = cpu_to_le32(IB_QPT_RAW_PACKET);	/* no queues, no CQs */
	ret = hicain_create_handle(hidev, &cmd, HICAIN_CMD_CREATE_QP, &qp->epoch, &qp->qpn);
	if (ret)
		return ret;
	r->qpn = cpu_to_le32(qp->qpn);
	rss.opcode = cpu_to_le16(HICAIN_CMD_SET_RSS);
	ret = hicain_admin_exec(hidev->hdev, &rss, NULL);
	if (!ret) {
		resp.qpn = qp->qpn;
		ret = hicain_udata_resp(udata, &resp, sizeof(resp));
	}
	if (!ret)
		ret = xa_insert_irq(&hidev->qps, qp->qpn, qp, GFP_KERNEL);
	if (ret) {
		hicain_undo_create(hidev, HICAIN_CMD_DESTROY_QP, qp->qpn);
		return ret;
	}
	ibqp->qp_num = qp->qpn;
	memset(&qp->cap, 0, sizeof(qp->cap));
	init->cap = qp->cap;
	return 0;
}
