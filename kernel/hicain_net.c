// SPDX-License-Identifier: GPL-2.0
/*
 * hicain_net - Ethernet driver of the HiNIC emulated RDMA NIC.
 *
 * The NIC is QEMU's ivshmem-doorbell function served by `hinic device
 * serve`: BAR2 is shared memory holding the device header, the admin and
 * event queues and the L2 rings (hicain_abi.h, docs/device-abi.md), BAR0
 * has the doorbell register, and the device interrupts through MSI-X.
 * Frame buffers live in guest RAM, which the backend reads and writes at
 * their guest-physical (DMA) addresses.
 *
 * This module binds the function, does the driver-ready handshake,
 * registers an Ethernet netdev on the L2 rings, exports the admin queue
 * (hicain_net.h) and creates the auxiliary device that hicain_ib binds,
 * which gets the function's events and interrupts.
 */

#include <linux/auxiliary_bus.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/etherdevice.h>
#include <linux/if_vlan.h>
#include <linux/interrupt.h>
#include <linux/idr.h>
#include <linux/io.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/pci.h>
#include <linux/rcupdate.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/u64_stats_sync.h>
#include <linux/workqueue.h>

#include "hicain_net.h"
#include "hidev_ivshmem.h"

#define DRV_NAME "hicain_net"

#define HICAIN_TX_MASK		(HICAIN_L2_TX_ENTRIES - 1)
#define HICAIN_RX_MASK		(HICAIN_L2_RX_ENTRIES - 1)
#define HICAIN_TX_WAKE		(HICAIN_L2_TX_ENTRIES / 4)
#define HICAIN_MAX_VECTORS	64

/* Under TCG the backend answers in microseconds to milliseconds; a slow
 * host must still not fail the probe.
 */
#define HICAIN_HANDSHAKE_MS	5000
#define HICAIN_ADMIN_MS		10000
#define HICAIN_TX_DRAIN_MS	1000
/* How often the watchdog reads the heartbeat: a few times per dead limit. */
#define HICAIN_WATCHDOG_MS	500

/*
 * An admin command's completion usually lands within the backend's
 * doorbell wake-up. Polling the completion ring that long before sleeping
 * saves the MSI-X delivery and the waiter's wake-up, which under TCG are
 * most of a command's time (query_port: 294 us sleeping on the interrupt).
 * The poll is bounded; 0 turns it off.
 */
static unsigned int admin_poll_us = 200;
module_param(admin_poll_us, uint, 0644);
MODULE_PARM_DESC(admin_poll_us,
		 "microseconds an admin command polls for its completion before it sleeps on the interrupt (0: never polls; at most 10000)");

struct hicain_tx_buf {
	struct sk_buff *skb;
	dma_addr_t dma;
	unsigned int len;
};

struct hicain_rx_buf {
	struct sk_buff *skb;
	dma_addr_t dma;
};

struct hicain_stats {
	struct u64_stats_sync syncp;
	u64_stats_t packets;
	u64_stats_t bytes;
	u64_stats_t errors;
	u64_stats_t dropped;
};

/* dev_id of a CQ vector's handler. */
struct hicain_cq_vec {
	struct hicain_dev *hdev;
	unsigned int comp_vector;
};

struct hicain_priv {
	struct hicain_dev hdev;
	struct net_device *ndev;
	struct napi_struct napi;
	struct work_struct reset_work;
	struct delayed_work watchdog;	/* hicain_watchdog, while up */
	u32 hb_last;			/* watchdog: heartbeat last read */
	unsigned long hb_changed;	/* watchdog: jiffies it last moved */

	struct hicain_l2_desc *tx_ring;	/* BAR2 */
	struct hicain_l2_desc *rx_ring;	/* BAR2 */
	struct hicain_tx_buf tx[HICAIN_L2_TX_ENTRIES];
	struct hicain_rx_buf rx[HICAIN_L2_RX_ENTRIES];
	u32 tx_prod;		/* xmit path */
	u32 tx_clean;		/* NAPI; read by xmit for room */
	u32 rx_prod;		/* NAPI */
	u32 rx_clean;		/* NAPI */
	unsigned int rx_buf_len;
	bool rx_ready;		/* every RX slot holds a mapped buffer */
	bool rx_kept;		/* the device did not reset: never free RX */

	struct hicain_stats rx_stats;	/* NAPI */
	struct hicain_stats tx_stats;	/* NAPI completions */
	struct hicain_stats xmit_stats;	/* xmit path drops */

	struct hicain_cq_vec cq_vecs[HICAIN_MAX_VECTORS];
	char irq_names[HICAIN_MAX_VECTORS][24];
};

static DEFINE_IDA(hicain_adev_ida);	/* the ids of the auxiliary devices */

static inline struct hicain_priv *hdev_priv(struct hicain_dev *hdev)
{
	return container_of(hdev, struct hicain_priv, hdev);
}

static inline u32 hdr_load(const __le32 *p)
{
	return le32_to_cpu(READ_ONCE(*p));
}

static inline void hdr_store(__le32 *p, u32 v)
{
	WRITE_ONCE(*p, cpu_to_le32(v));
}

static u32 hicain_dev_status(struct hicain_dev *hdev)
{
	return hdr_load(&hdev->hdr->dev_status);
}

void hicain_ring_doorbell(struct hicain_dev *hdev, unsigned int db)
{
	hinic_ivshmem_doorbell(hdev->bar0, db);
}
EXPORT_SYMBOL_GPL(hicain_ring_doorbell);

/* ---- handshake and reset ---- */

static const struct hinic_ivshmem_id hicain_id =
	HINIC_IVSHMEM_ID("HiNIC", HICAIN, hicain_dev_hdr);

/*
 * hicain_hw_start - the driver-ready handshake (device-abi.md, step 2).
 * MSI-X must be enabled and the handlers installed: the device raises
 * vector 0 as soon as it goes live.
 */
static int hicain_hw_start(struct hicain_dev *hdev)
{
	return hinic_ivshmem_start(hdev->pdev, &hicain_id, hdev->bar2, hdev->bar0);
}

/*
 * hicain_hw_reset - ask the device to forget everything of this guest
 * (device-abi.md, step 4); the queue indices start again at 0.
 * driver_status is cleared by the device: it raises no interrupt until
 * the next hicain_hw_start.
 */
