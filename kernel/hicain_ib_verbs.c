// SPDX-License-Identifier: GPL-2.0
/*
 * hicain_ib_verbs.c - the verbs of hicain_ib (hicain_ib_dev_ops): device
 * and port queries, the GID table, PDs, MRs, CQs, QPs and the kernel
 * data path (post_send, post_recv, poll_cq), AHs, SRQs and multicast.
 */

#include <linux/dma-mapping.h>
#include <linux/inetdevice.h>
#include <linux/ioport.h>
#include <linux/mm.h>
#include <linux/netdevice.h>
#include <linux/vmalloc.h>
#include <asm/unaligned.h>
#include <net/addrconf.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/iter.h>

#include "hicain_ib.h"

/*
 * Attributes the device's structures and ib_core's hold under the same
 * name, copied by a list X(field, bits) of them: bits is the width of
 * the device's little-endian field (8: a byte, no byte order).
 */
#define HICAIN_LE_TO_CPU_8(v)	(v)
#define HICAIN_LE_TO_CPU_16(v)	le16_to_cpu(v)
#define HICAIN_LE_TO_CPU_32(v)	le32_to_cpu(v)
#define HICAIN_CPU_TO_LE_8(v)	(v)
#define HICAIN_CPU_TO_LE_16(v)	cpu_to_le16(v)
#define HICAIN_CPU_TO_LE_32(v)	cpu_to_le32(v)

/* HICAIN_FROM_DEV - ib_core's @dst->@f from the device's @src->@f. */
#define HICAIN_FROM_DEV(dst, src, f, bits)	((dst)->f = HICAIN_LE_TO_CPU_##bits((src)->f))
/* HICAIN_TO_DEV - the device's @dst->@f from ib_core's @src->@f. */
#define HICAIN_TO_DEV(dst, src, f, bits)	((dst)->f = HICAIN_CPU_TO_LE_##bits((src)->f))

/* The port attributes both link layers take from the device as they are. */
#define HICAIN_PORT_ATTR_FIELDS(X)						\
	X(port_cap_flags, 32)							\
	X(max_msg_sz, 32)							\
	X(bad_pkey_cntr, 32)							\
	X(qkey_viol_cntr, 32)							\
	X(lid, 16)								\
	X(sm_lid, 16)								\
	X(lmc, 8)								\
	X(max_vl_num, 8)							\
	X(sm_sl, 8)								\
	X(subnet_timeout, 8)							\
	X(active_width, 8)							\
	X(active_speed, 8)

/*
 * The QP attributes of struct hicain_qp_attr that MODIFY_QP sends and
 * QUERY_QP returns as ib_qp_attr holds them (the address vector aside).
 */
#define HICAIN_QP_ATTR_FIELDS(X)						\
	X(qp_state, 32)								\
	X(cur_qp_state, 32)							\
	X(path_mtu, 32)								\
	X(qkey, 32)								\
	X(rq_psn, 32)								\
	X(sq_psn, 32)								\
	X(dest_qp_num, 32)							\
	X(qp_access_flags, 32)							\
	X(pkey_index, 16)							\
	X(port_num, 8)								\
	X(timeout, 8)								\
	X(retry_cnt, 8)								\
	X(rnr_retry, 8)								\
	X(min_rnr_timer, 8)							\
	X(max_rd_atomic, 8)							\
	X(max_dest_rd_atomic, 8)

/* ---- device and port ---- */

int hicain_query_device(struct ib_device *ibdev, struct ib_device_attr *props,
			struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibdev);
	struct hicain_device_attr a;
	int ret;

	if (udata && udata->inlen && !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;
	ret = hicain_admin_query(hidev, HICAIN_CMD_QUERY_DEVICE, 0, &a, sizeof(a));
	if (ret)
		return ret;

	memset(props, 0, sizeof(*props));
	props->sys_image_guid = cpu_to_be64(le64_to_cpu(a.sys_image_guid));
	props->max_mr_size = le64_to_cpu(a.max_mr_size);
	props->page_size_cap = le64_to_cpu(a.page_size_cap);
	props->vendor_id = le32_to_cpu(a.vendor_id);
	props->vendor_part_id = le32_to_cpu(a.vendor_part_id);
	props->hw_ver = le32_to_cpu(a.hw_ver);
	props->max_qp = le32_to_cpu(a.max_qp);
	props->max_qp_wr = le32_to_cpu(a.max_qp_wr);
	/* The device numbers its flags as IBV_DEVICE_*, which are the
	 * kernel's IB_DEVICE_* (ib_user_verbs.h IB_UVERBS_DEVICE_*).
	 * modify_srq does not resize (hicain_modify_srq), so SRQ_RESIZE
	 * is not offered.
	 */
	props->device_cap_flags = le32_to_cpu(a.device_cap_flags) & ~IB_DEVICE_SRQ_RESIZE;
	props->max_send_sge = le32_to_cpu(a.max_sge);
	props->max_recv_sge = le32_to_cpu(a.max_sge);
	props->max_sge_rd = le32_to_cpu(a.max_sge_rd);
	props->max_cq = le32_to_cpu(a.max_cq);
	props->max_cqe = le32_to_cpu(a.max_cqe);
	props->max_mr = le32_to_cpu(a.max_mr);
	props->max_pd = le32_to_cpu(a.max_pd);
	props->max_qp_rd_atom = le32_to_cpu(a.max_qp_rd_atom);
	props->max_qp_init_rd_atom = le32_to_cpu(a.max_qp_init_rd_atom);
	props->max_res_rd_atom = le32_to_cpu(a.max_res_rd_atom);
	props->atomic_cap = le32_to_cpu(a.atomic_cap);
	props->max_pkeys = le32_to_cpu(a.max_pkeys);
	props->local_ca_ack_delay = a.local_ca_ack_delay;
	props->max_fast_reg_page_list_len = 0;
	props->max_srq = le32_to_cpu(a.max_srq);
	props->max_srq_wr = le32_to_cpu(a.max_srq_wr);
	props->max_srq_sge = le32_to_cpu(a.max_srq_sge);
	props->max_mcast_grp = le32_to_cpu(a.max_mcast_grp);
	props->max_mcast_qp_attach = le32_to_cpu(a.max_mcast_qp_attach);
	props->max_total_mcast_qp_attach = le32_to_cpu(a.max_total_mcast_qp_attach);
	props->max_ah = le32_to_cpu(a.max_ah);
	/* ABI 1.10: windows of both types; a 1.9 device leaves it 0 and
	 * offers no MEM_WINDOW flags.
	 */
	props->max_mw = le32_to_cpu(a.max_mw);
	/* ABI 1.13: tag matching; a 1.12 device wrote none of it. */
	if (hicain_tm_ok(hidev)) {
		props->tm_caps.max_rndv_hdr_size = le32_to_cpu(a.max_rndv_hdr_size);
		props->tm_caps.max_num_tags = min_t(u32, le32_to_cpu(a.max_num_tags),
						    HICAIN_TM_MAX_TAGS);
		props->tm_caps.flags = le32_to_cpu(a.tm_flags) & IB_TM_CAP_RNDV_RC;
		props->tm_caps.max_ops = min_t(u32, le32_to_cpu(a.max_tm_ops), HICAIN_TM_MAX_OPS);
		props->tm_caps.max_sge = le32_to_cpu(a.max_tm_sge);
	}
	/* ABI 1.12: every CQE carries the device's nanosecond clock. */
	if (le32_to_cpu(READ_ONCE(hidev->hdev->hdr->caps)) & HICAIN_CAP_CQE_TS) {
		props->timestamp_mask = U64_MAX;
		props->hca_core_clock = 1000000;	/* kHz: 1 GHz, ns */
	}
	/* ATOMIC WRITE has no capability bit here: 6.1's uverbs does not
	 * pass IB_UVERBS_DEVICE_ATOMIC_WRITE (bit 40, later uapi) through
	 * (docs/verbs-driver.md).
	 */
	return 0;
}

/* The port attributes both link layers take from the device as they are. */
static void hicain_port_attr_common(const struct hicain_port_attr *a, struct ib_port_attr *props)
{
#define X(f, bits) HICAIN_FROM_DEV(props, a, f, bits);
	HICAIN_PORT_ATTR_FIELDS(X)
#undef X
}

int hicain_query_port(struct ib_device *ibdev, u32 port, struct ib_port_attr *props)
{
	struct hicain_ibdev *hidev = to_hidev(ibdev);
	struct net_device *ndev = hidev->netdev;
	struct hicain_port_attr a;
	enum ib_mtu ndev_mtu;
	int ret;

	ret = hicain_admin_query(hidev, HICAIN_CMD_QUERY_PORT, port, &a, sizeof(a));
	if (ret)
		return ret;

	/* props was zeroed by ib_core. */
	props->state = le32_to_cpu(a.state);
	props->phys_state = a.phys_state;
	props->max_mtu = le32_to_cpu(a.max_mtu);
	props->active_mtu = le32_to_cpu(a.active_mtu);
	if (hidev->ib) {
		hicain_port_attr_common(&a, props);
		props->phys_mtu = ib_mtu_enum_to_int(props->max_mtu);
		props->gid_tbl_len = hidev->ib_gid_tbl_len;
		props->pkey_tbl_len = hidev->ib_pkey_tbl_len;
		props->port_cap_flags |= READ_ONCE(hidev->cap_set);
		return 0;
	}
	/* RoCE frames must fit the netdev's MTU too (RoCE v2 headers,
	 * iboe_get_mtu).
	 */
	ndev_mtu = iboe_get_mtu(READ_ONCE(ndev->mtu));
	if (ndev_mtu && ndev_mtu < props->active_mtu)
		props->active_mtu = ndev_mtu;
	props->phys_mtu = ib_mtu_enum_to_int(props->max_mtu);
	/* ib_core owns the RoCE GID table: its length, not the device's. */
	props->gid_tbl_len = HICAIN_GID_TBL_LEN;
	props->ip_gids = true;
	props->pkey_tbl_len = HICAIN_PKEY_TBL_LEN;
	hicain_port_attr_common(&a, props);

	/* A RoCE port carries traffic only while its netdev does. */
	if (!netif_running(ndev) || !netif_carrier_ok(ndev)) {
		props->state = IB_PORT_DOWN;
		props->phys_state = IB_PORT_PHYS_STATE_DISABLED;
	}
	return 0;
}

int hicain_get_port_immutable(struct ib_device *ibdev, u32 port,
			      struct ib_port_immutable *immutable)
{
	struct hicain_ibdev *hidev = to_hidev(ibdev);

	if (hidev->ib) {
		/* SMI (QP0), GSI, CM, SA: the full IB management set. */
		immutable->core_cap_flags = RDMA_CORE_PORT_IBA_IB;
		immutable->gid_tbl_len = hidev->ib_gid_tbl_len;
		immutable->pkey_tbl_len = hidev->ib_pkey_tbl_len;
	} else {
		immutable->core_cap_flags = RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
		immutable->gid_tbl_len = HICAIN_GID_TBL_LEN;
		immutable->pkey_tbl_len = HICAIN_PKEY_TBL_LEN;
	}
	/* The core caps include IB_MAD: verify_immutable wants the size. */
	immutable->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

enum rdma_link_layer hicain_get_link_layer(struct ib_device *ibdev, u32 port)
{
	return to_hidev(ibdev)->ib ? IB_LINK_LAYER_INFINIBAND : IB_LINK_LAYER_ETHERNET;
}

int hicain_query_pkey(struct ib_device *ibdev, u32 port, u16 index, u16 *pkey)
{
	struct hicain_ibdev *hidev = to_hidev(ibdev);
	struct hicain_admin_cqe cqe;
	int ret;

	if (index >= (hidev->ib ? hidev->ib_pkey_tbl_len : HICAIN_PKEY_TBL_LEN))
		return -EINVAL;
	ret = hicain_admin_handle(hidev, HICAIN_CMD_QUERY_PKEY, index, &cqe);
	if (ret)
		return ret;
	*pkey = cqe.out[0] | cqe.out[1] << 8;
	return 0;
}

/*
 * hicain_query_gid - an InfiniBand port's GID from the device's table
 * (the subnet prefix and the port GUID). InfiniBand devices only
 * (hicain_ib_port_ops): ib_core builds a RoCE port's GIDs itself.
 */
int hicain_query_gid(struct ib_device *ibdev, u32 port, int index, union ib_gid *gid)
{
	struct hicain_ibdev *hidev = to_hidev(ibdev);
	struct hicain_admin_cqe cqe;
	int ret;

	if (index < 0 || index >= hidev->ib_gid_tbl_len)
		return -EINVAL;
	ret = hicain_admin_handle(hidev, HICAIN_CMD_QUERY_GID, index, &cqe);
	if (ret)
		return ret;
	memcpy(gid->raw, cqe.out, sizeof(gid->raw));
	return 0;
}

/* hicain_abi_minor_at_least - the device speaks ABI 1.minor or later. */
bool hicain_abi_minor_at_least(struct hicain_ibdev *hidev, u16 minor)
{
	struct hicain_dev_hdr *h = hidev->hdev->hdr;

	return le16_to_cpu(READ_ONCE(h->abi_major)) == HICAIN_ABI_MAJOR &&
	       le16_to_cpu(READ_ONCE(h->abi_minor)) >= minor;
}

/* The capability bits a host may claim in the device's PortInfo (1.6). */
#define HICAIN_HOST_PORT_CAPS	(IB_PORT_SM | IB_PORT_SM_DISABLED | \
				 IB_PORT_DEVICE_MGMT_SUP | IB_PORT_VENDOR_CLASS_SUP)

