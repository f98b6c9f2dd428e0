// SPDX-License-Identifier: GPL-2.0
/*
 * hicain_ib - RDMA verbs driver of the HiNIC emulated RDMA NIC.
 *
 * The auxiliary driver of the RDMA devices of hicain_net (hicain_net.h,
 * "hicain_net.rdma.<n>"): for every bound HiNIC function it registers
 * an ib_device "hicain_%d" whose verbs are admin commands of
 * the device (hicain_abi.h, docs/device-abi.md). A RoCE port is RoCE v2
 * on the function's netdev: ib_core builds the GID table from the
 * netdev's addresses (ib_device_set_netdev), and the add_gid/del_gid
 * hooks hand the IPv4 addresses to the device, whose transport keeps a
 * GID table of its own (SET_ADDR). An InfiniBand port (the device
 * header's link layer) has no netdev: its LID, state and GID (subnet
 * prefix + port GUID) come from the device, whose SMA a subnet manager
 * configures; query_gid and query_pkey read the device's tables, and
 * the port's events (PORT_ACTIVE, PORT_ERR, LID_CHANGE) make ib_core
 * reread them. ib_mad opens QP0 there, so an SM such as OpenSM runs
 * on umad/issm.
 *
 * The work and completion queues live in guest memory that this driver
 * allocates. A kernel consumer's (ib_mad, IPoIB, the RDMA CM) are
 * coherent DMA memory, and post_send, post_recv, poll_cq and
 * req_notify_cq run here. A process's are whole pages that it maps
 * (rdma_user_mmap_entry, "mapped queues" below) and posts, polls and
 * arms itself, ringing the doorbell through a mapped page of BAR0, with
 * no system call; a queue too large to map, or a device or BAR layout
 * that does not allow it, stays on the uverbs write() commands. MRs are
 * user pages pinned with ib_umem whose DMA addresses the device gets as
 * a page list.
 *
 * The port's management agents live in the device: process_mad hands
 * the PerfMgt MADs that reach QP1 to the device's PMA (MAD_IFC, ABI
 * 1.15), and on an InfiniBand port the SMPs addressed to the port itself
 * to the device's SMA. ib_mad routes every other MAD to its agents.
 *
 * Unloading and removal: the driver has disassociate_ucontext, so
 * ib_unregister_device does not wait for the processes that hold a
 * /dev/infiniband/uverbsN file open: uverbs takes their contexts away
 * (hicain_disassociate_ucontext) and they see IB_EVENT_DEVICE_FATAL.
 * rmmod, an unbind and the removal of the PCI function (a new device
 * after its backend died: docs/device.md, "Backend restarts") all
 * complete under running verbs processes.
 */

#include <linux/auxiliary_bus.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <net/addrconf.h>
#include <rdma/ib_verbs.h>

#include "hicain_ib.h"

MODULE_DESCRIPTION("HiNIC emulated RDMA NIC: RDMA verbs driver");
MODULE_AUTHOR("PacketFive");
MODULE_LICENSE("GPL");

/* hicain_net's RDMA auxiliary devices, "hicain_net.rdma.<n>". */
static const struct auxiliary_device_id hicain_ib_id_table[] = {
	{ .name = "hicain_net." HICAIN_ADEV_RDMA },
	{ }
};
MODULE_DEVICE_TABLE(auxiliary, hicain_ib_id_table);