static int hicain_hw_reset(struct hicain_dev *hdev)
{
	unsigned long flags;
	int ret;

	ret = hinic_ivshmem_reset(hdev->pdev, &hicain_id, hdev->bar2, hdev->bar0, &hdev->dead,
				  &hdev->reset_count);
	if (ret)
		return ret;
	hdev->admin_sq_prod = 0;
	hdev->admin_cq_cons = 0;
	spin_lock_irqsave(&hdev->eq_lock, flags);
	hdev->eq_cons = 0;
	spin_unlock_irqrestore(&hdev->eq_lock, flags);
	return 0;
}

/* ---- admin queue ---- */

static bool hicain_admin_ready(struct hicain_dev *hdev)
{
	u32 st = hicain_dev_status(hdev);

	return (st & HICAIN_DEV_FATAL) || hicain_dev_dead(hdev) ||
	       hdr_load(&hdev->hdr->admin_cq_prod) != hdev->admin_cq_cons;
}

/* Poll the admin completion ring for up to admin_poll_us. */
static void hicain_admin_poll(struct hicain_dev *hdev)
{
	ktime_t end = ktime_add_us(ktime_get(), min(READ_ONCE(admin_poll_us), 10000U));

	while (!hicain_admin_ready(hdev) && ktime_before(ktime_get(), end))
		cpu_relax();
}

int hicain_admin_exec(struct hicain_dev *hdev, struct hicain_admin_cmd *cmd,
		      struct hicain_admin_cqe *cqe)
{
	struct hicain_dev_hdr *h = hdev->hdr;
	struct hicain_admin_cmd *sq = hdev->bar2 + HICAIN_ADMIN_SQ_OFF;
	struct hicain_admin_cqe *cq = hdev->bar2 + HICAIN_ADMIN_CQ_OFF;
	struct hicain_admin_cqe c;
	unsigned long deadline;
	u32 id, st;
	int ret;

	might_sleep();
	mutex_lock(&hdev->admin_lock);
	if (hicain_dev_dead(hdev)) {
		ret = -ENODEV;
		goto out;
	}
	st = hicain_dev_status(hdev);
	if (!(st & HICAIN_DEV_LIVE) || (st & HICAIN_DEV_FATAL)) {
		ret = -EIO;
		goto out;
	}
	/* Commands that timed out may still sit in the ring. */
	if (hdev->admin_sq_prod - hdr_load(&h->admin_sq_cons) >= HICAIN_ADMIN_SQ_ENTRIES) {
		ret = -EBUSY;
		goto out;
	}
	id = ++hdev->admin_seq;
	cmd->cmd_id = cpu_to_le32(id);
	memcpy(&sq[hdev->admin_sq_prod & (HICAIN_ADMIN_SQ_ENTRIES - 1)], cmd,
	       sizeof(*cmd));
	hdev->admin_sq_prod++;
	dma_wmb();
	hdr_store(&h->admin_sq_prod, hdev->admin_sq_prod);
	hicain_ring_doorbell(hdev, HICAIN_DB_CTRL);

	deadline = jiffies + msecs_to_jiffies(HICAIN_ADMIN_MS);
	hicain_admin_poll(hdev);
	for (;;) {
		/* The interrupt wakes us; the timeout covers a lost one. */
		wait_event_timeout(hdev->admin_wq, hicain_admin_ready(hdev),
				   msecs_to_jiffies(10));
		if (hicain_dev_dead(hdev)) {
			ret = -ENODEV;
			goto out;
		}
		if (hicain_dev_status(hdev) & HICAIN_DEV_FATAL) {
			ret = -EIO;
			goto out;
		}
		if (hdr_load(&h->admin_cq_prod) != hdev->admin_cq_cons) {
			dma_rmb();
			memcpy(&c, &cq[hdev->admin_cq_cons & (HICAIN_ADMIN_CQ_ENTRIES - 1)],
			       sizeof(c));
			hdev->admin_cq_cons++;
			hdr_store(&h->admin_cq_cons, hdev->admin_cq_cons);
			/* A completion of an earlier command that timed out. */
			if (le32_to_cpu(c.cmd_id) != id)
				continue;
			break;
		}
		if (time_after(jiffies, deadline)) {
			dev_err(&hdev->pdev->dev, "admin command %u (opcode %u) timed out\n",
				id, le16_to_cpu(cmd->opcode));
			ret = -ETIMEDOUT;
			goto out;
		}
	}
	if (cqe)
		*cqe = c;
	ret = -(int)le16_to_cpu(c.status);
out:
	mutex_unlock(&hdev->admin_lock);
	return ret;
}
EXPORT_SYMBOL_GPL(hicain_admin_exec);

void hicain_admin_keep(struct hicain_dev *hdev, size_t bytes)
{
	s64 total = atomic64_add_return(bytes, &hdev->admin_kept);

	dev_warn_ratelimited(&hdev->pdev->dev,
			     "keeping %zu bytes of DMA memory the device may still use (%lld in all)\n",
			     bytes, total);
}
EXPORT_SYMBOL_GPL(hicain_admin_keep);

/* hicain_query_port - QUERY_PORT into a coherent buffer (resp_gpa). */
static int hicain_query_port(struct hicain_dev *hdev, struct hicain_port_attr *attr)
{
	struct hicain_admin_cmd cmd = {};
	struct hicain_port_attr *resp;
	dma_addr_t dma;
	int ret;

	resp = dma_alloc_coherent(&hdev->pdev->dev, sizeof(*resp), &dma, GFP_KERNEL);
	if (!resp)
		return -ENOMEM;
	cmd.opcode = cpu_to_le16(HICAIN_CMD_QUERY_PORT);
	cmd.handle = cpu_to_le32(1);
	cmd.resp_gpa = cpu_to_le64(dma);
	cmd.resp_len = cpu_to_le32(sizeof(*resp));
	ret = hicain_admin_exec(hdev, &cmd, NULL);
	if (!ret)
		*attr = *resp;
	if (hicain_admin_lost(ret))
		hicain_admin_keep(hdev, sizeof(*resp));
	else
		dma_free_coherent(&hdev->pdev->dev, sizeof(*resp), resp, dma);
	return ret;
}

/* ---- the RDMA auxiliary device ---- */

void hicain_set_rdma_ops(struct hicain_dev *hdev, const struct hicain_rdma_ops *ops, void *priv)
{
	hdev->rdma_priv = priv;
	rcu_assign_pointer(hdev->rdma_ops, ops);
}
EXPORT_SYMBOL_GPL(hicain_set_rdma_ops);

void hicain_clear_rdma_ops(struct hicain_dev *hdev)
{
	RCU_INIT_POINTER(hdev->rdma_ops, NULL);
	/* No event or CQ callback runs after this. */
	synchronize_rcu();
	hdev->rdma_priv = NULL;
}
EXPORT_SYMBOL_GPL(hicain_clear_rdma_ops);

