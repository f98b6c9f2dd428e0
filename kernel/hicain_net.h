/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hicain_net.h - what hicain_net.ko exports to the other HiNIC guest
 * modules (hicain_ib.ko): the bound device, its admin queue, doorbells
 * and interrupt callbacks. The device ABI itself is hicain_abi.h.
 *
 * hicain_net creates an auxiliary device "hicain_net.rdma.<n>" for each
 * function it binds (struct hicain_adev); hicain_ib is its auxiliary
 * driver, loaded by its modalias, and takes the function's events and
 * interrupts with hicain_set_rdma_ops.
 */
#ifndef HICAIN_NET_H
#define HICAIN_NET_H

#include <linux/auxiliary_bus.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/pci.h>
#include <linux/types.h>
#include <linux/wait.h>

#include "hicain_abi.h"

/* ivshmem BAR0 registers (QEMU docs/specs/ivshmem-spec.txt). */
#define HICAIN_BAR0_IVPOSITION	8
#define HICAIN_BAR0_DOORBELL	12
/* The backend is ivshmem peer 0 (docs/device-abi.md, Transport). */
#define HICAIN_BACKEND_PEER	0

struct hicain_adev;
struct hicain_rdma_ops;

/*
 * struct hicain_dev - one bound HiNIC function.
 *
 * The fields above the private marker are stable for the lifetime of
 * the binding and may be read by the RDMA driver. hdr points into BAR2; its
 * indices are shared with the device, so read them with READ_ONCE and
 * the barriers of hicain_abi.h.
 */
struct hicain_dev {
	struct pci_dev *pdev;
	/*
	 * The Ethernet netdev of a RoCE function. An InfiniBand function
	 * (ib_link) has no Ethernet: its netdev exists (it holds this
	 * structure) but is never registered, and hicain_ib must not use it.
	 */
	struct net_device *netdev;
	bool ib_link;			/* link_layer HICAIN_LINK_INFINIBAND */
	void __iomem *bar0;		/* ivshmem registers: doorbell */
	void *bar2;			/* shared memory, mapped write-back */
	size_t bar2_len;
	struct hicain_dev_hdr *hdr;	/* bar2 + HICAIN_HDR_OFF */
	unsigned int num_vectors;	/* MSI-X vectors enabled */
	unsigned int num_comp_vectors;	/* CQ vectors: HICAIN_IRQ_CQ_BASE + n */
	void *rdma_priv;		/* the RDMA driver's (hicain_set_rdma_ops) */
	/*
	 * The backend stopped its heartbeat (hicain_dev_dead): set once,
	 * never cleared while the function is bound.
	 */
	bool dead;

	/* private to hicain_net */
	struct mutex adev_lock;		/* adev */
	struct hicain_adev *adev;	/* the RDMA auxiliary device, or NULL */
	const struct hicain_rdma_ops __rcu *rdma_ops;
	struct mutex admin_lock;	/* one admin command in flight */
	wait_queue_head_t admin_wq;
	u32 admin_sq_prod;
	u32 admin_cq_cons;
	u32 admin_seq;
	atomic64_t admin_kept;		/* bytes hicain_admin_keep accounted */
	spinlock_t eq_lock;		/* eq_cons, against reset */
	u32 eq_cons;
	u32 reset_count;
	bool irqs_ready;
};

/* The auxiliary device of a function's RDMA side: "hicain_net.rdma.<n>". */
#define HICAIN_ADEV_RDMA	"rdma"

struct hicain_adev {
	struct auxiliary_device adev;
	struct hicain_dev *hdev;
};

static inline struct hicain_dev *hicain_adev_hdev(struct auxiliary_device *adev)
{
	return container_of(adev, struct hicain_adev, adev)->hdev;
}

/*
 * struct hicain_rdma_ops - the callbacks of the driver bound to a
 * function's RDMA auxiliary device (hicain_ib). event and cq_irq run in
 * hard interrupt context. reset runs in process context around a device
 * reset, under the auxiliary device's lock (so never during its probe or
 * remove): done false when every device object is about to be lost,
 * done true once the device is live again (all handles are then
 * invalid).
 */
struct hicain_rdma_ops {
	void (*event)(struct hicain_dev *hdev, const struct hicain_eqe *eqe);
	void (*cq_irq)(struct hicain_dev *hdev, unsigned int comp_vector);
	void (*reset)(struct hicain_dev *hdev, bool done);
};

/*
 * hicain_set_rdma_ops - from the auxiliary driver's probe, last: the
 * callbacks run from now on, with hdev->rdma_priv = priv.
 * hicain_clear_rdma_ops - from its remove, first: when it returns, no
 * callback runs any more.
 */
void hicain_set_rdma_ops(struct hicain_dev *hdev, const struct hicain_rdma_ops *ops, void *priv);
void hicain_clear_rdma_ops(struct hicain_dev *hdev);

/*
 * hicain_admin_exec - run one admin command and wait for its completion.
 * cmd_id is filled in; cqe (may be NULL) receives the completion.
 * Returns 0, the device's status as a negative errno, -EIO when the
 * device is not live or went fatal, -ENODEV when it is dead
 * (hicain_dev_dead, also for a command it was running then), or
 * -ETIMEDOUT. Sleeps.
 */
int hicain_admin_exec(struct hicain_dev *hdev, struct hicain_admin_cmd *cmd,
		      struct hicain_admin_cqe *cqe);

/*
 * hicain_admin_lost - whether a command that failed with ret may still
 * run in the device: it timed out, and stays in the queue, which the
 * device executes in order; or the device is dead (-ENODEV, also the
 * status of a backend whose engine closed), and its backend may only be
 * stalled. Whatever memory the command names (a
 * response or page list buffer, the rings of the object it creates)
 * the device may still read and write: the caller must not free it, and
 * keeps it instead (hicain_admin_keep). Every other failure left the
 * command unposted, completed, or to a fatal device, which takes no
 * more commands before the reset that forgets them.
 */
static inline bool hicain_admin_lost(int ret)
{
	return ret == -ETIMEDOUT || ret == -ENODEV;
}

/*
 * hicain_admin_keep - account bytes of DMA memory that a caller leaves
 * allocated, never to be freed, because the device may still use it
 * (hicain_admin_lost), and log it.
 */
void hicain_admin_keep(struct hicain_dev *hdev, size_t bytes);

/*
 * hicain_dev_dead - whether the function's backend died (its heartbeat
 * stopped while the device was live, device-abi.md "Heartbeat"). A dead
 * device answers nothing: admin commands fail with -ENODEV at once, and
 * it stays dead until the function is removed. Its backend may only be
 * stalled and still write guest memory, so every DMA buffer it was
 * given stays allocated (hicain_admin_lost, hicain_admin_keep): nothing
 * it could write is freed before the function is gone.
 */
static inline bool hicain_dev_dead(const struct hicain_dev *hdev)
{
	return READ_ONCE(hdev->dead);
}

/* hicain_ring_doorbell - ring doorbell vector db (HICAIN_DB_*). */
void hicain_ring_doorbell(struct hicain_dev *hdev, unsigned int db);

#endif /* HICAIN_NET_H */