/*
 * hicain_push_port_caps - show the host's capability bits in the device's
 * PortInfo (SET_PORT_CAP, ABI 1.6; an older device keeps them host-side
 * only), so that an SM elsewhere sees IsSM on this port and polls its
 * SMInfo. Called with addr_lock held.
 */
int hicain_push_port_caps(struct hicain_ibdev *hidev, u32 caps)
{
	struct hicain_admin_cmd cmd = {};

	lockdep_assert_held(&hidev->addr_lock);
	if (!hidev->ib || !hicain_abi_minor_at_least(hidev, 6))
		return 0;
	cmd.opcode = cpu_to_le16(HICAIN_CMD_SET_PORT_CAP);
	cmd.handle = cpu_to_le32(1);
	cmd.port_cap.cap_mask = cpu_to_le32(caps & HICAIN_HOST_PORT_CAPS);
	return hicain_admin_exec(hidev->hdev, &cmd, NULL);
}

/*
 * hicain_modify_port - the capability bits of an InfiniBand port that
 * its users claim: IsSM while a subnet manager holds issm (ib_umad; it
 * cannot open issm without this op), IsCM. They are the host's, reported
 * by query_port on top of the device's, and those of HICAIN_HOST_PORT_CAPS
 * go to the device's PortInfo too. InfiniBand devices only
 * (hicain_ib_port_ops): a RoCE port keeps ib_core's own handling.
 */
int hicain_modify_port(struct ib_device *ibdev, u32 port, int mask,
		       struct ib_port_modify *props)
{
	struct hicain_ibdev *hidev = to_hidev(ibdev);

	int ret = 0;
	u32 caps;

	if (mask & ~IB_PORT_RESET_QKEY_CNTR)
		return -EOPNOTSUPP;
	mutex_lock(&hidev->addr_lock);
	caps = (hidev->cap_set | props->set_port_cap_mask) & ~props->clr_port_cap_mask;
	if (caps != hidev->cap_set)
		ret = hicain_push_port_caps(hidev, caps);
	if (!ret)
		WRITE_ONCE(hidev->cap_set, caps);
	mutex_unlock(&hidev->addr_lock);
	return ret;
}

/* ---- GID table ---- */

/*
 * hicain_refresh_gids - read the device's GID table (QUERY_PORT for its
 * length, then QUERY_GID of each entry) into the cache that AHs made in
 * atomic context use. Called with addr_lock held.
 */
static void hicain_refresh_gids(struct hicain_ibdev *hidev)
{
	u8 gids[HICAIN_GID_TBL_LEN][16];
	struct hicain_port_attr pa;
	struct hicain_admin_cqe cqe;
	unsigned long flags;
	u32 len = 0;
	int n;

	lockdep_assert_held(&hidev->addr_lock);
	if (!hicain_admin_query(hidev, HICAIN_CMD_QUERY_PORT, 1, &pa, sizeof(pa)))
		len = min_t(u32, le32_to_cpu(pa.gid_tbl_len), HICAIN_GID_TBL_LEN);
	for (n = 0; n < len; n++) {
		if (hicain_admin_handle(hidev, HICAIN_CMD_QUERY_GID, n, &cqe))
			break;
		memcpy(gids[n], cqe.out, sizeof(gids[n]));
	}
	spin_lock_irqsave(&hidev->gid_lock, flags);
	memcpy(hidev->gids, gids, n * sizeof(gids[0]));
	hidev->n_gids = n;
	spin_unlock_irqrestore(&hidev->gid_lock, flags);
}

/*
 * hicain_sync_addrs - give the device the netdev's MAC and IPv4
 * addresses (at most four), from which it builds its own GID table. The
 * device changes the table in place while objects exist (ABI 1.3; an
 * older device refuses with EBUSY once PDs or CQs exist, and a QP whose
 * SGID is missing then fails in modify_qp). The GID cache follows.
 */
void hicain_sync_addrs(struct hicain_ibdev *hidev)
{
	struct net_device *ndev = hidev->netdev;
	struct hicain_admin_cmd cmd = {};
	struct hicain_cmd_set_addr *a = &cmd.set_addr;
	const struct in_ifaddr *ifa;
	struct in_device *in_dev;
	u32 n = 0;
	int ret;

	rcu_read_lock();
	in_dev = __in_dev_get_rcu(ndev);
	if (in_dev) {
		in_dev_for_each_ifa_rcu(ifa, in_dev) {
			if (n == ARRAY_SIZE(a->ipv4))
				break;
			memcpy(a->ipv4[n++], &ifa->ifa_local, sizeof(a->ipv4[0]));
		}
	}
	rcu_read_unlock();
	a->n_ipv4 = cpu_to_le32(n);
	memcpy(a->mac, ndev->dev_addr, ETH_ALEN);
	a->mtu = 0;	/* the device's configured path MTU */

	mutex_lock(&hidev->addr_lock);
	if (!memcmp(&hidev->addrs, a, sizeof(*a)))
		goto out;
	cmd.opcode = cpu_to_le16(HICAIN_CMD_SET_ADDR);
	ret = hicain_admin_exec(hidev->hdev, &cmd, NULL);
	if (ret)
		ibdev_warn(&hidev->ibdev, "SET_ADDR: %d; QPs on new addresses will not connect\n",
			   ret);
	else
		hidev->addrs = *a;
	hicain_refresh_gids(hidev);
out:
	mutex_unlock(&hidev->addr_lock);
}

/* ib_core calls add_gid and del_gid in process context, and does not
 * add the GID when add_gid fails: the device's refusal must not cost the
 * GID its place in ib_core's table.
 */
int hicain_add_gid(const struct ib_gid_attr *attr, void **context)
{
	if (ipv6_addr_v4mapped((const struct in6_addr *)attr->gid.raw))
		hicain_sync_addrs(to_hidev(attr->device));
	return 0;
}

int hicain_del_gid(const struct ib_gid_attr *attr, void **context)
{
	if (ipv6_addr_v4mapped((const struct in6_addr *)attr->gid.raw))
		hicain_sync_addrs(to_hidev(attr->device));
	return 0;
}

/* ---- protection domains ---- */

int hicain_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibpd->device);
	struct hicain_pd *pd = to_hpd(ibpd);
	struct hicain_admin_cmd cmd = {};
	int ret;

	ret = hicain_create_handle(hidev, &cmd, HICAIN_CMD_ALLOC_PD, &pd->epoch, &pd->pdn);
	if (ret)
		return ret;
	if (udata) {
		struct hicain_ib_alloc_pd_resp resp = { .pdn = pd->pdn };

		ret = hicain_udata_resp(udata, &resp, sizeof(resp));
		if (ret) {
			hicain_admin_handle(hidev, HICAIN_CMD_DEALLOC_PD, pd->pdn, NULL);
			return ret;
		}
	}
	return 0;
}

int hicain_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibpd->device);
	struct hicain_pd *pd = to_hpd(ibpd);

	return hicain_destroy_handle(hidev, pd->epoch, HICAIN_CMD_DEALLOC_PD, pd->pdn);
}

/* ---- memory windows (ABI 1.10) ---- */

/*
 * hicain_alloc_mw - ibv_alloc_mw: ALLOC_MW of the PD, whose answer is
 * the window's R_Key (bit 31 set). Binds and invalidations are send
 * WQEs the process posts on its mapped SQ; the kernel only makes and
 * frees the window.
 */
int hicain_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibmw->device);
	struct hicain_mw *mw = to_hmw(ibmw);
	struct hicain_admin_cmd cmd = {};

	if (!hicain_abi_minor_at_least(hidev, 10))
		return -EOPNOTSUPP;
	if (ibmw->type != IB_MW_TYPE_1 && ibmw->type != IB_MW_TYPE_2)
		return -EINVAL;
	if (udata && udata->inlen && !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;
	cmd.alloc_mw.pd = cpu_to_le32(to_hpd(ibmw->pd)->pdn);
	cmd.alloc_mw.type = cpu_to_le32(ibmw->type);
	return hicain_create_handle(hidev, &cmd, HICAIN_CMD_ALLOC_MW, &mw->epoch, &ibmw->rkey);
}

int hicain_dealloc_mw(struct ib_mw *ibmw)
{
	struct hicain_ibdev *hidev = to_hidev(ibmw->device);

	return hicain_destroy_handle(hidev, to_hmw(ibmw)->epoch, HICAIN_CMD_DEALLOC_MW, ibmw->rkey);
}

/* ---- memory regions ---- */

/*
 * hicain_mr_cmd - REG_MR, or REREG_MR of the MR whose lkey is handle:
 * the page list of umem for an MR at virt_addr in pd, with access. The
 * keys come back in cqe.
 */
static int hicain_mr_cmd(struct hicain_ibdev *hidev, u16 opcode, u32 handle, struct ib_pd *ibpd,
			 struct ib_umem *umem, u64 length, u64 virt_addr, int access,
			 struct hicain_admin_cqe *cqe)
{
	struct device *dma_dev = hicain_dma_dev(hidev);
	struct hicain_admin_cmd cmd = {};
	struct ib_block_iter biter;
	unsigned long pgsz;
	dma_addr_t list_dma;
	__le64 *list;
	size_t npages, i = 0;
	int ret;

	/* The device maps iova to pages[0] + iova % page_size. */
	pgsz = ib_umem_find_best_pgsz(umem, HICAIN_MR_PGSZ_BITMAP, virt_addr);
	npages = pgsz ? ib_umem_num_dma_blocks(umem, pgsz) : 0;
	if (!npages || npages > HICAIN_MR_MAX_PAGES)
		return -EINVAL;
	/* Sized by the caller: a failure is ENOMEM, not a kernel warning. */
	list = dma_alloc_coherent(dma_dev, npages * sizeof(*list), &list_dma,
				  GFP_KERNEL | __GFP_NOWARN);
	if (!list)
		return -ENOMEM;
	rdma_umem_for_each_dma_block(umem, &biter, pgsz)
		list[i++] = cpu_to_le64(rdma_block_iter_dma_address(&biter));

	cmd.opcode = cpu_to_le16(opcode);
	cmd.handle = cpu_to_le32(handle);
	cmd.reg_mr.pd = cpu_to_le32(to_hpd(ibpd)->pdn);
	cmd.reg_mr.access = cpu_to_le32(access);
	cmd.reg_mr.iova = cpu_to_le64(virt_addr);
	cmd.reg_mr.length = cpu_to_le64(length);
	cmd.reg_mr.page_list_gpa = cpu_to_le64(list_dma);
	cmd.reg_mr.npages = cpu_to_le32(npages);
	cmd.reg_mr.page_shift = cpu_to_le32(order_base_2(pgsz));
	ret = hicain_admin_exec(hidev->hdev, &cmd, cqe);
	/* The device copied the list while it executed the command. */
	if (hicain_admin_lost(ret))
		hicain_admin_keep(hidev->hdev, npages * sizeof(*list));
	else
		dma_free_coherent(dma_dev, npages * sizeof(*list), list, list_dma);
	return ret;
}

/* Optional flags (relaxed ordering, which perftest asks for) are hints
 * a device may ignore (ib_verbs.h IB_ACCESS_OPTIONAL). MW_BIND lets
 * memory windows be bound to the MR (ABI 1.10; the device checks it at
 * each bind).
 */
static int hicain_mr_access(int access)
{
	access &= ~IB_ACCESS_OPTIONAL;
	if (access & ~(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
		       IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC | IB_ACCESS_MW_BIND))
		return -EOPNOTSUPP;
	return access;
}

/*
 * hicain_umem_keep - leave umem pinned for good: a REG_MR or REREG_MR
 * that timed out may still give the device an MR on its pages.
 */
static void hicain_umem_keep(struct hicain_ibdev *hidev, struct ib_umem *umem)
{
	hicain_admin_keep(hidev->hdev, ib_umem_num_pages(umem) * PAGE_SIZE);
}