static void hicain_adev_release(struct device *dev)
{
	struct hicain_adev *hadev = container_of(to_auxiliary_dev(dev), struct hicain_adev, adev);

	ida_free(&hicain_adev_ida, hadev->adev.id);
	kfree(hadev);
}

/*
 * hicain_adev_create - the function's RDMA auxiliary device, last in
 * probe. Without it the function is an Ethernet NIC only.
 */
static int hicain_adev_create(struct hicain_priv *priv)
{
	struct hicain_dev *hdev = &priv->hdev;
	struct hicain_adev *hadev;
	int ret;

	hadev = kzalloc(sizeof(*hadev), GFP_KERNEL);
	if (!hadev)
		goto err;
	ret = ida_alloc(&hicain_adev_ida, GFP_KERNEL);
	if (ret < 0) {
		kfree(hadev);
		goto err;
	}
	hadev->hdev = hdev;
	hadev->adev.name = HICAIN_ADEV_RDMA;
	hadev->adev.id = ret;
	hadev->adev.dev.parent = &hdev->pdev->dev;
	hadev->adev.dev.release = hicain_adev_release;
	if (auxiliary_device_init(&hadev->adev)) {
		ida_free(&hicain_adev_ida, hadev->adev.id);
		kfree(hadev);
		goto err;
	}
	if (auxiliary_device_add(&hadev->adev)) {
		auxiliary_device_uninit(&hadev->adev);	/* releases it */
		goto err;
	}
	mutex_lock(&hdev->adev_lock);
	hdev->adev = hadev;
	mutex_unlock(&hdev->adev_lock);
	return 0;

err:
	dev_warn(&hdev->pdev->dev, "no RDMA auxiliary device: Ethernet only\n");
	return 0;
}

/* hicain_adev_destroy - first in remove: unbinds hicain_ib. */
static void hicain_adev_destroy(struct hicain_priv *priv)
{
	struct hicain_dev *hdev = &priv->hdev;
	struct hicain_adev *hadev;

	mutex_lock(&hdev->adev_lock);
	hadev = hdev->adev;
	hdev->adev = NULL;
	mutex_unlock(&hdev->adev_lock);
	if (!hadev)
		return;
	auxiliary_device_delete(&hadev->adev);
	auxiliary_device_uninit(&hadev->adev);
}

/* hicain_adev_get - a reference to the RDMA auxiliary device, or NULL. */
static struct hicain_adev *hicain_adev_get(struct hicain_dev *hdev)
{
	struct hicain_adev *hadev;

	mutex_lock(&hdev->adev_lock);
	hadev = hdev->adev;
	if (hadev)
		get_device(&hadev->adev.dev);
	mutex_unlock(&hdev->adev_lock);
	return hadev;
}

/* ---- event queue and interrupts ---- */

static void hicain_dispatch_event(struct hicain_dev *hdev, const struct hicain_eqe *e)
{
	struct hicain_priv *priv = hdev_priv(hdev);
	const struct hicain_rdma_ops *ops;

	switch (le32_to_cpu(e->type)) {
	case HICAIN_EV_PORT_ACTIVE:
		if (!hicain_dev_dead(hdev))
			netif_carrier_on(priv->ndev);
		break;
	case HICAIN_EV_PORT_ERR:
		netif_carrier_off(priv->ndev);
		break;
	case HICAIN_EV_DEVICE_FATAL:
		netif_carrier_off(priv->ndev);
		schedule_work(&priv->reset_work);
		break;
	}
	rcu_read_lock();
	ops = rcu_dereference(hdev->rdma_ops);
	if (ops && ops->event)
		ops->event(hdev, e);
	rcu_read_unlock();
}

static void hicain_poll_eq(struct hicain_dev *hdev)
{
	struct hicain_eqe *eq = hdev->bar2 + HICAIN_EQ_OFF;
	struct hicain_eqe e;
	u32 prod;

	spin_lock(&hdev->eq_lock);
	prod = hdr_load(&hdev->hdr->eq_prod);
	dma_rmb();
	/* Out of range only while the device rebuilds its header in a
	 * reset; the reset restarts both indices at 0.
	 */
	if (prod - hdev->eq_cons > HICAIN_EQ_ENTRIES)
		hdev->eq_cons = prod;
	while (hdev->eq_cons != prod) {
		memcpy(&e, &eq[hdev->eq_cons & (HICAIN_EQ_ENTRIES - 1)], sizeof(e));
		hdev->eq_cons++;
		hicain_dispatch_event(hdev, &e);
	}
	hdr_store(&hdev->hdr->eq_cons, hdev->eq_cons);
	spin_unlock(&hdev->eq_lock);
}

static irqreturn_t hicain_ctrl_irq(int irq, void *data)
{
	struct hicain_dev *hdev = data;
	struct hicain_priv *priv = hdev_priv(hdev);

	wake_up(&hdev->admin_wq);
	hicain_poll_eq(hdev);
	if (hicain_dev_status(hdev) & HICAIN_DEV_FATAL) {
		netif_carrier_off(priv->ndev);
		schedule_work(&priv->reset_work);
	}
	return IRQ_HANDLED;
}

static irqreturn_t hicain_l2_irq(int irq, void *data)
{
	struct hicain_priv *priv = hdev_priv(data);

	napi_schedule_irqoff(&priv->napi);
	return IRQ_HANDLED;
}

static irqreturn_t hicain_cq_irq(int irq, void *data)
{
	struct hicain_cq_vec *v = data;
	const struct hicain_rdma_ops *ops;

	rcu_read_lock();
	ops = rcu_dereference(v->hdev->rdma_ops);
	if (ops && ops->cq_irq)
		ops->cq_irq(v->hdev, v->comp_vector);
	rcu_read_unlock();
	return IRQ_HANDLED;
}

static void *hicain_irq_data(struct hicain_priv *priv, unsigned int vec)
{
	if (vec < HICAIN_IRQ_CQ_BASE)
		return &priv->hdev;
	return &priv->cq_vecs[vec];
}

