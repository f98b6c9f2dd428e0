// SPDX-License-Identifier: GPL-2.0
/*
 * hicain_ib - RDMA verbs driver of the HiNIC emulated RDMA NIC.
 *
 * A client of hicain_net (hicain_net.h): for every bound HiNIC function
 * it registers an ib_device "hicain_%d" whose verbs are admin commands of
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
 * The port's performance management agent is process_mad: it answers
 * the PerfMgt MADs that reach QP1 from the device's counters
 * (QUERY_COUNTERS). On an InfiniBand port process_mad also hands the
 * SMPs addressed to the port itself (MAD_IFC) to the device's SMA.
 * ib_mad routes every other MAD to its agents.
 *
 * Unloading: uverbs pins this module for as long as a process holds a
 * /dev/infiniband/uverbsN file open (the driver has no
 * disassociate_ucontext), so rmmod fails with EBUSY until the last user
 * closed it. Unbinding the PCI function instead waits in
 * ib_unregister_device until the users closed their files.
 */

#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/pci.h>
#include <net/addrconf.h>
#include <rdma/ib_verbs.h>

#include "hicain_ib.h"

static const struct ib_device_ops hicain_ib_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,	/* libibverbs matches by name */
	.uverbs_abi_ver = HICAIN_UVERBS_ABI_VERSION,

	.add_gid = hicain_add_gid,
	.alloc_pd = hicain_alloc_pd,
	.alloc_ucontext = hicain_alloc_ucontext,
	.attach_mcast = hicain_attach_mcast,
	.alloc_mw = hicain_alloc_mw,
	.create_ah = hicain_create_ah,
	.create_cq = hicain_create_cq,
	.create_qp = hicain_create_qp,
	.create_srq = hicain_create_srq,
	.create_user_ah = hicain_create_ah,
	.dealloc_mw = hicain_dealloc_mw,
	.dealloc_pd = hicain_dealloc_pd,
	.dealloc_ucontext = hicain_dealloc_ucontext,
	.del_gid = hicain_del_gid,
	.dereg_mr = hicain_dereg_mr,
	.destroy_ah = hicain_destroy_ah,
	.destroy_cq = hicain_destroy_cq,
	.destroy_qp = hicain_destroy_qp,
	.destroy_srq = hicain_destroy_srq,
	.detach_mcast = hicain_detach_mcast,
	.get_dma_mr = hicain_get_dma_mr,
	.get_link_layer = hicain_get_link_layer,
	.get_port_immutable = hicain_get_port_immutable,
	.mmap = hicain_mmap,
	.mmap_free = hicain_mmap_free,
	.modify_qp = hicain_modify_qp,
	.modify_srq = hicain_modify_srq,
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
	.reg_user_mr = hicain_reg_user_mr,
	.req_notify_cq = hicain_req_notify_cq,
	.rereg_user_mr = hicain_rereg_user_mr,
	.resize_cq = hicain_resize_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, hicain_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, hicain_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_mw, hicain_mw, ibmw),
	INIT_RDMA_OBJ_SIZE(ib_pd, hicain_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, hicain_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_srq, hicain_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, hicain_ucontext, ibuc),
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

/* ---- hicain_net client ---- */

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