struct ib_mr *hicain_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				 u64 virt_addr, int access, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibpd->device);
	struct hicain_admin_cqe cqe;
	struct hicain_mr *mr;
	int ret;

	access = hicain_mr_access(access);
	if (access < 0)
		return ERR_PTR(access);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->epoch = atomic_read(&hidev->epoch);
	mr->umem = ib_umem_get(ibpd->device, start, length, access);
	if (IS_ERR(mr->umem)) {
		ret = PTR_ERR(mr->umem);
		goto err_free;
	}
	ret = hicain_mr_cmd(hidev, HICAIN_CMD_REG_MR, 0, ibpd, mr->umem, length, virt_addr, access,
			    &cqe);
	if (hicain_admin_lost(ret)) {
		hicain_umem_keep(hidev, mr->umem);
		goto err_free;
	}
	if (ret)
		goto err_umem;
	mr->ibmr.lkey = get_unaligned_le32(&cqe.out[0]);
	mr->ibmr.rkey = get_unaligned_le32(&cqe.out[4]);
	mr->ibmr.iova = virt_addr;
	mr->ibmr.length = length;
	mr->access = access;
	return &mr->ibmr;

err_umem:
	ib_umem_release(mr->umem);
err_free:
	kfree(mr);
	return ERR_PTR(ret);
}

/*
 * The DMA MR of kernel consumers maps IOVA = guest-physical address, so
 * that the address ib_dma_map_*() gives them (a GPA: there is no IOMMU,
 * device-facts 2.3) is valid with its lkey. REG_MR knows MRs only as
 * page lists, so the MR is a list of identity-mapped 2 MiB pages: the
 * RAM below 4 GiB, and from 4 GiB on the RAM above it. The pages of
 * the PCI hole in between are not RAM, which the device refuses in a
 * page list; their IOVAs are mapped onto the first page instead, and no
 * DMA mapping ever returns such an address. QEMU's RAM blocks end on
 * 2 MiB boundaries (the split at 2 or 3 GiB, RAM sizes in MiB), even
 * where the firmware reserves their last pages, which the System RAM
 * resources then leave out: the top is rounded up.
 */
#define HICAIN_DMA_MR_SHIFT	21
#define HICAIN_4G		(1ULL << 32)

struct hicain_ram_top {
	u64 low;			/* end of the RAM below 4 GiB */
	u64 high;			/* end of the RAM above, or 0 */
};

static int hicain_ram_range(struct resource *res, void *arg)
{
	struct hicain_ram_top *top = arg;
	u64 end = (u64)res->end + 1;

	if (end <= HICAIN_4G)
		top->low = max(top->low, end);
	else
		top->high = max(top->high, end);
	return 0;
}

struct ib_mr *hicain_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct hicain_ibdev *hidev = to_hidev(ibpd->device);
	struct device *dma_dev = hicain_dma_dev(hidev);
	const u64 pgsz = 1ULL << HICAIN_DMA_MR_SHIFT;
	struct hicain_ram_top top = {};
	struct hicain_admin_cmd cmd = {};
	struct hicain_admin_cqe cqe;
	struct hicain_mr *mr;
	dma_addr_t list_dma;
	u64 low, len, i;
	size_t npages;
	__le64 *list;
	int ret;

	if (access & ~(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
		       IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC))
		return ERR_PTR(-EOPNOTSUPP);
	walk_iomem_res_desc(IORES_DESC_NONE, IORESOURCE_SYSTEM_RAM | IORESOURCE_BUSY, 0,
			    U64_MAX, &top, hicain_ram_range);
	low = min_t(u64, round_up(top.low, pgsz), HICAIN_4G);
	len = top.high ? round_up(top.high, pgsz) : low;
	npages = len >> HICAIN_DMA_MR_SHIFT;
	if (!npages || npages > HICAIN_MR_MAX_PAGES)
		return ERR_PTR(-EINVAL);

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->epoch = atomic_read(&hidev->epoch);
	list = dma_alloc_coherent(dma_dev, npages * sizeof(*list), &list_dma,
				  GFP_KERNEL | __GFP_NOWARN);
	if (!list) {
		ret = -ENOMEM;
		goto err_free;
	}
	for (i = 0; i < npages; i++) {
		u64 gpa = i << HICAIN_DMA_MR_SHIFT;

		list[i] = cpu_to_le64(gpa < low || gpa >= HICAIN_4G ? gpa : 0);
	}
	cmd.opcode = cpu_to_le16(HICAIN_CMD_REG_MR);
	cmd.reg_mr.pd = cpu_to_le32(to_hpd(ibpd)->pdn);
	cmd.reg_mr.access = cpu_to_le32(access);
	cmd.reg_mr.iova = 0;
	cmd.reg_mr.length = cpu_to_le64(len);
	cmd.reg_mr.page_list_gpa = cpu_to_le64(list_dma);
	cmd.reg_mr.npages = cpu_to_le32(npages);
	cmd.reg_mr.page_shift = cpu_to_le32(HICAIN_DMA_MR_SHIFT);
	ret = hicain_admin_exec(hidev->hdev, &cmd, &cqe);
	if (hicain_admin_lost(ret))
		hicain_admin_keep(hidev->hdev, npages * sizeof(*list));
	else
		dma_free_coherent(dma_dev, npages * sizeof(*list), list, list_dma);
	if (ret)
		goto err_free;
	mr->ibmr.lkey = get_unaligned_le32(&cqe.out[0]);
	mr->ibmr.rkey = get_unaligned_le32(&cqe.out[4]);
	return &mr->ibmr;

err_free:
	kfree(mr);
	return ERR_PTR(ret);
}

/*
 * hicain_rereg_user_mr - ibv_rereg_mr: what the flags change
 * (IB_MR_REREG_TRANS: range and IOVA, _ACCESS, _PD), the rest as the MR
 * had it. A device of ABI 1.8 or later changes the MR in place
 * (REREG_MR) and the keys stay, as applications expect (rdma-core's
 * tests exchange the rkey once, before the rereg): the pages are pinned
 * anew for a new range, or for access that makes a read-only MR
 * writable, and the old pin goes once the device no longer uses it.
 * uverbs then moves the MR to the new PD and range itself. An older
 * device gets a new MR, which uverbs puts in the old one's place before
 * it deregisters the old: the keys change.
 */
struct ib_mr *hicain_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start, u64 length,
				   u64 virt_addr, int access, struct ib_pd *pd,
				   struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibmr->device);
	struct hicain_mr *mr = to_hmr(ibmr);
	struct ib_umem *umem = mr->umem;
	struct hicain_admin_cqe cqe;
	int ret;

	if (!mr->umem)
		return ERR_PTR(-EOPNOTSUPP);	/* the kernel's DMA MR */
	if (!(flags & IB_MR_REREG_TRANS)) {
		start = mr->umem->address;
		length = mr->umem->length;
		virt_addr = ibmr->iova;
	}
	if (!(flags & IB_MR_REREG_ACCESS))
		access = mr->access;
	if (!(flags & IB_MR_REREG_PD))
		pd = ibmr->pd;
	if (!hicain_abi_minor_at_least(hidev, 8))
		return hicain_reg_user_mr(pd, start, length, virt_addr, access, udata);
	access = hicain_mr_access(access);
	if (access < 0)
		return ERR_PTR(access);
	if ((flags & IB_MR_REREG_TRANS) || (ib_access_writable(access) && !mr->umem->writable)) {
		umem = ib_umem_get(ibmr->device, start, length, access);
		if (IS_ERR(umem))
			return ERR_CAST(umem);
	}
	ret = hicain_mr_cmd(hidev, HICAIN_CMD_REREG_MR, ibmr->lkey, pd, umem, length, virt_addr,
			    access, &cqe);
	if (ret) {
		/* The device keeps the MR as it was, unless the command
		 * timed out and may still move it to umem.
		 */
		if (umem != mr->umem && hicain_admin_lost(ret))
			hicain_umem_keep(hidev, umem);
		else if (umem != mr->umem)
			ib_umem_release(umem);
		return ERR_PTR(ret);
	}
	if (umem != mr->umem) {
		ib_umem_release(mr->umem);
		mr->umem = umem;
	}
	mr->access = access;
	ibmr->iova = virt_addr;
	ibmr->length = length;
	return NULL;
}

int hicain_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibmr->device);
	struct hicain_mr *mr = to_hmr(ibmr);
	int ret;

	ret = hicain_destroy_handle(hidev, mr->epoch, HICAIN_CMD_DEREG_MR, ibmr->lkey);
	if (ret)
		return ret;
	/* The device no longer touches the pages, unless it is dead and
	 * its backend only stalled.
	 */
	if (mr->umem && hicain_ib_dead(hidev))
		hicain_umem_keep(hidev, mr->umem);
	else
		ib_umem_release(mr->umem);
	kfree(mr);
	return 0;
}

/* ---- queue objects: CQs, QPs and SRQs ---- */

/*
 * struct hicain_queue_kind - what differs between the kinds of queue
 * objects in the steps their create and destroy verbs share: the device
 * object (made by CREATE_*, named by a handle), the rings in guest
 * memory, and the xarray the interrupts find the queue in by handle.
 */
struct hicain_queue_kind {
	u16 destroy_op;				/* HICAIN_CMD_DESTROY_* */
	/* free the rings, or keep them while the device may use them */
	void (*release)(struct hicain_ibdev *hidev, void *q, bool in_use);
	/* offsetof the xarray by handle in hicain_ibdev; 0: track, untrack */
	size_t xa;
	int (*track)(struct hicain_ibdev *hidev, void *q);
	void (*untrack)(struct hicain_ibdev *hidev, void *q);
};

/* Defined at the end of this file, after the functions they name. */
static const struct hicain_queue_kind hicain_cq_kind, hicain_qp_kind, hicain_srq_kind;

static struct xarray *hicain_queue_xa(struct hicain_ibdev *hidev,
				       const struct hicain_queue_kind *k)
{
	return (void *)hidev + k->xa;
}

/*
 * hicain_queue_exec - run the CREATE_* command cmd of q and return the
 * device's handle in *handle; on failure release q's rings.
 */
static int hicain_queue_exec(struct hicain_ibdev *hidev, const struct hicain_queue_kind *k,
			     void *q, struct hicain_admin_cmd *cmd, u32 *handle)
{
	struct hicain_admin_cqe cqe;
	int ret;

	ret = hicain_admin_exec(hidev->hdev, cmd, &cqe);
	if (ret) {
		k->release(hidev, q, hicain_admin_lost(ret));
		return ret;
	}
	*handle = le32_to_cpu(cqe.handle);
	return 0;
}

/*
 * hicain_queue_publish - the last step of a create: answer user space
 * (resp) and make q known to the interrupts. On failure the device
 * object is destroyed and the rings released.
 */
static int hicain_queue_publish(struct hicain_ibdev *hidev, const struct hicain_queue_kind *k,
				void *q, u32 handle, struct ib_udata *udata,
				void *resp, size_t resp_len)
{
	int ret;

	ret = hicain_udata_resp(udata, resp, resp_len);
	if (!ret && k->xa)
		ret = xa_insert_irq(hicain_queue_xa(hidev, k), handle, q, GFP_KERNEL);
	else if (!ret)
		ret = k->track(hidev, q);
	if (ret)
		k->release(hidev, q, !hicain_undo_create(hidev, k->destroy_op, handle));
	return ret;
}

/*
 * hicain_queue_destroy - destroy q's device object, then forget q and
 * release its rings (kept if the backend died: hicain_ib_dead).
 */
static int hicain_queue_destroy(struct hicain_ibdev *hidev, const struct hicain_queue_kind *k,
				void *q, int epoch, u32 handle)
{
	int ret;

	ret = hicain_destroy_handle(hidev, epoch, k->destroy_op, handle);
	if (ret)
		return ret;
	/* The event interrupt looks queues up under the xarray lock. */
	if (k->xa)
		xa_erase_irq(hicain_queue_xa(hidev, k), handle);
	else
		k->untrack(hidev, q);
	k->release(hidev, q, hicain_ib_dead(hidev));
	return 0;
}

/* ---- completion queues ---- */

static void hicain_cq_free_ring(struct hicain_ibdev *hidev, struct hicain_cq *cq)
{
	struct device *dma_dev = hicain_dma_dev(hidev);

	if (cq->uq.entry) {
		hicain_uq_free(hidev, &cq->uq);
		return;
	}
	dma_free_coherent(dma_dev, cq->depth * sizeof(*cq->ring), cq->ring, cq->ring_dma);
	dma_free_coherent(dma_dev, sizeof(*cq->dbrec), cq->dbrec, cq->dbrec_dma);
}

/*
 * hicain_cq_release_ring - free the CQ's ring, or keep it while the
 * device may still write it (in_use: hicain_admin_lost).
 */