static int hicain_request_irqs(struct hicain_priv *priv)
{
	struct hicain_dev *hdev = &priv->hdev;
	struct pci_dev *pdev = hdev->pdev;
	irq_handler_t handler;
	unsigned int i;
	int ret;

	for (i = 0; i < hdev->num_vectors; i++) {
		priv->cq_vecs[i].hdev = hdev;
		priv->cq_vecs[i].comp_vector = i - HICAIN_IRQ_CQ_BASE;
	}
	for (i = 0; i < hdev->num_vectors; i++) {
		if (i == HICAIN_IRQ_CTRL) {
			handler = hicain_ctrl_irq;
			snprintf(priv->irq_names[i], sizeof(priv->irq_names[i]),
				 "hicain-ctrl@%s", pci_name(pdev));
		} else if (i == HICAIN_IRQ_L2) {
			handler = hicain_l2_irq;
			snprintf(priv->irq_names[i], sizeof(priv->irq_names[i]),
				 "hicain-l2@%s", pci_name(pdev));
		} else {
			handler = hicain_cq_irq;
			snprintf(priv->irq_names[i], sizeof(priv->irq_names[i]),
				 "hicain-cq%u@%s", i - HICAIN_IRQ_CQ_BASE, pci_name(pdev));
		}
		ret = request_irq(pci_irq_vector(pdev, i), handler, 0,
				  priv->irq_names[i], hicain_irq_data(priv, i));
		if (ret) {
			while (i--)
				free_irq(pci_irq_vector(pdev, i), hicain_irq_data(priv, i));
			return ret;
		}
	}
	hdev->irqs_ready = true;
	return 0;
}

static void hicain_free_irqs(struct hicain_dev *hdev)
{
	unsigned int i;

	if (!hdev->irqs_ready)
		return;
	for (i = 0; i < hdev->num_vectors; i++)
		free_irq(pci_irq_vector(hdev->pdev, i), hicain_irq_data(hdev_priv(hdev), i));
	hdev->irqs_ready = false;
}

/* ---- L2 rings ---- */

static void hicain_stats_add(struct hicain_stats *s, u64 packets, u64 bytes,
			     u64 errors, u64 dropped)
{
	u64_stats_update_begin(&s->syncp);
	u64_stats_add(&s->packets, packets);
	u64_stats_add(&s->bytes, bytes);
	u64_stats_add(&s->errors, errors);
	u64_stats_add(&s->dropped, dropped);
	u64_stats_update_end(&s->syncp);
}

static void hicain_stats_read(struct hicain_stats *s, u64 *packets, u64 *bytes,
			      u64 *errors, u64 *dropped)
{
	unsigned int start;

	do {
		start = u64_stats_fetch_begin(&s->syncp);
		*packets = u64_stats_read(&s->packets);
		*bytes = u64_stats_read(&s->bytes);
		*errors = u64_stats_read(&s->errors);
		*dropped = u64_stats_read(&s->dropped);
	} while (u64_stats_fetch_retry(&s->syncp, start));
}

static void hicain_rx_post(struct hicain_priv *priv, u32 slot)
{
	struct hicain_l2_desc *d = &priv->rx_ring[slot];

	d->addr = cpu_to_le64(priv->rx[slot].dma);
	d->len = 0;
	d->flags = 0;
	d->buf_len = cpu_to_le16(priv->rx_buf_len);
	d->rsvd = 0;
}

/* Publish rx_prod: descriptors before the index (release). */
static void hicain_rx_publish(struct hicain_priv *priv)
{
	dma_wmb();
	hdr_store(&priv->hdev.hdr->l2_rx_prod, priv->rx_prod);
}

static int hicain_rx_alloc_one(struct hicain_priv *priv, struct hicain_rx_buf *b, gfp_t gfp)
{
	struct device *dev = &priv->hdev.pdev->dev;
	struct sk_buff *skb;

	skb = __netdev_alloc_skb_ip_align(priv->ndev, priv->rx_buf_len, gfp);
	if (!skb)
		return -ENOMEM;
	b->dma = dma_map_single(dev, skb->data, priv->rx_buf_len, DMA_FROM_DEVICE);
	if (dma_mapping_error(dev, b->dma)) {
		dev_kfree_skb_any(skb);
		return -ENOMEM;
	}
	b->skb = skb;
	return 0;
}

static void hicain_rx_free_all(struct hicain_priv *priv)
{
	struct device *dev = &priv->hdev.pdev->dev;
	unsigned int i;

	for (i = 0; i < HICAIN_L2_RX_ENTRIES; i++) {
		struct hicain_rx_buf *b = &priv->rx[i];

		if (!b->skb)
			continue;
		dma_unmap_single(dev, b->dma, priv->rx_buf_len, DMA_FROM_DEVICE);
		dev_kfree_skb_any(b->skb);
		b->skb = NULL;
	}
	priv->rx_ready = false;
}

static int hicain_rx_alloc_all(struct hicain_priv *priv)
{
	unsigned int i;

	for (i = 0; i < HICAIN_L2_RX_ENTRIES; i++) {
		if (hicain_rx_alloc_one(priv, &priv->rx[i], GFP_KERNEL)) {
			hicain_rx_free_all(priv);
			return -ENOMEM;
		}
	}
	priv->rx_ready = true;
	return 0;
}

/*
 * hicain_rx_start - hand every buffer to a freshly reset device: the
 * device's indices are 0, so slot i gets buffer i and rx_prod the whole
 * ring.
 */
static void hicain_rx_start(struct hicain_priv *priv)
{
	u32 i;

	priv->rx_clean = 0;
	for (i = 0; i < HICAIN_L2_RX_ENTRIES; i++)
		hicain_rx_post(priv, i);
	priv->rx_prod = HICAIN_L2_RX_ENTRIES;
	hicain_rx_publish(priv);
}

/*
 * The device keeps filling the RX ring while the interface is down;
 * those frames are stale at open and their buffers are posted again.
 */
static void hicain_rx_recycle(struct hicain_priv *priv)
{
	u32 cons = hdr_load(&priv->hdev.hdr->l2_rx_cons);

	dma_rmb();
	while (priv->rx_clean != cons) {
		hicain_rx_post(priv, priv->rx_clean & HICAIN_RX_MASK);
		priv->rx_clean++;
		priv->rx_prod++;
	}
	hicain_rx_publish(priv);
}