static const struct ib_device_ops hicain_ib_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,	/* libibverbs matches by name */
	.uverbs_abi_ver = HICAIN_UVERBS_ABI_VERSION,

	.add_gid = hicain_add_gid,
	.alloc_pd = hicain_alloc_pd,
	.alloc_xrcd = hicain_alloc_xrcd,
	.alloc_ucontext = hicain_alloc_ucontext,
	.attach_mcast = hicain_attach_mcast,
	.alloc_mw = hicain_alloc_mw,
	.create_ah = hicain_create_ah,
	.create_cq = hicain_create_cq,
	.create_flow = hicain_create_flow,
	.create_qp = hicain_create_qp,
	.create_rwq_ind_table = hicain_create_rwq_ind_table,
	.create_srq = hicain_create_srq,
	.create_user_ah = hicain_create_ah,
	.create_wq = hicain_create_wq,
	.dealloc_mw = hicain_dealloc_mw,
	.dealloc_pd = hicain_dealloc_pd,
	.dealloc_ucontext = hicain_dealloc_ucontext,
	.dealloc_xrcd = hicain_dealloc_xrcd,
	.del_gid = hicain_del_gid,
	.dereg_mr = hicain_dereg_mr,
	.destroy_ah = hicain_destroy_ah,
	.destroy_cq = hicain_destroy_cq,
	.destroy_flow = hicain_destroy_flow,
	.destroy_qp = hicain_destroy_qp,
	.destroy_rwq_ind_table = hicain_destroy_rwq_ind_table,
	.destroy_srq = hicain_destroy_srq,
	.destroy_wq = hicain_destroy_wq,
	.detach_mcast = hicain_detach_mcast,
	.disassociate_ucontext = hicain_disassociate_ucontext,
	.get_dma_mr = hicain_get_dma_mr,
	.get_link_layer = hicain_get_link_layer,
	.get_port_immutable = hicain_get_port_immutable,
	.mmap = hicain_mmap,
	.mmap_free = hicain_mmap_free,
	.modify_qp = hicain_modify_qp,
	.modify_srq = hicain_modify_srq,
	.modify_wq = hicain_modify_wq,
	.poll_cq = hicain_poll_cq,
	.post_recv = hicain_post_recv,
	.post_send = hicain_post_send,
	.post_srq_recv = hicain_post_srq_recv,
	.process_mad = hicain_process_mad,
	.query_ah = hicain_query_ah,
	.query_device = hicain_query_device,
	.query_pkey = hicain_query_pkey,
	.query_port = hicain_query_port,
	.query_qp = hicain_query_qp,
	.query_srq = hicain_query_srq,
	.query_ucontext = hicain_query_ucontext,
	.reg_user_mr = hicain_reg_user_mr,
	.req_notify_cq = hicain_req_notify_cq,
	.rereg_user_mr = hicain_rereg_user_mr,
	.resize_cq = hicain_resize_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, hicain_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, hicain_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_mw, hicain_mw, ibmw),
	INIT_RDMA_OBJ_SIZE(ib_pd, hicain_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, hicain_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_rwq_ind_table, hicain_rwq_ind_table, ibtbl),
	INIT_RDMA_OBJ_SIZE(ib_srq, hicain_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, hicain_ucontext, ibuc),
	INIT_RDMA_OBJ_SIZE(ib_xrcd, hicain_xrcd, ibxrcd),
};

/*
 * The ops of an InfiniBand port on top of hicain_ib_dev_ops: its GIDs
 * come from the device and its capability bits from its users. A RoCE
 * device goes without them, as ib_core expects (device-facts 3.10).
 */
static const struct ib_device_ops hicain_ib_port_ops = {
	.modify_port = hicain_modify_port,
	.query_gid = hicain_query_gid,
};

/* ---- probe stages ---- */

/*
 * hicain_ib_tables - an InfiniBand port's GID and P_Key table sizes, the
 * device's (QUERY_PORT), fixed for the life of the ib_device.
 */
static int hicain_ib_tables(struct hicain_ibdev *hidev)
{
	struct hicain_port_attr pa;
	int ret;

	ret = hicain_admin_query(hidev, HICAIN_CMD_QUERY_PORT, 1, &pa, sizeof(pa));
	if (ret)
		return ret;
	hidev->ib_gid_tbl_len = le32_to_cpu(pa.gid_tbl_len);
	hidev->ib_pkey_tbl_len = le32_to_cpu(pa.pkey_tbl_len);
	if (!hidev->ib_gid_tbl_len || !hidev->ib_pkey_tbl_len || hidev->ib_pkey_tbl_len > U16_MAX) {
		dev_err(&hidev->hdev->pdev->dev, "InfiniBand port with %u GIDs and %u P_Keys\n",
			hidev->ib_gid_tbl_len, hidev->ib_pkey_tbl_len);
		return -EIO;
	}
	return 0;
}