static void hicain_cq_release_ring(struct hicain_ibdev *hidev, void *q, bool in_use)
{
	struct hicain_cq *cq = q;
	size_t bytes;

	if (!in_use) {
		hicain_cq_free_ring(hidev, cq);
		return;
	}
	if (cq->uq.entry)
		bytes = hicain_uq_keep(&cq->uq);
	else
		bytes = cq->depth * sizeof(*cq->ring) + sizeof(*cq->dbrec);
	hicain_admin_keep(hidev->hdev, bytes);
}

/*
 * hicain_cq_alloc_ring - a user CQ's ring and dbrec in pages it maps
 * when it can, or coherent memory the kernel polls.
 */
static int hicain_cq_alloc_ring(struct hicain_ibdev *hidev, struct hicain_cq *cq,
				struct ib_udata *udata)
{
	struct device *dma_dev = hicain_dma_dev(hidev);
	size_t ring = cq->depth * sizeof(*cq->ring);
	int ret;

	ret = hicain_uq_alloc(hidev, udata, &cq->uq, ring, sizeof(*cq->dbrec), true);
	if (ret < 0)
		return ret;
	if (!ret) {
		cq->ring = cq->uq.cpu;
		cq->ring_dma = cq->uq.dma;
		cq->dbrec = cq->uq.cpu + cq->uq.dbrec_off;
		cq->dbrec_dma = cq->uq.dbrec_dma;
		return 0;
	}
	/*
	 * One contiguous ring, its size the caller's (ibv_create_cq of up to
	 * max_cqe on a context without mapped queues): a size the allocator
	 * cannot give is ENOMEM, not a kernel warning.
	 */
	cq->ring = dma_alloc_coherent(dma_dev, ring, &cq->ring_dma, GFP_KERNEL | __GFP_NOWARN);
	if (!cq->ring)
		return -ENOMEM;
	cq->dbrec = dma_alloc_coherent(dma_dev, sizeof(*cq->dbrec), &cq->dbrec_dma, GFP_KERNEL);
	if (!cq->dbrec) {
		dma_free_coherent(dma_dev, ring, cq->ring, cq->ring_dma);
		return -ENOMEM;
	}
	return 0;
}

/*
 * hicain_cq_xa_store - enter cq in xa by its cqn. A CQ of an earlier
 * epoch may hold the cqn still (a reset device hands its handles out
 * again, and that CQ's user has not destroyed it yet): it gets no more
 * events, which the device would not raise for it anyway, and cq takes
 * its place.
 */
static int hicain_cq_xa_store(struct xarray *xa, struct hicain_cq *cq)
{
	struct hicain_cq *old;
	int ret;

	xa_lock_irq(xa);
	old = xa_load(xa, cq->cqn);
	if (old && old->epoch == cq->epoch)
		ret = -EBUSY;
	else
		ret = xa_err(__xa_store(xa, cq->cqn, cq, GFP_KERNEL));
	xa_unlock_irq(xa);
	return ret;
}

/* hicain_cq_xa_erase - remove cq from xa, unless a newer CQ took its place. */
static void hicain_cq_xa_erase(struct xarray *xa, struct hicain_cq *cq)
{
	xa_cmpxchg_irq(xa, cq->cqn, cq, NULL, 0);
}

/*
 * hicain_cq_track - make cq known to the event interrupt (by cqn) and to
 * its vector's completion interrupt.
 */
static int hicain_cq_track(struct hicain_ibdev *hidev, void *q)
{
	struct hicain_cq *cq = q;
	int ret;

	ret = hicain_cq_xa_store(&hidev->cqs, cq);
	if (ret)
		return ret;
	ret = hicain_cq_xa_store(&hidev->vec_cqs[cq->vector], cq);
	if (ret)
		hicain_cq_xa_erase(&hidev->cqs, cq);
	return ret;
}

/* hicain_cq_untrack - after this no interrupt looks at cq. */
static void hicain_cq_untrack(struct hicain_ibdev *hidev, void *q)
{
	struct hicain_cq *cq = q;

	hicain_cq_xa_erase(&hidev->vec_cqs[cq->vector], cq);
	hicain_cq_xa_erase(&hidev->cqs, cq);
}

int hicain_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		     struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibcq->device);
	struct hicain_cq *cq = to_hcq(ibcq);
	u32 max_cqe = le32_to_cpu(READ_ONCE(hidev->hdev->hdr->max_cqe));
	struct hicain_ib_create_cq_resp resp = {};
	struct hicain_admin_cmd cmd = {};
	int ret;

	/* Every CQE of an ABI 1.12 device is stamped: the flag asks no more. */
	if (attr->flags & ~IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION)
		return -EOPNOTSUPP;
	if ((attr->flags & IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION) &&
	    !(le32_to_cpu(READ_ONCE(hidev->hdev->hdr->caps)) & HICAIN_CAP_CQE_TS))
		return -EOPNOTSUPP;
	if (attr->cqe < 1 || attr->cqe > max_cqe)
		return -EINVAL;
	cq->depth = roundup_pow_of_two(attr->cqe);
	if (cq->depth > max_cqe)
		return -EINVAL;
	cq->vector = attr->comp_vector % ibcq->device->num_comp_vectors;
	cq->epoch = atomic_read(&hidev->epoch);
	spin_lock_init(&cq->lock);
	ret = hicain_cq_alloc_ring(hidev, cq, udata);
	if (ret)
		return ret;

	cmd.opcode = cpu_to_le16(HICAIN_CMD_CREATE_CQ);
	cmd.create_cq.ring_gpa = cpu_to_le64(cq->ring_dma);
	cmd.create_cq.dbrec_gpa = cpu_to_le64(cq->dbrec_dma);
	cmd.create_cq.depth = cpu_to_le32(cq->depth);
	cmd.create_cq.comp_vector = cpu_to_le32(cq->vector);
	cmd.create_cq.flags = cpu_to_le32(cq->uq.tbl ? HICAIN_CQ_F_PAGED : 0);
	ret = hicain_queue_exec(hidev, &hicain_cq_kind, cq, &cmd, &cq->cqn);
	if (ret)
		return ret;
	ibcq->cqe = cq->depth;
	/* hicain_queue_publish hands resp to user space only (udata). */
	resp.cqn = cq->cqn;
	hicain_uq_resp(&cq->uq, cq->depth, sizeof(*cq->ring), &resp.cq);
	return hicain_queue_publish(hidev, &hicain_cq_kind, cq, cq->cqn, udata, &resp,
				    sizeof(resp));
}

int hicain_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibcq->device);
	struct hicain_cq *cq = to_hcq(ibcq);

	return hicain_queue_destroy(hidev, &hicain_cq_kind, cq, cq->epoch, cq->cqn);
}

/*
 * hicain_resize_cq - move a mapped CQ to a new ring of at least cqe
 * entries (RESIZE_CQ: the device copies the completions the process has
 * not consumed to the new ring's first entries and carries the event
 * count). The process does not poll while its resize_cq runs (libhicain
 * holds the CQ's lock) and maps the new ring from the response; the old
 * one is revoked as a destroyed queue's is. Kernel CQs, and user CQs on
 * the system-call path, are polled by the kernel from any context and
 * are not resized.
 */
int hicain_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibcq->device);
	struct hicain_cq *cq = to_hcq(ibcq);
	u32 max_cqe = le32_to_cpu(READ_ONCE(hidev->hdev->hdr->max_cqe));
	struct hicain_ib_create_cq_resp resp = {};
	struct hicain_admin_cmd cmd = {};
	struct hicain_uq nq, old;
	unsigned long flags;
	u32 depth;
	int ret;

	if (!cq->uq.entry || !udata)
		return -EOPNOTSUPP;
	if (cqe < 1 || cqe > max_cqe)
		return -EINVAL;
	depth = roundup_pow_of_two(cqe);
	if (depth > max_cqe)
		return -EINVAL;
	ret = hicain_uq_alloc(hidev, udata, &nq, depth * sizeof(*cq->ring), sizeof(*cq->dbrec), true);
	if (ret)
		return ret < 0 ? ret : -EINVAL;
	cmd.opcode = cpu_to_le16(HICAIN_CMD_RESIZE_CQ);
	cmd.handle = cpu_to_le32(cq->cqn);
	cmd.create_cq.ring_gpa = cpu_to_le64(nq.dma);
	cmd.create_cq.dbrec_gpa = cpu_to_le64(nq.dbrec_dma);
	cmd.create_cq.depth = cpu_to_le32(depth);
	cmd.create_cq.comp_vector = cpu_to_le32(cq->vector);
	cmd.create_cq.flags = cpu_to_le32(nq.tbl ? HICAIN_CQ_F_PAGED : 0);
	ret = hicain_admin_exec(hidev->hdev, &cmd, NULL);
	if (hicain_admin_lost(ret)) {
		hicain_admin_keep(hidev->hdev, hicain_uq_keep(&nq));
		return ret;
	}
	if (ret) {
		hicain_uq_free(hidev, &nq);
		return ret;
	}
	/* The interrupt reads the dbrec under its vector's xarray lock. */
	xa_lock_irqsave(&hidev->vec_cqs[cq->vector], flags);
	old = cq->uq;
	cq->uq = nq;
	cq->ring = nq.cpu;
	cq->ring_dma = nq.dma;
	cq->dbrec = nq.cpu + nq.dbrec_off;
	cq->dbrec_dma = nq.dbrec_dma;
	cq->depth = depth;
	xa_unlock_irqrestore(&hidev->vec_cqs[cq->vector], flags);
	hicain_uq_free(hidev, &old);
	ibcq->cqe = depth;
	resp.cqn = cq->cqn;
	hicain_uq_resp(&cq->uq, depth, sizeof(*cq->ring), &resp.cq);
	return hicain_udata_resp(udata, &resp, sizeof(resp));
}

static void hicain_cqe_to_wc(const struct hicain_cqe *c, struct ib_wc *wc)
{
	/* The CQE fields carry ib_wc's values (ibv numbering, which the
	 * kernel's IB_WC_* share, but for the flags WITH_INV and IP_CSUM_OK:
	 * swapped, below; the device sets no IP_CSUM_OK).
	 */
	wc->wr_id = le64_to_cpu(c->wr_id);
	wc->status = le32_to_cpu(c->status);
	wc->opcode = le32_to_cpu(c->opcode);
	wc->vendor_err = le32_to_cpu(c->vendor_err);
	wc->byte_len = le32_to_cpu(c->byte_len);
	/* Immediate data travels as the bits of ibv_wc.imm_data. */
	wc->ex.imm_data = (__force __be32)c->imm_data;
	wc->src_qp = le32_to_cpu(c->src_qp);
	wc->wc_flags = le32_to_cpu(c->wc_flags);
	if (wc->wc_flags & HICAIN_WC_WITH_INV) {
		/* IBV_WC_WITH_INV is 1 << 3, the kernel's is 1 << 2. */
		wc->wc_flags &= ~HICAIN_WC_WITH_INV;
		wc->wc_flags |= IB_WC_WITH_INVALIDATE;
		wc->ex.invalidate_rkey = le32_to_cpu(c->imm_data);
	}
	wc->pkey_index = le16_to_cpu(c->pkey_index);
	wc->slid = le16_to_cpu(c->slid);
	wc->sl = c->sl;
	wc->dlid_path_bits = c->dlid_path_bits;
	wc->port_num = 1;
}

int hicain_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct hicain_ibdev *hidev = to_hidev(ibcq->device);
	struct hicain_cq *cq = to_hcq(ibcq);
	unsigned long flags;
	u32 prod, start;
	int n = 0;

	/* A mapped CQ's ring is the process's to poll. */
	if (cq->uq.entry)
		return -EINVAL;
	spin_lock_irqsave(&cq->lock, flags);
	prod = le32_to_cpu(READ_ONCE(cq->dbrec->prod));
	dma_rmb();
	/* A producer index beyond the ring is the device's bug; take
	 * nothing rather than read stale entries.
	 */
	if (prod - cq->cons > cq->depth)
		prod = cq->cons;
	start = cq->cons;
	while (n < num_entries && cq->cons != prod) {
		const struct hicain_cqe *c = &cq->ring[cq->cons & (cq->depth - 1)];
		u32 qpn = le32_to_cpu(c->qp_num);

		cq->cons++;
		/* The QP a completion names is alive: destroy_qp waits for
		 * the device, and uverbs keeps a QP while its CQs are used.
		 */
		wc[n].qp = xa_load(&hidev->qps, qpn);
		if (!wc[n].qp)
			continue;	/* of a QP destroyed in the meantime */
		hicain_cqe_to_wc(c, &wc[n]);
		if (!hidev->ib && (wc[n].wc_flags & IB_WC_GRH)) {
			/* A RoCEv2 UD receive: the device reports the L3
			 * header type in sl, as ConnectX does for user space
			 * (UCX reads it); kernel consumers get it as the
			 * network header type, and no SL, which RoCE lacks.
			 */
			wc[n].network_hdr_type = wc[n].sl == HICAIN_SL_ROCE_IPV4 ?
				RDMA_NETWORK_IPV4 : RDMA_NETWORK_IPV6;
			wc[n].wc_flags |= IB_WC_WITH_NETWORK_HDR_TYPE;
			wc[n].sl = 0;
		}
		n++;
	}
	if (cq->cons != start) {
		/* Entries read before the slots are handed back. */
		smp_mb();
		WRITE_ONCE(cq->dbrec->cons, cpu_to_le32(cq->cons));
		/* A full ring held completions back in the device. */
		if (prod - start == cq->depth)
			hicain_ring_doorbell(hidev->hdev, HICAIN_DB_CQ);
	}
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