static int hicain_rx_poll(struct hicain_priv *priv, int budget)
{
	struct device *dev = &priv->hdev.pdev->dev;
	struct net_device *ndev = priv->ndev;
	u64 packets = 0, bytes = 0, errors = 0, dropped = 0;
	struct hicain_rx_buf fresh;
	int done = 0;
	u32 cons;

	cons = hdr_load(&priv->hdev.hdr->l2_rx_cons);
	dma_rmb();
	if (cons - priv->rx_clean > HICAIN_L2_RX_ENTRIES) {
		if (net_ratelimit())
			netdev_err(ndev, "RX index %u out of range (clean %u)\n", cons,
				   priv->rx_clean);
		return 0;
	}
	while (priv->rx_clean != cons && done < budget) {
		u32 slot = priv->rx_clean & HICAIN_RX_MASK;
		struct hicain_l2_desc *d = &priv->rx_ring[slot];
		struct hicain_rx_buf *b = &priv->rx[slot];
		unsigned int len = le16_to_cpu(READ_ONCE(d->len));
		u16 flags = le16_to_cpu(READ_ONCE(d->flags));
		struct sk_buff *skb;

		done++;
		if ((flags & HICAIN_L2_F_ERR) || len < ETH_HLEN || len > priv->rx_buf_len) {
			errors++;
		} else if (hicain_rx_alloc_one(priv, &fresh, GFP_ATOMIC)) {
			/* Keep the old buffer in the ring; the frame is lost. */
			dropped++;
		} else {
			skb = b->skb;
			dma_unmap_single(dev, b->dma, priv->rx_buf_len, DMA_FROM_DEVICE);
			*b = fresh;
			skb_put(skb, len);
			skb->protocol = eth_type_trans(skb, ndev);
			packets++;
			bytes += len;
			napi_gro_receive(&priv->napi, skb);
		}
		hicain_rx_post(priv, slot);
		priv->rx_clean++;
		priv->rx_prod++;
	}
	if (done) {
		hicain_rx_publish(priv);
		hicain_stats_add(&priv->rx_stats, packets, bytes, errors, dropped);
	}
	return done;
}

static u32 hicain_tx_room(struct hicain_priv *priv)
{
	return HICAIN_L2_TX_ENTRIES - (priv->tx_prod - READ_ONCE(priv->tx_clean));
}

static void hicain_tx_complete(struct hicain_priv *priv, int budget)
{
	struct device *dev = &priv->hdev.pdev->dev;
	u64 packets = 0, bytes = 0, errors = 0;
	u32 cons, clean = priv->tx_clean;

	cons = hdr_load(&priv->hdev.hdr->l2_tx_cons);
	dma_rmb();
	if (cons - clean > READ_ONCE(priv->tx_prod) - clean) {
		if (net_ratelimit())
			netdev_err(priv->ndev, "TX index %u out of range (clean %u)\n", cons,
				   clean);
		return;
	}
	while (clean != cons) {
		u32 slot = clean & HICAIN_TX_MASK;
		struct hicain_tx_buf *b = &priv->tx[slot];
		u16 flags = le16_to_cpu(READ_ONCE(priv->tx_ring[slot].flags));

		dma_unmap_single(dev, b->dma, b->len, DMA_TO_DEVICE);
		if (flags & HICAIN_L2_F_ERR) {
			errors++;
		} else {
			packets++;
			bytes += b->len;
		}
		napi_consume_skb(b->skb, budget);
		b->skb = NULL;
		clean++;
	}
	if (clean == priv->tx_clean)
		return;
	hicain_stats_add(&priv->tx_stats, packets, bytes, errors, 0);
	/* Pairs with the barrier in hicain_xmit after it stops the queue. */
	smp_store_release(&priv->tx_clean, clean);
	smp_mb();
	if (netif_queue_stopped(priv->ndev) && hicain_tx_room(priv) >= HICAIN_TX_WAKE)
		netif_wake_queue(priv->ndev);
}

/* Free TX buffers the device will not complete (stop, reset). */
static void hicain_tx_drop_all(struct hicain_priv *priv)
{
	struct device *dev = &priv->hdev.pdev->dev;

	while (priv->tx_clean != priv->tx_prod) {
		struct hicain_tx_buf *b = &priv->tx[priv->tx_clean & HICAIN_TX_MASK];

		dma_unmap_single(dev, b->dma, b->len, DMA_TO_DEVICE);
		dev_kfree_skb_any(b->skb);
		b->skb = NULL;
		priv->tx_clean++;
	}
}

static int hicain_napi_poll(struct napi_struct *napi, int budget)
{
	struct hicain_priv *priv = container_of(napi, struct hicain_priv, napi);
	struct hicain_dev_hdr *h = priv->hdev.hdr;
	int done;

	hicain_tx_complete(priv, budget);
	done = hicain_rx_poll(priv, budget);
	if (done < budget && napi_complete_done(napi, done)) {
		/* Work that arrived after the last look but whose interrupt
		 * found NAPI still scheduled.
		 */
		if (hdr_load(&h->l2_rx_cons) != priv->rx_clean ||
		    hdr_load(&h->l2_tx_cons) != priv->tx_clean)
			napi_schedule(napi);
	}
	return done;
}

static netdev_tx_t hicain_xmit(struct sk_buff *skb, struct net_device *ndev)
{
	struct hicain_priv *priv = netdev_priv(ndev);
	struct device *dev = &priv->hdev.pdev->dev;
	struct hicain_l2_desc *d;
	struct hicain_tx_buf *b;
	dma_addr_t dma;
	u32 slot;

	if (skb->len < ETH_HLEN || skb->len > HICAIN_L2_MAX_FRAME || skb_linearize(skb))
		goto drop;
	if (unlikely(!hicain_tx_room(priv))) {
		netif_stop_queue(ndev);
		return NETDEV_TX_BUSY;
	}
	dma = dma_map_single(dev, skb->data, skb->len, DMA_TO_DEVICE);
	if (dma_mapping_error(dev, dma))
		goto drop;

	slot = priv->tx_prod & HICAIN_TX_MASK;
	b = &priv->tx[slot];
	b->skb = skb;
	b->dma = dma;
	b->len = skb->len;
	d = &priv->tx_ring[slot];
	d->addr = cpu_to_le64(dma);
	d->len = cpu_to_le16(skb->len);
	d->flags = 0;
	d->buf_len = 0;
	d->rsvd = 0;
	skb_tx_timestamp(skb);

	/* Descriptor before the index the device reads it by. */
	dma_wmb();
	WRITE_ONCE(priv->tx_prod, priv->tx_prod + 1);
	hdr_store(&priv->hdev.hdr->l2_tx_prod, priv->tx_prod);

	if (unlikely(!hicain_tx_room(priv))) {
		netif_stop_queue(ndev);
		/* A completion may have freed room before the stop. */
		smp_mb();
		if (hicain_tx_room(priv) >= HICAIN_TX_WAKE)
			netif_start_queue(ndev);
	}
	if (!netdev_xmit_more() || netif_queue_stopped(ndev))
		hicain_ring_doorbell(&priv->hdev, HICAIN_DB_L2);
	return NETDEV_TX_OK;

drop:
	hicain_stats_add(&priv->xmit_stats, 0, 0, 0, 1);
	dev_kfree_skb_any(skb);
	return NETDEV_TX_OK;
}