/*
 * Probe in stages, each undone by remove in reverse order:
 *   1. hicain_ib_init_dev: the ib_device's fields, locks and xarrays;
 *   2. hicain_ib_alloc_vec_cqs: the completion vectors' CQ xarrays;
 *   3. hicain_ib_setup_port: the port (InfiniBand: its tables; RoCE:
 *      its netdev and the device's addresses), undone by
 *      ib_dealloc_device, which drops the netdev;
 *   4. ib_register_device;
 *   5. hicain_set_rdma_ops: hicain_net's events, interrupts and resets.
 */

/* hicain_ib_init_dev - stage 1, which cannot fail. */
static void hicain_ib_init_dev(struct hicain_ibdev *hidev, struct hicain_dev *hdev)
{
	struct ib_device *ibdev = &hidev->ibdev;

	hicain_check_numbering();
	hidev->hdev = hdev;
	hidev->ib = hdev->ib_link;
	if (!hidev->ib)
		hidev->netdev = hdev->netdev;
	atomic_set(&hidev->epoch, 0);
	xa_init_flags(&hidev->qps, XA_FLAGS_LOCK_IRQ);
	xa_init_flags(&hidev->srqs, XA_FLAGS_LOCK_IRQ);
	xa_init_flags(&hidev->cqs, XA_FLAGS_LOCK_IRQ);
	mutex_init(&hidev->addr_lock);
	spin_lock_init(&hidev->gid_lock);
	spin_lock_init(&hidev->ah_free_lock);
	INIT_LIST_HEAD(&hidev->ah_free);
	INIT_WORK(&hidev->ah_free_work, hicain_ah_free_work);
	hidev->db_mappable = hicain_db_page(hdev->pdev);
	hidev->db_pfn = pci_resource_start(hdev->pdev, 0) >> PAGE_SHIFT;

	ibdev->node_type = RDMA_NODE_IB_CA;
	ibdev->phys_port_cnt = 1;
	ibdev->num_comp_vectors = max(hdev->num_comp_vectors, 1U);
	ibdev->dev.parent = &hdev->pdev->dev;
	ibdev->node_guid = cpu_to_be64(le64_to_cpu(READ_ONCE(hdev->hdr->node_guid)));
	if (!ibdev->node_guid && !hidev->ib)
		addrconf_addr_eui48((u8 *)&ibdev->node_guid, hidev->netdev->dev_addr);
	strscpy(ibdev->node_desc, "HiNIC hicain", sizeof(ibdev->node_desc));
	/* Post, poll and notify go through write() commands, which ib_core
	 * leaves out of the default mask (device-facts 3.6).
	 */
	ibdev->uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
				  BIT_ULL(IB_USER_VERBS_CMD_POST_RECV) |
				  BIT_ULL(IB_USER_VERBS_CMD_POLL_CQ) |
				  BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ) |
				  BIT_ULL(IB_USER_VERBS_CMD_POST_SRQ_RECV);
	ib_set_device_ops(ibdev, &hicain_ib_dev_ops);
	ibdev->driver_def = hicain_ib_uapi_defs;	/* importing */
	if (hidev->ib)
		ib_set_device_ops(ibdev, &hicain_ib_port_ops);
}

/*
 * hicain_ib_fini_dev - undoes stage 1 once no object is left: the
 * DESTROY_AH commands of AHs destroyed in atomic context go first, while
 * the device still takes commands.
 */
static void hicain_ib_fini_dev(struct hicain_ibdev *hidev)
{
	flush_work(&hidev->ah_free_work);
	xa_destroy(&hidev->cqs);
	xa_destroy(&hidev->srqs);
	xa_destroy(&hidev->qps);
	mutex_destroy(&hidev->addr_lock);
}

/* hicain_ib_alloc_vec_cqs - stage 2: an xarray of CQs per completion vector. */
static int hicain_ib_alloc_vec_cqs(struct hicain_ibdev *hidev)
{
	unsigned int i, n = hidev->ibdev.num_comp_vectors;

	hidev->vec_cqs = kcalloc(n, sizeof(*hidev->vec_cqs), GFP_KERNEL);
	if (!hidev->vec_cqs)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		xa_init_flags(&hidev->vec_cqs[i], XA_FLAGS_LOCK_IRQ);
	return 0;
}