static int hicain_ib_add(struct hicain_dev *hdev)
{
	struct net_device *ndev = hdev->netdev;
	struct hicain_ibdev *hidev;
	struct ib_device *ibdev;
	int ret;

	hidev = ib_alloc_device(hicain_ibdev, ibdev);
	if (!hidev)
		return -ENOMEM;
	hidev->hdev = hdev;
	hidev->ib = hdev->ib_link;
	if (!hidev->ib)
		hidev->netdev = ndev;
	atomic_set(&hidev->epoch, 0);
	xa_init_flags(&hidev->qps, XA_FLAGS_LOCK_IRQ);
	xa_init_flags(&hidev->srqs, XA_FLAGS_LOCK_IRQ);
	spin_lock_init(&hidev->cq_lock);
	INIT_LIST_HEAD(&hidev->cqs);
	mutex_init(&hidev->addr_lock);
	spin_lock_init(&hidev->gid_lock);
	spin_lock_init(&hidev->ah_free_lock);
	INIT_LIST_HEAD(&hidev->ah_free);
	INIT_WORK(&hidev->ah_free_work, hicain_ah_free_work);
	mutex_init(&hidev->pma_lock);
	hidev->db_mappable = hicain_db_page(hdev->pdev);
	hidev->db_pfn = pci_resource_start(hdev->pdev, 0) >> PAGE_SHIFT;
	ibdev = &hidev->ibdev;

	ibdev->node_type = RDMA_NODE_IB_CA;
	ibdev->phys_port_cnt = 1;
	ibdev->num_comp_vectors = max(hdev->num_comp_vectors, 1U);
	ibdev->dev.parent = &hdev->pdev->dev;
	ibdev->node_guid = cpu_to_be64(le64_to_cpu(READ_ONCE(hdev->hdr->node_guid)));
	if (!ibdev->node_guid && !hidev->ib)
		addrconf_addr_eui48((u8 *)&ibdev->node_guid, ndev->dev_addr);
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

	if (hidev->ib) {
		ib_set_device_ops(ibdev, &hicain_ib_port_ops);
		ret = hicain_ib_tables(hidev);
		if (ret)
			goto err_dealloc;
	} else {
		ret = ib_device_set_netdev(ibdev, ndev, 1);
		if (ret)
			goto err_dealloc;
		/* Registration opens QP1 (ib_mad takes a PD, a CQ and the
		 * DMA MR), after which an older device refuses SET_ADDR: the
		 * addresses the netdev already has go first.
		 */
		hicain_sync_addrs(hidev);
	}
	ret = ib_register_device(ibdev, "hicain_%d", &hdev->pdev->dev);
	if (ret)
		goto err_dealloc;
	hdev->client_priv = hidev;
	if (hidev->ib)
		dev_info(&hdev->pdev->dev, "registered %s, InfiniBand port\n", dev_name(&ibdev->dev));
	else
		dev_info(&hdev->pdev->dev, "registered %s on %s\n", dev_name(&ibdev->dev), ndev->name);
	if (!hidev->db_mappable)
		dev_info(&hdev->pdev->dev, "BAR0 shares its page: user queues use system calls\n");
	else if (!hicain_abi_minor_at_least(hidev, 7))
		dev_info(&hdev->pdev->dev, "device ABI before 1.7: user queues use system calls\n");
	return 0;

err_dealloc:
	ib_dealloc_device(ibdev);
	return ret;
}

