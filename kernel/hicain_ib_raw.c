// SPDX-License-Identifier: GPL-2.0
/*
 * hicain_ib_raw.c - flow steering for raw packet QPs (ABI 1.15,
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
	return !hidev->ib && hicain_has_cap(hidev, 15, HICAIN_CAP_RAW);
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

static int hicain_flow_ipv4(struct hicain_cmd_create_flow *c, u32 *match,
			    const struct ib_flow_spec_ipv4 *s)
{
	if (s->size < sizeof(*s))
		return -EINVAL;
	if (s->mask.tos || s->mask.ttl || s->mask.flags)
		return -EOPNOTSUPP;
	memcpy(c->src_ip, &s->val.src_ip, 4);
	memcpy(c->src_ip_mask, &s->mask.src_ip, 4);
	memcpy(c->dst_ip, &s->val.dst_ip, 4);
	memcpy(c->dst_ip_mask, &s->mask.dst_ip, 4);
	c->ip_proto = s->val.proto;
	c->ip_proto_mask = s->mask.proto;
	return hicain_flow_header(match, HICAIN_FLOW_IPV4);
}

static int hicain_flow_ipv6(struct hicain_cmd_create_flow *c, u32 *match,
			    const struct ib_flow_spec_ipv6 *s)
{
	if (s->size < sizeof(*s))
		return -EINVAL;
	if (s->mask.flow_label || s->mask.traffic_class || s->mask.hop_limit)
		return -EOPNOTSUPP;
	memcpy(c->src_ip, s->val.src_ip, 16);
	memcpy(c->src_ip_mask, s->mask.src_ip, 16);
	memcpy(c->dst_ip, s->val.dst_ip, 16);
	memcpy(c->dst_ip_mask, s->mask.dst_ip, 16);
	c->ip_proto = s->val.next_hdr;
	c->ip_proto_mask = s->mask.next_hdr;
	return hicain_flow_header(match, HICAIN_FLOW_IPV6);
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
	switch (s->type) {
	case IB_FLOW_SPEC_ETH:
		return hicain_flow_eth(c, match, &s->eth);
	case IB_FLOW_SPEC_IPV4:
		return hicain_flow_ipv4(c, match, &s->ipv4);
	case IB_FLOW_SPEC_IPV6:
		return hicain_flow_ipv6(c, match, &s->ipv6);
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