static void hicain_ib_free_vec_cqs(struct hicain_ibdev *hidev)
{
	unsigned int i;

	for (i = 0; i < hidev->ibdev.num_comp_vectors; i++)
		xa_destroy(&hidev->vec_cqs[i]);
	kfree(hidev->vec_cqs);
	hidev->vec_cqs = NULL;
}

/*
 * hicain_ib_setup_port - stage 3: an InfiniBand port's table sizes, or a
 * RoCE port's netdev, whose addresses the device gets now: registration
 * opens QP1 (ib_mad takes a PD, a CQ and the DMA MR), after which an
 * older device refuses SET_ADDR.
 */
static int hicain_ib_setup_port(struct hicain_ibdev *hidev)
{
	int ret;

	if (hidev->ib)
		return hicain_ib_tables(hidev);
	ret = ib_device_set_netdev(&hidev->ibdev, hidev->netdev, 1);
	if (ret)
		return ret;
	hicain_sync_addrs(hidev);
	return 0;
}

static void hicain_ib_announce(struct hicain_ibdev *hidev)
{
	struct device *dev = &hidev->hdev->pdev->dev;
	const char *name = dev_name(&hidev->ibdev.dev);

	if (hidev->ib)
		dev_info(dev, "registered %s, InfiniBand port\n", name);
	else
		dev_info(dev, "registered %s on %s\n", name, hidev->netdev->name);
	if (!hidev->db_mappable)
		dev_info(dev, "BAR0 shares its page: user queues use system calls\n");
	else if (!hicain_abi_minor_at_least(hidev, 7))
		dev_info(dev, "device ABI before 1.7: user queues use system calls\n");
}

static void hicain_ib_port_event(struct hicain_ibdev *hidev, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = &hidev->ibdev,
		.event = type,
		.element.port_num = 1,
	};

	ib_dispatch_event(&ev);	/* queues work: fine in hard IRQ context */
}

/* hicain_ib_event_xa - the xarray of the objects of an event type. */
static struct xarray *hicain_ib_event_xa(struct hicain_ibdev *hidev, enum ib_event_type type)
{
	switch (type) {
	case IB_EVENT_CQ_ERR:
		return &hidev->cqs;
	case IB_EVENT_SRQ_ERR:
	case IB_EVENT_SRQ_LIMIT_REACHED:
		return &hidev->srqs;
	default:
		return &hidev->qps;
	}
}

/* hicain_ib_deliver - ev to the handler of obj, a CQ, SRQ or QP by ev's type. */
static void hicain_ib_deliver(struct ib_event *ev, void *obj)
{
	struct hicain_srq *srq = obj;
	struct hicain_cq *cq = obj;
	struct hicain_qp *qp = obj;

	switch (ev->event) {
	case IB_EVENT_CQ_ERR:
		ev->element.cq = &cq->ibcq;
		if (cq->ibcq.event_handler)
			cq->ibcq.event_handler(ev, cq->ibcq.cq_context);
		break;
	case IB_EVENT_SRQ_ERR:
	case IB_EVENT_SRQ_LIMIT_REACHED:
		ev->element.srq = &srq->ibsrq;
		if (srq->ibsrq.event_handler)
			srq->ibsrq.event_handler(ev, srq->ibsrq.srq_context);
		break;
	default:
		ev->element.qp = &qp->ibqp;
		if (qp->ibqp.event_handler)
			qp->ibqp.event_handler(ev, qp->ibqp.qp_context);
	}
}

/*
 * hicain_ib_obj_event - an asynchronous event of the CQ, SRQ or QP
 * handle, in hard IRQ context. The handler runs under the xarray lock,
 * so destroy (which erases the object under that lock first) never
 * frees an object a handler still uses. uverbs' handler only queues the
 * event for the process.
 */
static void hicain_ib_obj_event(struct hicain_ibdev *hidev, u32 handle, enum ib_event_type type)
{
	struct xarray *xa = hicain_ib_event_xa(hidev, type);
	struct ib_event ev = { .device = &hidev->ibdev, .event = type };
	void *obj;

	xa_lock(xa);
	obj = xa_load(xa, handle);
	if (obj)
		hicain_ib_deliver(&ev, obj);
	xa_unlock(xa);
}