/* Wait until the device took every queued frame, then free the rest. */
static void hicain_tx_drain(struct hicain_priv *priv)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(HICAIN_TX_DRAIN_MS);

	while (hdr_load(&priv->hdev.hdr->l2_tx_cons) != priv->tx_prod &&
	       !hicain_dev_dead(&priv->hdev)) {
		if (time_after(jiffies, deadline)) {
			netdev_warn(priv->ndev, "device did not drain the TX ring\n");
			break;
		}
		usleep_range(500, 1000);
	}
	hicain_tx_complete(priv, 0);
	hicain_tx_drop_all(priv);
}

static void hicain_update_carrier(struct hicain_priv *priv)
{
	u32 st = hicain_dev_status(&priv->hdev);

	if ((st & HICAIN_DEV_LINK_UP) && (st & HICAIN_DEV_LIVE) && !(st & HICAIN_DEV_FATAL) &&
	    !hicain_dev_dead(&priv->hdev))
		netif_carrier_on(priv->ndev);
	else
		netif_carrier_off(priv->ndev);
}

static int hicain_open(struct net_device *ndev)
{
	struct hicain_priv *priv = netdev_priv(ndev);

	if (!priv->rx_ready)
		return -EIO;
	hicain_rx_recycle(priv);
	napi_enable(&priv->napi);
	hicain_update_carrier(priv);
	netif_start_queue(ndev);
	/* Frames that arrived between the recycle and napi_enable; with
	 * BHs off the softirq runs at local_bh_enable, not at some later
	 * interrupt.
	 */
	local_bh_disable();
	napi_schedule(&priv->napi);
	local_bh_enable();
	return 0;
}

static int hicain_stop(struct net_device *ndev)
{
	struct hicain_priv *priv = netdev_priv(ndev);

	netif_tx_disable(ndev);
	napi_disable(&priv->napi);
	hicain_tx_drain(priv);
	return 0;
}

static void hicain_get_stats64(struct net_device *ndev, struct rtnl_link_stats64 *s)
{
	struct hicain_priv *priv = netdev_priv(ndev);
	u64 packets, bytes, errors, dropped;

	hicain_stats_read(&priv->rx_stats, &packets, &bytes, &errors, &dropped);
	s->rx_packets = packets;
	s->rx_bytes = bytes;
	s->rx_errors = errors;
	s->rx_dropped = dropped;
	hicain_stats_read(&priv->tx_stats, &packets, &bytes, &errors, &dropped);
	s->tx_packets = packets;
	s->tx_bytes = bytes;
	s->tx_errors = errors;
	hicain_stats_read(&priv->xmit_stats, &packets, &bytes, &errors, &dropped);
	s->tx_dropped = dropped;
}

/*
 * The core's defaults serve the rest: an MTU change within min_mtu and
 * max_mtu only sets it (RX buffers are sized for max_mtu), and the MAC,
 * checked at probe, cannot change (no ndo_set_mac_address), so open has
 * nothing to validate.
 */
static const struct net_device_ops hicain_netdev_ops = {
	.ndo_open		= hicain_open,
	.ndo_stop		= hicain_stop,
	.ndo_start_xmit		= hicain_xmit,
	.ndo_get_stats64	= hicain_get_stats64,
};

/* ---- fatal state and reset ---- */

/*
 * hicain_notify_reset - tell the RDMA driver, under its auxiliary
 * device's lock: not while it probes or removes, which set and clear its
 * ops under that lock.
 */
static void hicain_notify_reset(struct hicain_dev *hdev, bool done)
{
	struct hicain_adev *hadev = hicain_adev_get(hdev);
	const struct hicain_rdma_ops *ops;

	if (!hadev)
		return;
	device_lock(&hadev->adev.dev);
	ops = rcu_dereference_protected(hdev->rdma_ops, lockdep_is_held(&hadev->adev.dev.mutex));
	if (ops && ops->reset)
		ops->reset(hdev, done);
	device_unlock(&hadev->adev.dev);
	put_device(&hadev->adev.dev);
}

/*
 * hicain_reset_work - leave the device's fatal state: the only way out
 * is a reset, which loses every device object and ring index, so the
 * datapath stops, the device is reset and handshaken again, and the RX
 * buffers (still mapped) are handed to it anew.
 */
static void hicain_reset_work(struct work_struct *work)
{
	struct hicain_priv *priv = container_of(work, struct hicain_priv, reset_work);
	struct hicain_dev *hdev = &priv->hdev;
	struct net_device *ndev = priv->ndev;
	bool running;
	int ret;

	if (!(hicain_dev_status(hdev) & HICAIN_DEV_FATAL) || hicain_dev_dead(hdev))
		return;
	netdev_err(ndev, "device fatal, code %u; resetting\n",
		   hdr_load(&hdev->hdr->fatal_code));
	hicain_notify_reset(hdev, false);

	rtnl_lock();
	netif_carrier_off(ndev);
	running = netif_running(ndev);
	if (running) {
		netif_tx_disable(ndev);
		napi_disable(&priv->napi);
	}
	mutex_lock(&hdev->admin_lock);
	ret = hicain_hw_reset(hdev);
	if (!ret) {
		hicain_tx_drop_all(priv);
		priv->tx_prod = 0;
		priv->tx_clean = 0;
		hicain_rx_start(priv);
		ret = hicain_hw_start(hdev);
	}
	mutex_unlock(&hdev->admin_lock);
	/* NAPI runs again either way: ndo_stop disables it. */
	if (running)
		napi_enable(&priv->napi);
	if (ret) {
		netdev_err(ndev, "device reset failed: %d; the link stays down\n", ret);
	} else {
		netdev_info(ndev, "device reset done (reset_count %u)\n", hdev->reset_count);
		if (running)
			netif_wake_queue(ndev);
		hicain_update_carrier(priv);
	}
	rtnl_unlock();
	if (!ret)
		hicain_notify_reset(hdev, true);
}

/* ---- dead backend ---- */