int hicain_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct hicain_ibdev *hidev = to_hidev(ibcq->device);
	struct hicain_cq *cq = to_hcq(ibcq);
	u32 arm = (flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED ?
		  HICAIN_CQ_ARM_SOLICITED : HICAIN_CQ_ARM_NEXT;
	unsigned long irqflags;
	int missed = 0;

	/* armed before the arm word: an interrupt in between is at worst
	 * a spurious event, never a lost one.
	 */
	WRITE_ONCE(cq->armed, true);
	smp_wmb();
	WRITE_ONCE(cq->dbrec->arm, cpu_to_le32(arm));
	/* The doorbell makes the device look at completions already in
	 * the ring (docs/device-abi.md, completion queues).
	 */
	hicain_ring_doorbell(hidev->hdev, HICAIN_DB_CQ);
	if (flags & IB_CQ_REPORT_MISSED_EVENTS) {
		spin_lock_irqsave(&cq->lock, irqflags);
		missed = le32_to_cpu(READ_ONCE(cq->dbrec->prod)) != cq->cons;
		spin_unlock_irqrestore(&cq->lock, irqflags);
	}
	return missed;
}

/* ---- queue pairs ---- */

void hicain_wq_init(struct hicain_wq *wq, u32 depth, u32 stride, u32 max_sge)
{
	wq->depth = depth;
	wq->stride = stride;
	wq->max_sge = max_sge;
	spin_lock_init(&wq->lock);
}

/*
 * hicain_wq_cmd - describe wq to the device: the fields CREATE_QP has
 * for each of its SQ and RQ, and CREATE_SRQ for its ring.
 */
static void hicain_wq_cmd(const struct hicain_wq *wq, __le32 *depth, __le32 *max_sge,
			  __le32 *stride, __le64 *ring_gpa, __le64 *dbrec_gpa)
{
	*depth = cpu_to_le32(wq->depth);
	*max_sge = cpu_to_le32(wq->max_sge);
	*stride = cpu_to_le32(wq->stride);
	*ring_gpa = cpu_to_le64(wq->ring_dma);
	*dbrec_gpa = cpu_to_le64(wq->dbrec_dma);
}

/* hicain_wq_alloc - a kernel ring in coherent memory, its dbrec given. */
static int hicain_wq_alloc(struct device *dma_dev, struct hicain_wq *wq,
			   struct hicain_wq_dbrec *dbrec, dma_addr_t dbrec_dma)
{
	wq->dbrec = dbrec;
	wq->dbrec_dma = dbrec_dma;
	wq->ring = dma_alloc_coherent(dma_dev, (size_t)wq->depth * wq->stride, &wq->ring_dma,
				      GFP_KERNEL | __GFP_NOWARN); /* sized by the caller */
	return wq->ring ? 0 : -ENOMEM;
}

/*
 * hicain_wq_alloc_user - a mapped ring with its dbrec, as
 * hicain_uq_alloc (1: the queue cannot be mapped).
 */
int hicain_wq_alloc_user(struct hicain_ibdev *hidev, struct ib_udata *udata, struct hicain_wq *wq)
{
	int ret;

	ret = hicain_uq_alloc(hidev, udata, &wq->uq, (size_t)wq->depth * wq->stride,
			      sizeof(struct hicain_wq_dbrec), false);
	if (ret)
		return ret;
	wq->ring = wq->uq.cpu;
	wq->ring_dma = wq->uq.dma;
	wq->dbrec = wq->uq.cpu + wq->uq.dbrec_off;
	wq->dbrec_dma = wq->uq.dma + wq->uq.dbrec_off;
	return 0;
}

static void hicain_wq_free(struct hicain_ibdev *hidev, struct hicain_wq *wq)
{
	if (wq->uq.entry)
		hicain_uq_free(hidev, &wq->uq);
	else if (wq->ring)
		dma_free_coherent(hicain_dma_dev(hidev), (size_t)wq->depth * wq->stride, wq->ring,
				  wq->ring_dma);
	wq->ring = NULL;
}

/*
 * hicain_wqs_free - free a queue's two work queues (a QP's SQ and RQ, an
 * SRQ's ring and tag-matching ops ring) and the coherent block of its n
 * doorbell records at *dbrecs (NULL: none, or in mapped pages).
 */
static void hicain_wqs_free(struct hicain_ibdev *hidev, struct hicain_wq *a, struct hicain_wq *b,
			    struct hicain_wq_dbrec **dbrecs, dma_addr_t dbrecs_dma, unsigned int n)
{
	hicain_wq_free(hidev, a);
	hicain_wq_free(hidev, b);
	if (*dbrecs)
		dma_free_coherent(hicain_dma_dev(hidev), n * sizeof(**dbrecs), *dbrecs, dbrecs_dma);
	*dbrecs = NULL;
}

/* hicain_wq_keep - as hicain_uq_keep, for either kind of ring. */
static size_t hicain_wq_keep(struct hicain_wq *wq)
{
	size_t bytes = 0;

	if (wq->uq.entry)
		bytes = hicain_uq_keep(&wq->uq);
	else if (wq->ring)
		bytes = (size_t)wq->depth * wq->stride;
	wq->ring = NULL;
	return bytes;
}

/*
 * hicain_wqs_release - hicain_wqs_free, or keep all of it while the
 * device may still use it (in_use: hicain_admin_lost).
 */
void hicain_wqs_release(struct hicain_ibdev *hidev, struct hicain_wq *a, struct hicain_wq *b,
			struct hicain_wq_dbrec **dbrecs, dma_addr_t dbrecs_dma, unsigned int n,
			bool in_use)
{
	size_t bytes;

	if (!in_use) {
		hicain_wqs_free(hidev, a, b, dbrecs, dbrecs_dma, n);
		return;
	}
	bytes = hicain_wq_keep(a) + hicain_wq_keep(b);
	if (*dbrecs)
		bytes += n * sizeof(**dbrecs);
	*dbrecs = NULL;
	hicain_admin_keep(hidev->hdev, bytes);
}

static void hicain_qp_free_rings(struct hicain_ibdev *hidev, struct hicain_qp *qp)
{
	hicain_wqs_free(hidev, &qp->sq, &qp->rq, &qp->dbrecs, qp->dbrecs_dma, 2);
}

/* hicain_qp_release_rings - hicain_wqs_release of the QP's rings. */
static void hicain_qp_release_rings(struct hicain_ibdev *hidev, void *q, bool in_use)
{
	struct hicain_qp *qp = q;

	hicain_wqs_release(hidev, &qp->sq, &qp->rq, &qp->dbrecs, qp->dbrecs_dma, 2, in_use);
}

/*
 * hicain_qp_alloc_rings - a user QP's SQ and RQ in pages it maps, both
 * or neither; otherwise (a kernel QP, or a queue too large to map) in
 * coherent memory with the two dbrecs side by side.
 */
static int hicain_qp_alloc_rings(struct hicain_ibdev *hidev, struct hicain_qp *qp,
				 bool has_rq, struct ib_udata *udata)
{
	struct device *dma_dev = hicain_dma_dev(hidev);
	int ret;

	ret = hicain_wq_alloc_user(hidev, udata, &qp->sq);
	if (!ret && has_rq)
		ret = hicain_wq_alloc_user(hidev, udata, &qp->rq);
	if (ret <= 0) {
		if (ret)
			hicain_qp_free_rings(hidev, qp);
		return ret;
	}
	hicain_qp_free_rings(hidev, qp);	/* one of them did not fit */
	qp->dbrecs = dma_alloc_coherent(dma_dev, 2 * sizeof(*qp->dbrecs), &qp->dbrecs_dma,
					GFP_KERNEL);
	if (!qp->dbrecs)
		return -ENOMEM;
	ret = hicain_wq_alloc(dma_dev, &qp->sq, &qp->dbrecs[0], qp->dbrecs_dma);
	if (!ret && has_rq)
		ret = hicain_wq_alloc(dma_dev, &qp->rq, &qp->dbrecs[1],
				      qp->dbrecs_dma + sizeof(*qp->dbrecs));
	if (ret)
		hicain_qp_free_rings(hidev, qp);
	return ret;
}

/* hicain_max_inline - the inline bytes a send WQE may carry. */
static u32 hicain_max_inline(struct hicain_ibdev *hidev)
{
	return min_t(u32, le32_to_cpu(READ_ONCE(hidev->hdev->hdr->max_inline)), HICAIN_MAX_INLINE);
}

/* hicain_wqe_av_ok - the device takes address vectors in WQEs (ABI 1.3). */
static bool hicain_wqe_av_ok(struct hicain_ibdev *hidev)
{
	return hicain_abi_minor_at_least(hidev, 3);
}

/*
 * hicain_qp_size - the rings of a QP from the requested capabilities,
 * within the device limits of the header. A send WQE holds the SGEs or
 * the inline data after its header, and on a UD or GSI QP after the
 * room for an address vector (a software AH's, HICAIN_SEND_AV); the QP
 * reports as inline capacity all the room its stride leaves after that,
 * which is at least what it asked for. A QP on an SRQ, and an XRC
 * initiator, has no receive ring.
 */
static int hicain_qp_size(struct hicain_ibdev *hidev, struct ib_qp_init_attr *init,
			  struct hicain_qp *qp)
{
	struct hicain_dev_hdr *h = hidev->hdev->hdr;
	u32 max_wr = le32_to_cpu(READ_ONCE(h->max_qp_wr));
	u32 max_sge = le32_to_cpu(READ_ONCE(h->max_sge));
	u32 max_inline = hicain_max_inline(hidev);
	struct ib_qp_cap *cap = &init->cap;
	bool has_rq = !init->srq && init->qp_type != IB_QPT_XRC_INI;
	u32 body;

	if (cap->max_send_wr > max_wr || cap->max_send_sge > max_sge ||
	    cap->max_inline_data > max_inline)
		return -EINVAL;
	if (has_rq && (cap->max_recv_wr > max_wr || cap->max_recv_sge > max_sge))
		return -EINVAL;
	qp->av_room = 0;
	if ((init->qp_type == IB_QPT_UD || init->qp_type == IB_QPT_GSI ||
	     init->qp_type == IB_QPT_SMI) && hicain_wqe_av_ok(hidev))
		qp->av_room = sizeof(struct hicain_wqe_av);
	qp->cap.max_send_wr = roundup_pow_of_two(max(cap->max_send_wr, 1U));
	qp->cap.max_send_sge = max(cap->max_send_sge, 1U);
	body = max_t(u32, qp->cap.max_send_sge * sizeof(struct hicain_sge), cap->max_inline_data);
	qp->sq.stride = ALIGN(sizeof(struct hicain_send_wqe) + qp->av_room + body, 64);
	qp->cap.max_inline_data = min_t(u32, qp->sq.stride - sizeof(struct hicain_send_wqe) -
					qp->av_room, max_inline);
	if (!has_rq) {
		qp->cap.max_recv_wr = 0;
		qp->cap.max_recv_sge = 0;
	} else {
		qp->cap.max_recv_wr = roundup_pow_of_two(max(cap->max_recv_wr, 1U));
		qp->cap.max_recv_sge = max(cap->max_recv_sge, 1U);
	}
	if (qp->cap.max_send_wr > max_wr || qp->cap.max_recv_wr > max_wr)
		return -EINVAL;
	return 0;
}