static void hicain_ib_remove(struct hicain_dev *hdev)
{
	struct hicain_ibdev *hidev = hdev->client_priv;

	if (!hidev)
		return;
	/* Before the netdev goes: the port holds a reference to it. */
	ib_unregister_device(&hidev->ibdev);
	/* The DESTROY_AH commands of AHs destroyed in atomic context,
	 * while the device still takes commands.
	 */
	flush_work(&hidev->ah_free_work);
	xa_destroy(&hidev->qps);
	xa_destroy(&hidev->srqs);
	ib_dealloc_device(&hidev->ibdev);
	hdev->client_priv = NULL;
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

/*
 * hicain_ib_qp_event - an asynchronous QP event, in hard IRQ context.
 * The handler runs under the xarray lock, so destroy_qp (which erases
 * the QP under that lock first) never frees a QP a handler still uses.
 * uverbs' handler only queues the event for the process.
 */
static void hicain_ib_qp_event(struct hicain_ibdev *hidev, u32 qpn, enum ib_event_type type)
{
	struct hicain_qp *qp;
	struct ib_event ev;

	xa_lock(&hidev->qps);
	qp = xa_load(&hidev->qps, qpn);
	if (qp && qp->ibqp.event_handler) {
		ev.device = &hidev->ibdev;
		ev.event = type;
		ev.element.qp = &qp->ibqp;
		qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
	}
	xa_unlock(&hidev->qps);
}

/* hicain_ib_srq_event - as hicain_ib_qp_event, for an SRQ. */
static void hicain_ib_srq_event(struct hicain_ibdev *hidev, u32 srqn, enum ib_event_type type)
{
	struct hicain_srq *srq;
	struct ib_event ev;

	xa_lock(&hidev->srqs);
	srq = xa_load(&hidev->srqs, srqn);
	if (srq && srq->ibsrq.event_handler) {
		ev.device = &hidev->ibdev;
		ev.event = type;
		ev.element.srq = &srq->ibsrq;
		srq->ibsrq.event_handler(&ev, srq->ibsrq.srq_context);
	}
	xa_unlock(&hidev->srqs);
}

/* hicain_ib_cq_event - as hicain_ib_qp_event, under the CQ list lock. */
static void hicain_ib_cq_event(struct hicain_ibdev *hidev, u32 cqn, enum ib_event_type type)
{
	struct hicain_cq *cq;
	struct ib_event ev;

	spin_lock(&hidev->cq_lock);
	list_for_each_entry(cq, &hidev->cqs, list) {
		if (cq->cqn != cqn || !cq->ibcq.event_handler)
			continue;
		ev.device = &hidev->ibdev;
		ev.event = type;
		ev.element.cq = &cq->ibcq;
		cq->ibcq.event_handler(&ev, cq->ibcq.cq_context);
		break;
	}
	spin_unlock(&hidev->cq_lock);
}

static void hicain_ib_event(struct hicain_dev *hdev, const struct hicain_eqe *eqe)
{
	struct hicain_ibdev *hidev = hdev->client_priv;
	u32 handle = le32_to_cpu(eqe->handle);

	switch (le32_to_cpu(eqe->type)) {
	case HICAIN_EV_PORT_ACTIVE:
		hicain_ib_port_event(hidev, IB_EVENT_PORT_ACTIVE);
		break;
	case HICAIN_EV_PORT_ERR:
		hicain_ib_port_event(hidev, IB_EVENT_PORT_ERR);
		break;
	case HICAIN_EV_LID_CHANGE:
		hicain_ib_port_event(hidev, IB_EVENT_LID_CHANGE);
		break;
	case HICAIN_EV_SM_CHANGE:
		hicain_ib_port_event(hidev, IB_EVENT_SM_CHANGE);
		break;
	case HICAIN_EV_CLIENT_REREGISTER:
		hicain_ib_port_event(hidev, IB_EVENT_CLIENT_REREGISTER);
		break;
	case HICAIN_EV_QP_FATAL:
		hicain_ib_qp_event(hidev, handle, IB_EVENT_QP_FATAL);
		break;
	case HICAIN_EV_CQ_ERR:
		hicain_ib_cq_event(hidev, handle, IB_EVENT_CQ_ERR);
		break;
	case HICAIN_EV_QP_LAST_WQE:
		hicain_ib_qp_event(hidev, handle, IB_EVENT_QP_LAST_WQE_REACHED);
		break;
	case HICAIN_EV_SRQ_LIMIT:
		hicain_ib_srq_event(hidev, handle, IB_EVENT_SRQ_LIMIT_REACHED);
		break;
	case HICAIN_EV_SRQ_ERR:
		hicain_ib_srq_event(hidev, handle, IB_EVENT_SRQ_ERR);
		break;
	}
}

/*
 * hicain_ib_cq_irq - completion interrupt of comp_vector, in hard IRQ
 * context. The device cleared the arm word of each CQ it signalled; a
 * CQ that req_notify_cq armed and whose word is clear gets its event,
 * and so does a mapped CQ whose event count moved.
 */
static void hicain_ib_cq_irq(struct hicain_dev *hdev, unsigned int comp_vector)
{
	struct hicain_ibdev *hidev = hdev->client_priv;
	struct hicain_cq *cq;

	spin_lock(&hidev->cq_lock);
	list_for_each_entry(cq, &hidev->cqs, list) {
		if (cq->vector != comp_vector)
			continue;
		if (cq->uq.entry) {
			/* Armed by its process, without the kernel: the
			 * device's event count says whether it fired.
			 */
			u32 ev = le32_to_cpu(READ_ONCE(cq->dbrec->events));

			if (ev == cq->events_seen)
				continue;
			cq->events_seen = ev;
			if (cq->ibcq.comp_handler)
				cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
			continue;
		}
		if (!READ_ONCE(cq->armed) || READ_ONCE(cq->dbrec->arm))
			continue;
		WRITE_ONCE(cq->armed, false);
		if (cq->ibcq.comp_handler)
			cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
	}
	spin_unlock(&hidev->cq_lock);
}

static void hicain_ib_reset(struct hicain_dev *hdev, bool done)
{
	struct hicain_ibdev *hidev = hdev->client_priv;
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

static struct hicain_client hicain_ib_client = {
	.name = DRV_NAME,
	.add = hicain_ib_add,
	.remove = hicain_ib_remove,
	.event = hicain_ib_event,
	.cq_irq = hicain_ib_cq_irq,
	.reset = hicain_ib_reset,
};

static int __init hicain_ib_init(void)
{
	return hicain_register_client(&hicain_ib_client);
}

static void __exit hicain_ib_exit(void)
{
	hicain_unregister_client(&hicain_ib_client);
}

module_init(hicain_ib_init);
module_exit(hicain_ib_exit);

MODULE_DESCRIPTION("HiNIC emulated RDMA NIC: RDMA verbs driver");
MODULE_AUTHOR("PacketFive");
MODULE_LICENSE("GPL");