/*
 * hicain_die - the backend is gone (its heartbeat stopped): the device
 * becomes dead for good, as a NIC whose firmware died. Admin commands
 * waiting or to come fail with -ENODEV, the carrier goes off and the
 * RDMA driver reports IB_EVENT_DEVICE_FATAL and forgets its handles
 * (its reset callback, done false; done true never follows). Nothing
 * the device was given is freed before the function is removed
 * (hicain_dev_dead). The way back is a new function: the host removes
 * this one and plugs in one served by a new backend (docs/device.md,
 * "Backend restarts"), which this driver probes as any other.
 */
static void hicain_die(struct hicain_priv *priv)
{
	struct hicain_dev *hdev = &priv->hdev;

	WRITE_ONCE(hdev->dead, true);
	wake_up_all(&hdev->admin_wq);
	dev_err(&hdev->pdev->dev,
		"device backend stopped: heartbeat %u unchanged for %u ms; device dead until removed\n",
		priv->hb_last, HICAIN_HEARTBEAT_DEAD_MS);
	rtnl_lock();
	netif_carrier_off(priv->ndev);
	if (netif_running(priv->ndev))
		netif_tx_disable(priv->ndev);
	rtnl_unlock();
	hicain_notify_reset(hdev, false);
}

/*
 * hicain_watchdog - while the device is up, read its heartbeat
 * (device-abi.md, "Heartbeat"); unchanged for HICAIN_HEARTBEAT_DEAD_MS
 * while LIVE, the backend is dead. Runs only on a device of ABI 1.14 or
 * later; a fatal or resetting device (not LIVE) restarts the count,
 * its reset has its own timeout.
 */
static void hicain_watchdog(struct work_struct *work)
{
	struct hicain_priv *priv = container_of(to_delayed_work(work), struct hicain_priv, watchdog);
	struct hicain_dev *hdev = &priv->hdev;
	u32 hb = hdr_load(&hdev->hdr->heartbeat);
	u32 st = hicain_dev_status(hdev);

	if (hb != priv->hb_last || !(st & HICAIN_DEV_LIVE) || (st & HICAIN_DEV_FATAL)) {
		priv->hb_last = hb;
		priv->hb_changed = jiffies;
	} else if (time_after(jiffies, priv->hb_changed +
			      msecs_to_jiffies(HICAIN_HEARTBEAT_DEAD_MS))) {
		hicain_die(priv);
		return;
	}
	schedule_delayed_work(&priv->watchdog, msecs_to_jiffies(HICAIN_WATCHDOG_MS));
}

static bool hicain_has_heartbeat(struct hicain_dev *hdev)
{
	return le16_to_cpu(READ_ONCE(hdev->hdr->abi_minor)) >= 14;
}

static void hicain_watchdog_start(struct hicain_priv *priv)
{
	struct hicain_dev *hdev = &priv->hdev;

	if (!hicain_has_heartbeat(hdev))
		return;
	priv->hb_last = hdr_load(&hdev->hdr->heartbeat);
	priv->hb_changed = jiffies;
	schedule_delayed_work(&priv->watchdog, msecs_to_jiffies(HICAIN_WATCHDOG_MS));
}

/* ---- PCI ---- */

/* hicain_check_bar2 - BAR2 holds a HiNIC header this driver speaks. */
static int hicain_check_bar2(struct pci_dev *pdev, void *bar2, size_t len)
{
	struct hicain_dev_hdr *h = bar2 + HICAIN_HDR_OFF;

	if (len < HICAIN_BAR2_MIN_SIZE) {
		dev_err(&pdev->dev, "BAR2 of %zu bytes, header says %u\n", len,
			le32_to_cpu(h->bar_size));
		return -ENODEV;
	}
	return 0;
}

/*
 * Probe in stages, each undone in reverse order by the error path and by
 * hicain_remove, its mirror image:
 *   1. pci_enable_device;
 *   2. pci_request_regions;
 *   3. BAR2 mapped, its header checked, DMA mask (1 to 3: hinic_ivshmem_open);
 *   4. hicain_alloc: the netdev that holds hicain_priv, its NAPI;
 *   5. pci_iomap of BAR0, and a reset of a device left live;
 *   6. hicain_alloc_vectors: the MSI-X vectors;
 *   7. hicain_rx_alloc_all: the RX buffers;
 *   8. hicain_up: interrupts, RX posted, handshake (hicain_down resets
 *      the device, and keeps the RX buffers if it does not answer);
 *   9. hicain_register: QUERY_PORT and the netdev (RoCE only);
 *  10. hicain_adev_create: the RDMA auxiliary device.
 */

/* hicain_alloc - stage 4: the netdev, the private state it holds. */
static struct hicain_priv *hicain_alloc(struct pci_dev *pdev, void *bar2, size_t len)
{
	struct net_device *ndev;
	struct hicain_priv *priv;
	struct hicain_dev *hdev;

	ndev = alloc_etherdev(sizeof(*priv));
	if (!ndev)
		return NULL;
	SET_NETDEV_DEV(ndev, &pdev->dev);
	priv = netdev_priv(ndev);
	priv->ndev = ndev;
	hdev = &priv->hdev;
	hdev->pdev = pdev;
	hdev->netdev = ndev;
	hdev->bar2 = bar2;
	hdev->bar2_len = len;
	hdev->hdr = bar2 + HICAIN_HDR_OFF;
	hdev->ib_link = READ_ONCE(hdev->hdr->link_layer) == HICAIN_LINK_INFINIBAND;
	mutex_init(&hdev->admin_lock);
	mutex_init(&hdev->adev_lock);
	init_waitqueue_head(&hdev->admin_wq);
	spin_lock_init(&hdev->eq_lock);
	INIT_WORK(&priv->reset_work, hicain_reset_work);
	INIT_DELAYED_WORK(&priv->watchdog, hicain_watchdog);
	u64_stats_init(&priv->rx_stats.syncp);
	u64_stats_init(&priv->tx_stats.syncp);
	u64_stats_init(&priv->xmit_stats.syncp);
	priv->tx_ring = bar2 + HICAIN_L2_TX_OFF;
	priv->rx_ring = bar2 + HICAIN_L2_RX_OFF;
	ndev->max_mtu = min_t(unsigned int, le32_to_cpu(hdev->hdr->max_mtu),
			      HICAIN_L2_MAX_FRAME - VLAN_ETH_HLEN);
	if (ndev->max_mtu < ETH_MIN_MTU)
		ndev->max_mtu = ETH_DATA_LEN;
	priv->rx_buf_len = ndev->max_mtu + VLAN_ETH_HLEN;
	/* Before the interrupts: the L2 vector schedules this NAPI (which
	 * stays disabled until ndo_open) as soon as the device is live.
	 */
	netif_napi_add(ndev, &priv->napi, hicain_napi_poll);
	pci_set_drvdata(pdev, priv);
	return priv;
}