int hicain_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		     struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibqp->device);
	struct hicain_qp *qp = to_hqp(ibqp);
	struct hicain_ib_create_qp_resp resp = {};
	struct hicain_admin_cmd cmd = {};
	struct hicain_cmd_create_qp *c = &cmd.create_qp;
	int ret;

	/* The device's transports, and QP1 for ib_mad: the device gives
	 * the GSI QP handle 1 (one per device) and passes it every MAD its
	 * own PMA does not answer. RoCE has no QP0 (IBTA vol. 1 annex A16).
	 */
	switch (init->qp_type) {
	case IB_QPT_RC:
	case IB_QPT_UC:
	case IB_QPT_UD:
		break;
	case IB_QPT_XRC_INI:
		/* An RC send queue; its WQEs name the target's XRC SRQ. */
		if (!hicain_xrc_ok(hidev))
			return -EOPNOTSUPP;
		break;
	case IB_QPT_XRC_TGT:
		return hicain_create_xrc_tgt(ibqp, init);
	case IB_QPT_GSI:
		if (udata)
			return -EOPNOTSUPP;
		break;
	case IB_QPT_SMI:
		/* QP0 of an InfiniBand port, for ib_mad (the device gives
		 * it handle 0 and the SMP answers its SMA does not keep).
		 */
		if (udata || !hidev->ib)
			return -EOPNOTSUPP;
		break;
	case IB_QPT_RAW_PACKET:
		/* Whole Ethernet frames, for user space (ib_core asks for
		 * CAP_NET_RAW); its flows are hicain_ib_raw.c's, and so is
		 * an RSS QP (an indirection table of work queues).
		 */
		if (!udata || !hicain_raw_ok(hidev))
			return -EOPNOTSUPP;
		if (init->rwq_ind_tbl)
			return hicain_create_rss_qp(ibqp, init, udata);
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (init->create_flags)
		return -EOPNOTSUPP;
	ret = hicain_qp_size(hidev, init, qp);
	if (ret)
		return ret;
	qp->epoch = atomic_read(&hidev->epoch);
	qp->sq_sig_type = init->sq_sig_type;
	hicain_wq_init(&qp->sq, qp->cap.max_send_wr, qp->sq.stride, qp->cap.max_send_sge);
	if (qp->cap.max_recv_wr)
		hicain_wq_init(&qp->rq, qp->cap.max_recv_wr,
			       ALIGN(sizeof(struct hicain_recv_wqe) +
				     qp->cap.max_recv_sge * sizeof(struct hicain_sge), 16),
			       qp->cap.max_recv_sge);
	ret = hicain_qp_alloc_rings(hidev, qp, qp->cap.max_recv_wr, udata);
	if (ret)
		return ret;

	cmd.opcode = cpu_to_le16(HICAIN_CMD_CREATE_QP);
	c->pd = cpu_to_le32(to_hpd(ibqp->pd)->pdn);
	c->qp_type = cpu_to_le32(init->qp_type);	/* hicain_check_numbering */
	c->send_cq = cpu_to_le32(to_hcq(init->send_cq)->cqn);
	if (init->recv_cq)	/* an XRC initiator has none */
		c->recv_cq = cpu_to_le32(to_hcq(init->recv_cq)->cqn);
	c->max_inline = cpu_to_le32(qp->cap.max_inline_data);
	c->sq_sig_all = cpu_to_le32(init->sq_sig_type == IB_SIGNAL_ALL_WR);
	hicain_wq_cmd(&qp->sq, &c->sq_depth, &c->max_send_sge, &c->sq_stride, &c->sq_gpa,
		      &c->sq_dbrec_gpa);
	if (init->srq)
		c->srq = cpu_to_le32(to_hsrq(init->srq)->srqn);
	else if (qp->cap.max_recv_wr)
		hicain_wq_cmd(&qp->rq, &c->rq_depth, &c->max_recv_sge, &c->rq_stride, &c->rq_gpa,
			      &c->rq_dbrec_gpa);
	ret = hicain_queue_exec(hidev, &hicain_qp_kind, qp, &cmd, &qp->qpn);
	if (ret)
		return ret;
	ibqp->qp_num = qp->qpn;
	if (udata) {
		resp.qpn = qp->qpn;
		resp.max_inline = qp->cap.max_inline_data;
		resp.max_send_sge = qp->cap.max_send_sge;
		resp.max_recv_sge = qp->cap.max_recv_sge;
		hicain_uq_resp(&qp->sq.uq, qp->sq.depth, qp->sq.stride, &resp.sq);
		hicain_uq_resp(&qp->rq.uq, qp->rq.depth, qp->rq.stride, &resp.rq);
	}
	ret = hicain_queue_publish(hidev, &hicain_qp_kind, qp, qp->qpn, udata, &resp,
				   sizeof(resp));
	if (ret)
		return ret;
	init->cap = qp->cap;
	return 0;
}

int hicain_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibqp->device);
	struct hicain_qp *qp = to_hqp(ibqp);

	return hicain_queue_destroy(hidev, &hicain_qp_kind, qp, qp->epoch, qp->qpn);
}

/* hicain_cached_gid_index - gid's index in the GID cache, or -1. */
static int hicain_cached_gid_index(struct hicain_ibdev *hidev, const union ib_gid *gid)
{
	unsigned long flags;
	int i, idx = -1;

	spin_lock_irqsave(&hidev->gid_lock, flags);
	for (i = 0; i < hidev->n_gids; i++) {
		if (!memcmp(hidev->gids[i], gid->raw, sizeof(gid->raw))) {
			idx = i;
			break;
		}
	}
	spin_unlock_irqrestore(&hidev->gid_lock, flags);
	return idx;
}

/*
 * hicain_dev_gid_index - the index of gid in the device's own GID table,
 * which need not be ib_core's index of the same GID. The cache answers;
 * a caller that may sleep rereads the table (QUERY_GID) when it does
 * not have the GID, in case the device's table moved on.
 */
static int hicain_dev_gid_index(struct hicain_ibdev *hidev, const union ib_gid *gid,
				bool sleepable)
{
	int idx = hicain_cached_gid_index(hidev, gid);

	if (idx < 0 && sleepable) {
		mutex_lock(&hidev->addr_lock);
		hicain_refresh_gids(hidev);
		mutex_unlock(&hidev->addr_lock);
		idx = hicain_cached_gid_index(hidev, gid);
	}
	if (idx < 0) {
		ibdev_dbg(&hidev->ibdev, "GID %pI6 is not in the device's table\n", gid->raw);
		return -EINVAL;
	}
	return idx;
}

/*
 * hicain_ib_ah_to_dev - an InfiniBand address vector: a DLID, and a GRH
 * only for global routes; ib_core's GID indices are the device's, whose
 * table query_gid reads.
 */
static int hicain_ib_ah_to_dev(const struct rdma_ah_attr *ah, struct hicain_ah_attr *out)
{
	const struct ib_global_route *grh = rdma_ah_read_grh(ah);

	if (ah->type != RDMA_AH_ATTR_TYPE_IB)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->dlid = cpu_to_le16(rdma_ah_get_dlid(ah));
	out->src_path_bits = rdma_ah_get_path_bits(ah);
	out->sl = rdma_ah_get_sl(ah);
	out->port_num = rdma_ah_get_port_num(ah);
	out->static_rate = rdma_ah_get_static_rate(ah);
	if (rdma_ah_get_ah_flags(ah) & IB_AH_GRH) {
		memcpy(out->dgid, grh->dgid.raw, sizeof(out->dgid));
		out->flow_label = cpu_to_le32(grh->flow_label);
		out->sgid_index = grh->sgid_index;
		out->hop_limit = grh->hop_limit;
		out->traffic_class = grh->traffic_class;
		out->is_global = 1;
	}
	return 0;
}

static int hicain_ah_to_dev(struct hicain_ibdev *hidev, const struct rdma_ah_attr *ah,
			    struct hicain_ah_attr *out, bool sleepable)
{
	const struct ib_global_route *grh = rdma_ah_read_grh(ah);
	int idx;

	if (hidev->ib)
		return hicain_ib_ah_to_dev(ah, out);

	/* RoCE: every address vector has a GRH, whose SGID ib_core
	 * resolved (rdma_fill_sgid_attr) as it resolved the DMAC.
	 */
	if (!(rdma_ah_get_ah_flags(ah) & IB_AH_GRH) || !grh->sgid_attr)
		return -EINVAL;
	idx = hicain_dev_gid_index(hidev, &grh->sgid_attr->gid, sleepable);
	if (idx < 0)
		return idx;
	memcpy(out->dgid, grh->dgid.raw, sizeof(out->dgid));
	out->flow_label = cpu_to_le32(grh->flow_label);
	out->sgid_index = idx;
	out->hop_limit = grh->hop_limit;
	out->traffic_class = grh->traffic_class;
	out->sl = rdma_ah_get_sl(ah);
	memcpy(out->dmac, ah->roce.dmac, ETH_ALEN);
	out->is_global = 1;
	out->port_num = rdma_ah_get_port_num(ah);
	out->static_rate = rdma_ah_get_static_rate(ah);
	return 0;
}

int hicain_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		     struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibqp->device);
	struct hicain_qp *qp = to_hqp(ibqp);
	struct hicain_admin_cmd cmd = {};
	struct hicain_cmd_modify_qp *m = &cmd.modify_qp;
	struct hicain_qp_attr *a = &m->attr;
	int ret;

	if (mask & ~HICAIN_QP_ATTR_MASK)
		return -EOPNOTSUPP;
	if ((mask & IB_QP_AV) && (ret = hicain_ah_to_dev(hidev, &attr->ah_attr, &a->ah_attr, true)))
		return ret;
	cmd.opcode = cpu_to_le16(HICAIN_CMD_MODIFY_QP);
	m->qpn = cpu_to_le32(qp->qpn);
	m->attr_mask = cpu_to_le32(mask);
#define X(f, bits) HICAIN_TO_DEV(a, attr, f, bits);
	HICAIN_QP_ATTR_FIELDS(X)
#undef X
	return hicain_admin_exec(hidev->hdev, &cmd, NULL);
}

/* hicain_ah_from_dev - the device's address vector, with ib_core's SGID. */
static void hicain_ah_from_dev(struct hicain_ibdev *hidev, const struct hicain_ah_attr *a,
			       struct rdma_ah_attr *ah)
{
	const struct ib_gid_attr *sgid = NULL;
	struct hicain_admin_cqe cqe;
	union ib_gid gid;
	u8 sgid_index = 0;

	if (hidev->ib) {
		ah->type = RDMA_AH_ATTR_TYPE_IB;
		rdma_ah_set_dlid(ah, le16_to_cpu(a->dlid));
		rdma_ah_set_path_bits(ah, a->src_path_bits);
		rdma_ah_set_sl(ah, a->sl);
		rdma_ah_set_port_num(ah, a->port_num);
		rdma_ah_set_static_rate(ah, a->static_rate);
		if (a->is_global) {
			memcpy(gid.raw, a->dgid, sizeof(gid.raw));
			rdma_ah_set_grh(ah, &gid, le32_to_cpu(a->flow_label), a->sgid_index,
					a->hop_limit, a->traffic_class);
		}
		return;
	}
	if (!hicain_admin_handle(hidev, HICAIN_CMD_QUERY_GID, a->sgid_index, &cqe)) {
		memcpy(gid.raw, cqe.out, sizeof(gid.raw));
		sgid = rdma_find_gid(&hidev->ibdev, &gid, IB_GID_TYPE_ROCE_UDP_ENCAP, NULL);
		if (!IS_ERR(sgid)) {
			sgid_index = sgid->index;
			rdma_put_gid_attr(sgid);
		}
	}
	memcpy(gid.raw, a->dgid, sizeof(gid.raw));
	ah->type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_grh(ah, &gid, le32_to_cpu(a->flow_label), sgid_index, a->hop_limit,
			a->traffic_class);
	rdma_ah_set_sl(ah, a->sl);
	rdma_ah_set_port_num(ah, a->port_num);
	rdma_ah_set_static_rate(ah, a->static_rate);
	memcpy(ah->roce.dmac, a->dmac, ETH_ALEN);
}

int hicain_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		    struct ib_qp_init_attr *init)
{
	struct hicain_ibdev *hidev = to_hidev(ibqp->device);
	struct hicain_qp *qp = to_hqp(ibqp);
	struct hicain_qp_attr a;
	int ret;

	ret = hicain_admin_query(hidev, HICAIN_CMD_QUERY_QP, qp->qpn, &a, sizeof(a));
	if (ret)
		return ret;
	memset(attr, 0, sizeof(*attr));
#define X(f, bits) HICAIN_FROM_DEV(attr, &a, f, bits);
	HICAIN_QP_ATTR_FIELDS(X)
#undef X
	attr->path_mig_state = IB_MIG_MIGRATED;
	attr->sq_draining = a.sq_draining;
	attr->cap = qp->cap;
	if (attr->qp_state >= IB_QPS_RTR && attr->qp_state != IB_QPS_ERR &&
	    ibqp->qp_type != IB_QPT_RAW_PACKET)	/* no address vector */
		hicain_ah_from_dev(hidev, &a.ah_attr, &attr->ah_attr);

	memset(init, 0, sizeof(*init));
	init->qp_type = ibqp->qp_type;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = qp->cap;
	init->sq_sig_type = qp->sq_sig_type;
	return 0;
}

/* ---- posting ---- */

static bool hicain_wq_full(struct hicain_wq *wq)
{
	return wq->prod - le32_to_cpu(READ_ONCE(wq->dbrec->cons)) >= wq->depth;
}