/* Where hicain_ib_event delivers a device event: nowhere (not ours). */
enum hicain_ib_ev_to {
	HICAIN_IB_EV_NONE,
	HICAIN_IB_EV_PORT,	/* to the port */
	HICAIN_IB_EV_OBJ,	/* to the QP, CQ or SRQ of the EQE's handle */
};

/*
 * hicain_ib_events - the ib_core event of each device event the RDMA
 * side reports. Device events not listed (DEVICE_FATAL is the reset
 * path's) are not ours.
 */
static const struct {
	enum hicain_ib_ev_to to;
	enum ib_event_type type;
} hicain_ib_events[] = {
	[HICAIN_EV_PORT_ACTIVE] = { HICAIN_IB_EV_PORT, IB_EVENT_PORT_ACTIVE },
	[HICAIN_EV_PORT_ERR] = { HICAIN_IB_EV_PORT, IB_EVENT_PORT_ERR },
	[HICAIN_EV_LID_CHANGE] = { HICAIN_IB_EV_PORT, IB_EVENT_LID_CHANGE },
	[HICAIN_EV_SM_CHANGE] = { HICAIN_IB_EV_PORT, IB_EVENT_SM_CHANGE },
	[HICAIN_EV_CLIENT_REREGISTER] = { HICAIN_IB_EV_PORT, IB_EVENT_CLIENT_REREGISTER },
	[HICAIN_EV_QP_FATAL] = { HICAIN_IB_EV_OBJ, IB_EVENT_QP_FATAL },
	[HICAIN_EV_CQ_ERR] = { HICAIN_IB_EV_OBJ, IB_EVENT_CQ_ERR },
	[HICAIN_EV_QP_LAST_WQE] = { HICAIN_IB_EV_OBJ, IB_EVENT_QP_LAST_WQE_REACHED },
	[HICAIN_EV_SRQ_LIMIT] = { HICAIN_IB_EV_OBJ, IB_EVENT_SRQ_LIMIT_REACHED },
	[HICAIN_EV_SRQ_ERR] = { HICAIN_IB_EV_OBJ, IB_EVENT_SRQ_ERR },
};

static void hicain_ib_event(struct hicain_dev *hdev, const struct hicain_eqe *eqe)
{
	struct hicain_ibdev *hidev = hdev->rdma_priv;
	u32 ev = le32_to_cpu(eqe->type);

	if (ev >= ARRAY_SIZE(hicain_ib_events))
		return;
	switch (hicain_ib_events[ev].to) {
	case HICAIN_IB_EV_PORT:
		hicain_ib_port_event(hidev, hicain_ib_events[ev].type);
		break;
	case HICAIN_IB_EV_OBJ:
		hicain_ib_obj_event(hidev, le32_to_cpu(eqe->handle), hicain_ib_events[ev].type);
		break;
	case HICAIN_IB_EV_NONE:
		break;
	}
}

/*
 * hicain_ib_cq_fired - whether the device signalled cq. It cleared the
 * arm word of each CQ it signalled: a CQ that req_notify_cq armed and
 * whose word is clear fired, and so did a mapped CQ whose event count
 * moved.
 */
static bool hicain_ib_cq_fired(struct hicain_cq *cq)
{
	u32 ev;

	if (cq->uq.entry) {
		/* Armed by its process, without the kernel: the device's
		 * event count says whether it fired.
		 */
		ev = le32_to_cpu(READ_ONCE(cq->dbrec->events));
		if (ev == cq->events_seen)
			return false;
		cq->events_seen = ev;
		return true;
	}
	if (!READ_ONCE(cq->armed) || READ_ONCE(cq->dbrec->arm))
		return false;
	WRITE_ONCE(cq->armed, false);
	return true;
}

/*
 * hicain_ib_cq_irq - completion interrupt of comp_vector, in hard IRQ
 * context: the CQs of the vector (vec_cqs) that fired get their
 * completion event. The handlers run under the vector's xarray lock, so
 * destroy_cq (which erases the CQ under that lock first) never frees a
 * CQ a handler still uses.
 */