static void hicain_free(struct hicain_priv *priv)
{
	netif_napi_del(&priv->napi);
	free_netdev(priv->ndev);
}

/*
 * hicain_map_bar0 - stage 5: the doorbell register, and a clean device
 * with its indices at 0 when a previous driver left it live (or it went
 * fatal).
 */
static int hicain_map_bar0(struct hicain_priv *priv)
{
	struct hicain_dev *hdev = &priv->hdev;

	return hinic_ivshmem_map_bar0(hdev->pdev, &hicain_id, hdev->bar2, &hdev->bar0,
				      &hdev->reset_count);
}

static void hicain_unmap_bar0(struct hicain_priv *priv)
{
	pci_iounmap(priv->hdev.pdev, priv->hdev.bar0);
}

/* hicain_alloc_vectors - stage 6: at least the control and L2 vectors; the rest serve CQs. */
static int hicain_alloc_vectors(struct hicain_priv *priv)
{
	struct hicain_dev *hdev = &priv->hdev;
	unsigned int nvec;
	int ret;

	nvec = min_t(unsigned int, le32_to_cpu(hdev->hdr->num_vectors), HICAIN_MAX_VECTORS);
	ret = hinic_ivshmem_alloc_vectors(hdev->pdev, HICAIN_IRQ_L2 + 1,
					  max(nvec, HICAIN_IRQ_L2 + 1U));
	if (ret < 0)
		return ret;
	hdev->num_vectors = ret;
	hdev->num_comp_vectors = ret - HICAIN_IRQ_CQ_BASE;
	return 0;
}

static void hicain_free_vectors(struct hicain_priv *priv)
{
	pci_free_irq_vectors(priv->hdev.pdev);
}

/*
 * hicain_down - undoes hicain_up: no interrupt and no reset work, and the
 * device back to READY, which drops every index and buffer of ours. If
 * it does not answer, the RX buffers stay allocated (rx_kept) rather
 * than be written after free.
 */
static void hicain_down(struct hicain_priv *priv)
{
	struct hicain_dev *hdev = &priv->hdev;

	cancel_delayed_work_sync(&priv->watchdog);
	hicain_free_irqs(hdev);
	cancel_work_sync(&priv->reset_work);
	if (hicain_hw_reset(hdev))
		priv->rx_kept = true;
	hicain_tx_drop_all(priv);
}

/*
 * hicain_up - stage 8: the interrupts, then the RX buffers posted (the
 * rings are empty until the device is live, and no frame after LIVE may
 * find the ring empty), then the handshake.
 */
static int hicain_up(struct hicain_priv *priv)
{
	int ret;

	ret = hicain_request_irqs(priv);
	if (ret)
		return ret;
	hicain_rx_start(priv);
	ret = hicain_hw_start(&priv->hdev);
	if (ret) {
		hicain_down(priv);
		return ret;
	}
	hicain_watchdog_start(priv);
	return 0;
}

/* hicain_rx_release - undoes stage 7, unless the device may still write the buffers. */
static void hicain_rx_release(struct hicain_priv *priv)
{
	if (priv->rx_kept)
		dev_warn(&priv->hdev.pdev->dev, "device did not reset or is dead; keeping its RX buffers\n");
	else
		hicain_rx_free_all(priv);
}

/*
 * hicain_register - stage 9: the netdev of a RoCE function. An
 * InfiniBand port carries no Ethernet: the device serves no L2 rings
 * (no HICAIN_CAP_L2), so there is no netdev to show. IPoIB, if wanted,
 * runs on the ib_device.
 */
static int hicain_register(struct hicain_priv *priv)
{
	struct hicain_port_attr port = {};
	struct hicain_dev *hdev = &priv->hdev;
	struct net_device *ndev = priv->ndev;
	int ret;

	ret = hicain_query_port(hdev, &port);
	if (ret)
		dev_warn(&hdev->pdev->dev, "QUERY_PORT: %d\n", ret);
	ndev->netdev_ops = &hicain_netdev_ops;
	ndev->min_mtu = ETH_MIN_MTU;
	ndev->mtu = min_t(unsigned int, ETH_DATA_LEN, ndev->max_mtu);
	eth_hw_addr_set(ndev, hdev->hdr->mac);
	if (!is_valid_ether_addr(ndev->dev_addr)) {
		dev_warn(&hdev->pdev->dev, "device MAC %pM is not valid, using a random one\n",
			 hdev->hdr->mac);
		eth_hw_addr_random(ndev);
	}
	netif_carrier_off(ndev);
	if (hdev->ib_link) {
		dev_info(&hdev->pdev->dev, "HiNIC ABI %u.%u, InfiniBand, %u MSI-X vectors, port state %u\n",
			 le16_to_cpu(hdev->hdr->abi_major), le16_to_cpu(hdev->hdr->abi_minor),
			 hdev->num_vectors, le32_to_cpu(port.state));
		return 0;
	}
	ret = register_netdev(ndev);
	if (ret)
		return ret;
	hicain_update_carrier(priv);
	netdev_info(ndev, "HiNIC ABI %u.%u, MAC %pM, %u MSI-X vectors, port state %u, max MTU %u%s\n",
		    le16_to_cpu(hdev->hdr->abi_major), le16_to_cpu(hdev->hdr->abi_minor),
		    ndev->dev_addr, hdev->num_vectors, le32_to_cpu(port.state), ndev->max_mtu,
		    netif_carrier_ok(ndev) ? ", link up" : "");
	return 0;
}

static void hicain_unregister(struct hicain_priv *priv)
{
	if (!priv->hdev.ib_link)
		unregister_netdev(priv->ndev);
}

/*
 * The driver: stages 1 to 4 and, once priv exists, stages 5 to 10 in
 * order; a failed probe and hicain_remove undo them in reverse order.
 */
DEFINE_HINIC_IVSHMEM_DRIVER(hicain, DRV_NAME, struct hicain_priv, hdev.bar2,
	{ hicain_map_bar0, hicain_unmap_bar0 },
	{ hicain_alloc_vectors, hicain_free_vectors },
	{ hicain_rx_alloc_all, hicain_rx_release },
	{ hicain_up, hicain_down },
	{ hicain_register, hicain_unregister },
	{ hicain_adev_create, hicain_adev_destroy });

MODULE_DESCRIPTION("HiNIC emulated RDMA NIC: Ethernet driver");
MODULE_AUTHOR("PacketFive");
MODULE_LICENSE("GPL");