/* hicain_wq_publish - hand the WQEs up to prod to the device. */
static void hicain_wq_publish(struct hicain_ibdev *hidev, struct hicain_wq *wq)
{
	dma_wmb();
	WRITE_ONCE(wq->dbrec->prod, cpu_to_le32(wq->prod));
	hicain_ring_doorbell(hidev->hdev, HICAIN_DB_QP);
}

static void hicain_write_sges(struct hicain_sge *dst, const struct ib_sge *src, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		dst[i].addr = cpu_to_le64(src[i].addr);
		dst[i].length = cpu_to_le32(src[i].length);
		dst[i].lkey = cpu_to_le32(src[i].lkey);
	}
}

/*
 * hicain_gather_inline - copy the data of an IB_SEND_INLINE request into
 * buf. The SGEs of a user QP name the process's virtual addresses (post
 * send runs in its context, from the uverbs write()); a kernel QP's name
 * kernel addresses. The data need not lie in an MR.
 */
static int hicain_gather_inline(struct hicain_qp *qp, const struct ib_send_wr *wr, u8 *buf,
				u32 *len)
{
	u32 n = 0;
	int i;

	if (wr->num_sge < 0)
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++) {
		const struct ib_sge *sge = &wr->sg_list[i];

		if (sge->length > qp->cap.max_inline_data - n)
			return -EINVAL;
		if (qp->ibqp.uobject) {
			if (copy_from_user(buf + n, u64_to_user_ptr(sge->addr), sge->length))
				return -EFAULT;
		} else {
			memcpy(buf + n, (void *)(uintptr_t)sge->addr, sge->length);
		}
		n += sge->length;
	}
	*len = n;
	return 0;
}

static bool hicain_qp_is_ud(struct hicain_qp *qp)
{
	/* QP0 and QP1 send UD work requests, with an AH in each. */
	return qp->ibqp.qp_type == IB_QPT_UD || qp->ibqp.qp_type == IB_QPT_GSI ||
	       qp->ibqp.qp_type == IB_QPT_SMI;
}

/*
 * hicain_build_send - write one send WQE. inl holds the gathered inline
 * data (inl_len bytes) of an IB_SEND_INLINE request, which the WQE
 * carries after its header instead of SGEs.
 */
static int hicain_build_send(struct hicain_qp *qp, const struct ib_send_wr *wr,
			     struct hicain_send_wqe *wqe, const u8 *inl, u32 inl_len)
{
	bool inline_data = wr->send_flags & IB_SEND_INLINE;
	u16 flags = wr->send_flags;
	void *data = wqe + 1;	/* the SGEs or the inline data */
	struct hicain_ah *ah;

	if (!inline_data && (wr->num_sge < 0 || wr->num_sge > qp->sq.max_sge))
		return -EINVAL;
	if (wr->send_flags & ~(IB_SEND_FENCE | IB_SEND_SIGNALED | IB_SEND_SOLICITED |
			       IB_SEND_INLINE))
		return -EINVAL;
	memset(wqe, 0, sizeof(*wqe));
	switch (wr->opcode) {
	case IB_WR_SEND:
		break;
	case IB_WR_SEND_WITH_IMM:
		wqe->imm_data = (__force __le32)wr->ex.imm_data;
		break;
	case IB_WR_RDMA_WRITE_WITH_IMM:
		wqe->imm_data = (__force __le32)wr->ex.imm_data;
		fallthrough;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_READ:
		wqe->remote_addr = cpu_to_le64(rdma_wr(wr)->remote_addr);
		wqe->rkey = cpu_to_le32(rdma_wr(wr)->rkey);
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		wqe->remote_addr = cpu_to_le64(atomic_wr(wr)->remote_addr);
		wqe->rkey = cpu_to_le32(atomic_wr(wr)->rkey);
		wqe->compare_add = cpu_to_le64(atomic_wr(wr)->compare_add);
		wqe->swap = cpu_to_le64(atomic_wr(wr)->swap);
		break;
	case IB_WR_SEND_WITH_INV:
	case IB_WR_LOCAL_INV:
		/* ABI 1.10, RC: the R_Key to invalidate in imm_data. */
		if (qp->ibqp.qp_type != IB_QPT_RC)
			return -EINVAL;
		wqe->imm_data = cpu_to_le32(wr->ex.invalidate_rkey);
		break;
	default:
		return -EINVAL;
	}
	if (hicain_qp_is_ud(qp)) {
		/* A datagram is a SEND through an AH (IBA 9.8.3); a Q_Key
		 * with bit 31 set means the QP's own (IBA 10.2.5), which
		 * the device resolves.
		 */
		if (wr->opcode != IB_WR_SEND && wr->opcode != IB_WR_SEND_WITH_IMM)
			return -EINVAL;
		if (!ud_wr(wr)->ah)
			return -EINVAL;
		ah = to_hah(ud_wr(wr)->ah);
		if (ah->sw) {
			/* No device object: the AV goes with the request. */
			struct hicain_wqe_av *av = data;

			if (!qp->av_room)
				return -EINVAL;
			av->attr = ah->attr;
			memset(av->rsvd, 0, sizeof(av->rsvd));
			flags |= HICAIN_SEND_AV;
			data = av + 1;
		} else {
			wqe->ah = cpu_to_le32(ah->handle);
		}
		wqe->remote_qpn = cpu_to_le32(ud_wr(wr)->remote_qpn);
		wqe->remote_qkey = cpu_to_le32(ud_wr(wr)->remote_qkey);
	}
	/* IB_WR_* and IB_SEND_* are the device's (hicain_check_numbering). */
	wqe->wr_id = cpu_to_le64(wr->wr_id);
	wqe->opcode = wr->opcode;
	wqe->send_flags = cpu_to_le16(flags);
	if (wr->opcode == IB_WR_LOCAL_INV) {
		wqe->send_flags = cpu_to_le16(flags & ~IB_SEND_INLINE);
		return 0;	/* no data */
	}
	if (inline_data) {
		wqe->inline_len = cpu_to_le32(inl_len);
		memcpy(data, inl, inl_len);
	} else {
		wqe->num_sge = wr->num_sge;
		hicain_write_sges(data, wr->sg_list, wr->num_sge);
	}
	return 0;
}

/*
 * hicain_post_send - write each request to the SQ and hand them to the
 * device. Inline data is gathered before the SQ lock is taken (copying
 * from user memory may sleep), so the lock is held per request.
 */
int hicain_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		     const struct ib_send_wr **bad_wr)
{
	struct hicain_ibdev *hidev = to_hidev(ibqp->device);
	struct hicain_qp *qp = to_hqp(ibqp);
	struct hicain_wq *sq = &qp->sq;
	u8 inl[HICAIN_MAX_INLINE];
	bool posted = false;
	unsigned long flags;
	u32 inl_len;
	int ret = 0;

	/* A mapped SQ is the process's to post to; an XRC target has none. */
	if (sq->uq.entry || !sq->ring) {
		*bad_wr = wr;
		return -EINVAL;
	}
	for (; wr; wr = wr->next) {
		inl_len = 0;
		if (wr->send_flags & IB_SEND_INLINE) {
			ret = hicain_gather_inline(qp, wr, inl, &inl_len);
			if (ret)
				break;
		}
		spin_lock_irqsave(&sq->lock, flags);
		if (hicain_wq_full(sq))
			ret = -ENOMEM;
		else
			ret = hicain_build_send(qp, wr,
						sq->ring + (sq->prod & (sq->depth - 1)) * sq->stride,
						inl, inl_len);
		if (!ret) {
			sq->prod++;
			posted = true;
		}
		spin_unlock_irqrestore(&sq->lock, flags);
		if (ret)
			break;
	}
	if (posted) {
		spin_lock_irqsave(&sq->lock, flags);
		hicain_wq_publish(hidev, sq);
		spin_unlock_irqrestore(&sq->lock, flags);
	}
	if (ret)
		*bad_wr = wr;
	return ret;
}

/* hicain_wq_post_recv - post receive WQEs on a QP's RQ or an SRQ ring. */
static int hicain_wq_post_recv(struct hicain_ibdev *hidev, struct hicain_wq *rq,
			       const struct ib_recv_wr *wr, const struct ib_recv_wr **bad_wr)
{
	struct hicain_recv_wqe *wqe;
	unsigned long flags;
	u32 start;
	int ret = 0;

	/* A mapped RQ or SRQ is the process's to post to. */
	if (rq->uq.entry) {
		*bad_wr = wr;
		return -EINVAL;
	}
	spin_lock_irqsave(&rq->lock, flags);
	start = rq->prod;
	for (; wr; wr = wr->next) {
		if (hicain_wq_full(rq)) {
			ret = -ENOMEM;
			break;
		}
		if (wr->num_sge < 0 || wr->num_sge > rq->max_sge) {
			ret = -EINVAL;
			break;
		}
		wqe = rq->ring + (rq->prod & (rq->depth - 1)) * rq->stride;
		wqe->wr_id = cpu_to_le64(wr->wr_id);
		wqe->num_sge = cpu_to_le32(wr->num_sge);
		wqe->rsvd = 0;
		hicain_write_sges((struct hicain_sge *)(wqe + 1), wr->sg_list, wr->num_sge);
		rq->prod++;
	}
	if (rq->prod != start)
		hicain_wq_publish(hidev, rq);
	spin_unlock_irqrestore(&rq->lock, flags);
	if (ret)
		*bad_wr = wr;
	return ret;
}

int hicain_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		     const struct ib_recv_wr **bad_wr)
{
	/* A QP on an SRQ takes its receives from there (IBA 10.2.9.5); an
	 * XRC QP has no receive queue.
	 */
	if (ibqp->srq || !to_hqp(ibqp)->rq.ring) {
		*bad_wr = wr;
		return -EINVAL;
	}
	return hicain_wq_post_recv(to_hidev(ibqp->device), &to_hqp(ibqp)->rq, wr, bad_wr);
}

/* ---- address handles ---- */

/*
 * hicain_create_ah - an AH for the address vector ib_core resolved (SGID
 * attribute, and for RoCE the DMAC: ib_resolve_eth_dmac for user AHs).
 * A caller that may sleep gets a device AH (CREATE_AH). ib_cm creates
 * the AHs of its MADs under a spinlock (without
 * RDMA_CREATE_AH_SLEEPABLE), where no admin command can run: those are
 * software AHs, whose address vector each UD WQE carries (ABI 1.3), as
 * NICs that keep the AV in the WQE do. A device AH comes with the
 * release record a destroy in atomic context needs.
 */
int hicain_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
		     struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibah->device);
	struct hicain_ah *ah = to_hah(ibah);
	struct hicain_admin_cmd cmd = {};
	struct hicain_admin_cqe cqe;
	int ret;

	ah->sgid_index = rdma_ah_read_grh(init->ah_attr)->sgid_index;
	ah->epoch = atomic_read(&hidev->epoch);
	if (!(init->flags & RDMA_CREATE_AH_SLEEPABLE)) {
		if (!hicain_wqe_av_ok(hidev))
			return -EAGAIN;
		ret = hicain_ah_to_dev(hidev, init->ah_attr, &ah->attr, false);
		if (ret)
			return ret;
		ah->sw = true;
		return 0;
	}
	ret = hicain_ah_to_dev(hidev, init->ah_attr, &cmd.create_ah.attr, true);
	if (ret)
		return ret;
	ah->release = kzalloc(sizeof(*ah->release), GFP_KERNEL);
	if (!ah->release)
		return -ENOMEM;
	cmd.opcode = cpu_to_le16(HICAIN_CMD_CREATE_AH);
	cmd.create_ah.pd = cpu_to_le32(to_hpd(ibah->pd)->pdn);
	ret = hicain_admin_exec(hidev->hdev, &cmd, &cqe);
	if (ret) {
		kfree(ah->release);
		return ret;
	}
	ah->handle = le32_to_cpu(cqe.handle);
	ah->attr = cmd.create_ah.attr;
	if (udata) {
		/* The process's UD WQEs name the device's AH. */
		struct hicain_ib_create_ah_resp resp = { .handle = ah->handle };

		ret = hicain_udata_resp(udata, &resp, sizeof(resp));
		if (ret) {
			hicain_admin_handle(hidev, HICAIN_CMD_DESTROY_AH, ah->handle, NULL);
			kfree(ah->release);
			return ret;
		}
	}
	return 0;
}

/*
 * hicain_query_ah - the AH's address vector. ib_mad needs it to match a
 * response with its request (rcv_has_same_gid in mad.c: rdma_query_ah
 * must succeed and name the SGID the request left from).
 */