static void hicain_ib_cq_irq(struct hicain_dev *hdev, unsigned int comp_vector)
{
	struct hicain_ibdev *hidev = hdev->rdma_priv;
	struct hicain_cq *cq;
	struct xarray *cqs;
	unsigned long cqn;

	if (comp_vector >= hidev->ibdev.num_comp_vectors)
		return;
	cqs = &hidev->vec_cqs[comp_vector];
	xa_lock(cqs);
	xa_for_each(cqs, cqn, cq) {
		if (hicain_ib_cq_fired(cq) && cq->ibcq.comp_handler)
			cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
	}
	xa_unlock(cqs);
}

static void hicain_ib_reset(struct hicain_dev *hdev, bool done)
{
	struct hicain_ibdev *hidev = hdev->rdma_priv;
	struct ib_event ev = { .device = &hidev->ibdev };

	if (done) {
		/* The device came back with its configured addresses. */
		if (hidev->ib) {
			/* The port starts over in Init: an SM configures it
			 * again, and ib_core rereads it meanwhile. The
			 * device forgot the host's capability bits.
			 */
			mutex_lock(&hidev->addr_lock);
			if (hidev->cap_set)
				hicain_push_port_caps(hidev, hidev->cap_set);
			mutex_unlock(&hidev->addr_lock);
			hicain_ib_port_event(hidev, IB_EVENT_PORT_ERR);
			return;
		}
		mutex_lock(&hidev->addr_lock);
		memset(&hidev->addrs, 0, sizeof(hidev->addrs));
		mutex_unlock(&hidev->addr_lock);
		hicain_sync_addrs(hidev);
		return;
	}
	/* Every handle of the device is about to be lost. */
	atomic_inc(&hidev->epoch);
	ev.event = IB_EVENT_DEVICE_FATAL;
	ib_dispatch_event(&ev);
}

static const struct hicain_rdma_ops hicain_ib_rdma_ops = {
	.event = hicain_ib_event,
	.cq_irq = hicain_ib_cq_irq,
	.reset = hicain_ib_reset,
};

/* ---- auxiliary driver ---- */

static int hicain_ib_probe(struct auxiliary_device *adev, const struct auxiliary_device_id *id)
{
	struct hicain_dev *hdev = hicain_adev_hdev(adev);
	struct hicain_ibdev *hidev;
	int ret;

	hidev = ib_alloc_device(hicain_ibdev, ibdev);
	if (!hidev)
		return -ENOMEM;
	hicain_ib_init_dev(hidev, hdev);
	ret = hicain_ib_alloc_vec_cqs(hidev);
	if (ret)
		goto err_fini_dev;
	ret = hicain_ib_setup_port(hidev);
	if (ret)
		goto err_free_vec_cqs;
	ret = ib_register_device(&hidev->ibdev, "hicain_%d", &hdev->pdev->dev);
	if (ret)
		goto err_free_vec_cqs;
	auxiliary_set_drvdata(adev, hidev);
	hicain_set_rdma_ops(hdev, &hicain_ib_rdma_ops, hidev);
	hicain_ib_announce(hidev);
	return 0;

err_free_vec_cqs:
	hicain_ib_free_vec_cqs(hidev);
err_fini_dev:
	hicain_ib_fini_dev(hidev);
	ib_dealloc_device(&hidev->ibdev);
	return ret;
}

/* hicain_ib_remove - hicain_ib_probe's stages undone in reverse order. */
static void hicain_ib_remove(struct auxiliary_device *adev)
{
	struct hicain_ibdev *hidev = auxiliary_get_drvdata(adev);

	hicain_clear_rdma_ops(hidev->hdev);
	/* Before the netdev goes: the port holds a reference to it. */
	ib_unregister_device(&hidev->ibdev);
	hicain_ib_free_vec_cqs(hidev);
	hicain_ib_fini_dev(hidev);
	ib_dealloc_device(&hidev->ibdev);
}

/* Unnamed: the driver is "hicain_ib" on the auxiliary bus. */
static struct auxiliary_driver hicain_ib_driver = {
	.probe = hicain_ib_probe,
	.remove = hicain_ib_remove,
	.id_table = hicain_ib_id_table,
};
module_auxiliary_driver(hicain_ib_driver);