int hicain_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	struct hicain_ah *ah = to_hah(ibah);
	union ib_gid dgid;

	memcpy(dgid.raw, ah->attr.dgid, sizeof(dgid.raw));
	memset(attr, 0, sizeof(*attr));
	attr->type = ibah->type;
	rdma_ah_set_sl(attr, ah->attr.sl);
	rdma_ah_set_port_num(attr, ah->attr.port_num);
	rdma_ah_set_static_rate(attr, ah->attr.static_rate);
	if (attr->type == RDMA_AH_ATTR_TYPE_IB) {
		rdma_ah_set_dlid(attr, le16_to_cpu(ah->attr.dlid));
		rdma_ah_set_path_bits(attr, ah->attr.src_path_bits);
		if (ah->attr.is_global)
			rdma_ah_set_grh(attr, &dgid, le32_to_cpu(ah->attr.flow_label),
					ah->sgid_index, ah->attr.hop_limit, ah->attr.traffic_class);
		return 0;
	}
	rdma_ah_set_grh(attr, &dgid, le32_to_cpu(ah->attr.flow_label), ah->sgid_index,
			ah->attr.hop_limit, ah->attr.traffic_class);
	memcpy(attr->roce.dmac, ah->attr.dmac, ETH_ALEN);
	return 0;
}

/*
 * hicain_ah_free_work - send the DESTROY_AH commands that destroy_ah
 * could not send in atomic context. An AH of an earlier epoch went with
 * the device reset.
 */
void hicain_ah_free_work(struct work_struct *work)
{
	struct hicain_ibdev *hidev = container_of(work, struct hicain_ibdev, ah_free_work);
	struct hicain_ah_release *rel, *next;
	LIST_HEAD(list);
	int ret;

	spin_lock_irq(&hidev->ah_free_lock);
	list_splice_init(&hidev->ah_free, &list);
	spin_unlock_irq(&hidev->ah_free_lock);
	list_for_each_entry_safe(rel, next, &list, list) {
		ret = hicain_destroy_handle(hidev, rel->epoch, HICAIN_CMD_DESTROY_AH, rel->handle);
		if (ret)
			ibdev_warn(&hidev->ibdev, "DESTROY_AH %u: %d\n", rel->handle, ret);
		kfree(rel);
	}
}

/*
 * hicain_destroy_ah - a software AH has nothing in the device. A device
 * AH destroyed in atomic context (ib_cm frees its MADs' AHs so) cannot
 * wait for DESTROY_AH: its release record goes to a work item, which
 * hicain_ib_remove flushes before the device goes. destroy_ah must not
 * fail, and ib_core frees the AH when it returns.
 */
int hicain_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	struct hicain_ibdev *hidev = to_hidev(ibah->device);
	struct hicain_ah *ah = to_hah(ibah);
	struct hicain_ah_release *rel = ah->release;
	unsigned long irqflags;

	if (ah->sw)
		return 0;
	if (ah->epoch != atomic_read(&hidev->epoch)) {
		kfree(rel);
		return 0;
	}
	if (flags & RDMA_DESTROY_AH_SLEEPABLE) {
		kfree(rel);
		return hicain_destroy_status(hicain_admin_handle(hidev, HICAIN_CMD_DESTROY_AH,
								 ah->handle, NULL));
	}
	rel->handle = ah->handle;
	rel->epoch = ah->epoch;
	spin_lock_irqsave(&hidev->ah_free_lock, irqflags);
	list_add_tail(&rel->list, &hidev->ah_free);
	spin_unlock_irqrestore(&hidev->ah_free_lock, irqflags);
	schedule_work(&hidev->ah_free_work);
	return 0;
}

/* ---- shared receive queues ---- */

static void hicain_srq_free_ring(struct hicain_ibdev *hidev, struct hicain_srq *srq)
{
	hicain_wqs_free(hidev, &srq->wq, &srq->ops, &srq->dbrec, srq->dbrec_dma, 1);
}

/* hicain_srq_release_ring - hicain_wqs_release of the SRQ's rings. */
static void hicain_srq_release_ring(struct hicain_ibdev *hidev, void *q, bool in_use)
{
	struct hicain_srq *srq = q;

	hicain_wqs_release(hidev, &srq->wq, &srq->ops, &srq->dbrec, srq->dbrec_dma, 1, in_use);
}

int hicain_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		      struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibsrq->device);
	struct device *dma_dev = hicain_dma_dev(hidev);
	struct hicain_dev_hdr *h = hidev->hdev->hdr;
	struct hicain_srq *srq = to_hsrq(ibsrq);
	struct ib_srq_attr *attr = &init->attr;
	struct hicain_ib_create_srq_resp resp = {};
	struct hicain_admin_cmd cmd = {};
	struct hicain_cmd_create_srq *c = &cmd.create_srq;
	u32 depth, max_sge;
	int ret;

	ret = hicain_xrc_srq_cmd(hidev, init, c);
	if (ret)
		return ret;
	/* A first bound before the allocation; the device checks its
	 * SRQ limits (QUERY_DEVICE max_srq_wr, max_srq_sge) exactly.
	 */
	if (attr->max_wr > le32_to_cpu(READ_ONCE(h->max_qp_wr)) ||
	    attr->max_sge > le32_to_cpu(READ_ONCE(h->max_sge)))
		return -EINVAL;
	depth = roundup_pow_of_two(max(attr->max_wr, 1U));
	max_sge = max(attr->max_sge, 1U);
	if (attr->srq_limit > depth)
		return -EINVAL;
	srq->epoch = atomic_read(&hidev->epoch);
	hicain_wq_init(&srq->wq, depth,
		       ALIGN(sizeof(struct hicain_recv_wqe) + max_sge * sizeof(struct hicain_sge), 16),
		       max_sge);
	/* A user SRQ's dbrec is in its mapped pages; srq->dbrec is the
	 * coherent one of a kernel SRQ.
	 */
	ret = hicain_wq_alloc_user(hidev, udata, &srq->wq);
	if (ret < 0)
		return ret;
	if (ret) {
		srq->dbrec = dma_alloc_coherent(dma_dev, sizeof(*srq->dbrec), &srq->dbrec_dma,
						GFP_KERNEL);
		if (!srq->dbrec)
			return -ENOMEM;
		ret = hicain_wq_alloc(dma_dev, &srq->wq, srq->dbrec, srq->dbrec_dma);
		if (ret)
			goto err_free;
	}
	if (init->srq_type == IB_SRQT_TM) {
		/* Only a mapped ring: operations are posted in user space. */
		hicain_wq_init(&srq->ops, HICAIN_TM_OPS_DEPTH, sizeof(struct hicain_tm_op_wqe), 1);
		ret = hicain_uq_alloc(hidev, udata, &srq->ops.uq,
				      (size_t)srq->ops.depth * srq->ops.stride,
				      sizeof(struct hicain_tm_dbrec), false);
		if (ret) {
			ret = ret < 0 ? ret : -EOPNOTSUPP;
			goto err_free;
		}
		srq->ops.ring = srq->ops.uq.cpu;
		srq->ops.ring_dma = srq->ops.uq.dma;
		c->ops_ring_gpa = cpu_to_le64(srq->ops.uq.dma);
		c->ops_dbrec_gpa = cpu_to_le64(srq->ops.uq.dma + srq->ops.uq.dbrec_off);
	}

	cmd.opcode = cpu_to_le16(HICAIN_CMD_CREATE_SRQ);
	c->pd = cpu_to_le32(to_hpd(ibsrq->pd)->pdn);
	c->limit = cpu_to_le32(attr->srq_limit);
	hicain_wq_cmd(&srq->wq, &c->depth, &c->max_sge, &c->stride, &c->ring_gpa, &c->dbrec_gpa);
	ret = hicain_queue_exec(hidev, &hicain_srq_kind, srq, &cmd, &srq->srqn);
	if (ret)
		return ret;
	if (init->srq_type == IB_SRQT_XRC)
		ibsrq->ext.xrc.srq_num = srq->srqn;	/* ibv_get_srq_num's */
	if (udata) {
		resp.srqn = srq->srqn;
		resp.max_sge = max_sge;
		hicain_uq_resp(&srq->wq.uq, depth, srq->wq.stride, &resp.srq);
		if (init->srq_type == IB_SRQT_TM) {
			hicain_uq_resp(&srq->ops.uq, srq->ops.depth, srq->ops.stride, &resp.ops);
			resp.max_num_tags = init->ext.tag_matching.max_num_tags;
		}
	}
	ret = hicain_queue_publish(hidev, &hicain_srq_kind, srq, srq->srqn, udata, &resp,
				   sizeof(resp));
	if (ret)
		return ret;
	attr->max_wr = depth;
	attr->max_sge = max_sge;
	return 0;

err_free:
	hicain_srq_free_ring(hidev, srq);
	return ret;
}

/*
 * hicain_modify_srq - arm or disarm the limit event. Resizing would move
 * the SRQ to a new ring while user space posts to the old one; the
 * driver does not offer it (no IB_DEVICE_SRQ_RESIZE).
 */
int hicain_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		      enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibsrq->device);
	struct hicain_srq *srq = to_hsrq(ibsrq);
	struct hicain_admin_cmd cmd = {};

	if (mask & ~IB_SRQ_LIMIT)
		return -EOPNOTSUPP;
	if (!mask)
		return 0;
	if (attr->srq_limit > srq->wq.depth)
		return -EINVAL;
	cmd.opcode = cpu_to_le16(HICAIN_CMD_MODIFY_SRQ);
	cmd.modify_srq.srqn = cpu_to_le32(srq->srqn);
	cmd.modify_srq.attr_mask = cpu_to_le32(HICAIN_SRQ_LIMIT);
	cmd.modify_srq.limit = cpu_to_le32(attr->srq_limit);
	return hicain_admin_exec(hidev->hdev, &cmd, NULL);
}

int hicain_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct hicain_ibdev *hidev = to_hidev(ibsrq->device);
	struct hicain_srq *srq = to_hsrq(ibsrq);
	struct hicain_srq_attr a;
	struct hicain_admin_cqe cqe;
	int ret;

	ret = hicain_admin_handle(hidev, HICAIN_CMD_QUERY_SRQ, srq->srqn, &cqe);
	if (ret)
		return ret;
	memcpy(&a, cqe.out, sizeof(a));
	attr->max_wr = le32_to_cpu(a.max_wr);
	attr->max_sge = le32_to_cpu(a.max_sge);
	attr->srq_limit = le32_to_cpu(a.srq_limit);
	return 0;
}

int hicain_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibsrq->device);
	struct hicain_srq *srq = to_hsrq(ibsrq);

	return hicain_queue_destroy(hidev, &hicain_srq_kind, srq, srq->epoch, srq->srqn);
}

int hicain_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr)
{
	return hicain_wq_post_recv(to_hidev(ibsrq->device), &to_hsrq(ibsrq)->wq, wr, bad_wr);
}

/* ---- multicast ---- */

static int hicain_mcast(struct ib_qp *ibqp, u16 opcode, union ib_gid *gid, u16 lid)
{
	struct hicain_ibdev *hidev = to_hidev(ibqp->device);
	struct hicain_admin_cmd cmd = {};

	/* Only datagram QPs join groups (IBA 10.5.2). */
	if (ibqp->qp_type != IB_QPT_UD)
		return -EINVAL;
	cmd.opcode = cpu_to_le16(opcode);
	cmd.mcast.qpn = cpu_to_le32(to_hqp(ibqp)->qpn);
	cmd.mcast.lid = cpu_to_le16(lid);
	memcpy(cmd.mcast.gid, gid->raw, sizeof(cmd.mcast.gid));
	return hicain_admin_exec(hidev->hdev, &cmd, NULL);
}

int hicain_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	return hicain_mcast(ibqp, HICAIN_CMD_ATTACH_MCAST, gid, lid);
}

int hicain_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	struct hicain_qp *qp = to_hqp(ibqp);

	/* A reset took the QP's groups with it. */
	if (qp->epoch != atomic_read(&to_hidev(ibqp->device)->epoch))
		return 0;
	return hicain_destroy_status(hicain_mcast(ibqp, HICAIN_CMD_DETACH_MCAST, gid, lid));
}

/* ---- the kinds of queue objects (hicain_queue_*) ---- */

static const struct hicain_queue_kind hicain_cq_kind = {
	.destroy_op = HICAIN_CMD_DESTROY_CQ,
	.release = hicain_cq_release_ring,
	.track = hicain_cq_track,
	.untrack = hicain_cq_untrack,
};

static const struct hicain_queue_kind hicain_qp_kind = {
	.destroy_op = HICAIN_CMD_DESTROY_QP,
	.release = hicain_qp_release_rings,
	.xa = offsetof(struct hicain_ibdev, qps),
};

static const struct hicain_queue_kind hicain_srq_kind = {
	.destroy_op = HICAIN_CMD_DESTROY_SRQ,
	.release = hicain_srq_release_ring,
	.xa = offsetof(struct hicain_ibdev, srqs),
};
