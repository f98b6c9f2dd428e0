// SPDX-License-Identifier: GPL-2.0
/*
 * higpu - guest driver of the HiGPU virtual GPU.
 *
 * The GPU is QEMU's ivshmem-doorbell function served by `hinic gpu
 * serve`: BAR2 holds the device header (higpu_abi.h, docs/gpu.md), BAR0
 * the doorbell register; the command and completion rings live in guest
 * RAM, which the backend reads and writes at their DMA addresses, and the
 * device interrupts through MSI-X. A function whose BAR2 magic is not
 * HIGPU_MAGIC (a HiNIC NIC, say) is left alone with -ENODEV.
 *
 * This file binds the function, does the handshake and resets;
 * higpu_dev.c runs the rings, higpu_chr.c the character device
 * /dev/higpu<gpu_id> (higpu_uapi.h, docs/gpu-driver.md).
 */

#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "higpu.h"
#include "hidev_ivshmem.h"

static u32 higpu_dev_status(struct higpu_dev *dev)
{
	return higpu_load(&dev->hdr->dev_status);
}

/* ---- handshake and reset ---- */

static const struct hinic_ivshmem_id higpu_id = HINIC_IVSHMEM_ID("HiGPU", HIGPU, higpu_dev_hdr);

/*
 * higpu_hw_start - the handshake (higpu_abi.h): the rings, then
 * driver_abi, driver_status = OK | MSIX_ON and the control doorbell.
 * The interrupt handlers are in place.
 */
static int higpu_hw_start(struct higpu_dev *dev)
{
	struct higpu_dev_hdr *h = dev->hdr;

	dev->cmd_prod = 0;
	dev->cpl_cons = 0;
	memset(dev->cmd_ring, 0, HIGPU_RING_ENTRIES * sizeof(*dev->cmd_ring));
	memset(dev->cpl_ring, 0, HIGPU_RING_ENTRIES * sizeof(*dev->cpl_ring));
	WRITE_ONCE(h->cmd_ring_gpa, cpu_to_le64(dev->cmd_dma));
	WRITE_ONCE(h->cpl_ring_gpa, cpu_to_le64(dev->cpl_dma));
	higpu_store(&h->cmd_entries, HIGPU_RING_ENTRIES);
	higpu_store(&h->cpl_entries, HIGPU_RING_ENTRIES);
	higpu_store(&h->cmd_prod, 0);
	higpu_store(&h->cpl_cons, 0);
	return hinic_ivshmem_start(dev->pdev, &higpu_id, dev->bar2, dev->bar0);
}

/*
 * higpu_hw_reset - the device drops every command and context of ours
 * and rewrites the header.
 */
static int higpu_hw_reset(struct higpu_dev *dev)
{
	return hinic_ivshmem_reset(dev->pdev, &higpu_id, dev->bar2, dev->bar0, NULL,
				   &dev->reset_count);
}

/*
 * higpu_quiesce - stop submissions and completion processing and reset
 * the device; on success finish everything in flight with ECANCELED. A
 * device that does not answer keeps all it may still write (dead).
 * Returns with hw_sem held for write and cpl_lock held.
 */
static int higpu_quiesce(struct higpu_dev *dev)
{
	int ret;

	spin_lock(&dev->sq_lock);
	WRITE_ONCE(dev->live, false);
	spin_unlock(&dev->sq_lock);
	higpu_wake_files(dev);
	down_write(&dev->hw_sem);
	mutex_lock(&dev->cpl_lock);
	ret = higpu_hw_reset(dev);
	if (ret) {
		WRITE_ONCE(dev->dead, true);
		dev->rings_kept = true;
		dev_err(&dev->pdev->dev, "device does not reset: keeping the memory it may write; rebind the driver\n");
	} else {
		higpu_cancel_all(dev);
	}
	atomic_inc(&dev->epoch);
	return ret;
}

static void higpu_unquiesce(struct higpu_dev *dev)
{
	mutex_unlock(&dev->cpl_lock);
	up_write(&dev->hw_sem);
	higpu_wake_files(dev);
}

/*
 * higpu_recover - reset the device and start it again: every context is
 * gone, every open file fails with EIO from now on and must be reopened.
 * Used when the device went fatal and when a closing file's work did not
 * finish in time.
 */
int higpu_recover(struct higpu_dev *dev)
{
	int ret;

	if (READ_ONCE(dev->gone) || READ_ONCE(dev->dead))
		return -EIO;
	ret = higpu_quiesce(dev);
	if (!ret) {
		ret = higpu_hw_start(dev);
		if (ret) {
			WRITE_ONCE(dev->dead, true);
		} else {
			spin_lock(&dev->sq_lock);
			WRITE_ONCE(dev->live, true);
			spin_unlock(&dev->sq_lock);
			dev_warn(&dev->pdev->dev, "device reset (reset_count %u): open contexts are lost\n",
				 dev->reset_count);
		}
	}
	higpu_unquiesce(dev);
	return ret;
}

static void higpu_reset_work(struct work_struct *work)
{
	struct higpu_dev *dev = container_of(work, struct higpu_dev, reset_work);

	higpu_recover(dev);
}

/* ---- interrupts ---- */

static irqreturn_t higpu_cpl_irq(int irq, void *data)
{
	higpu_process_cpl(data);
	return IRQ_HANDLED;
}

static irqreturn_t higpu_ctrl_irq(int irq, void *data)
{
	struct higpu_dev *dev = data;
	u32 st = higpu_dev_status(dev);

	if ((st & HIGPU_DEV_FATAL) && READ_ONCE(dev->live)) {
		dev_err(&dev->pdev->dev, "device fatal, code %u; resetting\n",
			higpu_load(&dev->hdr->fatal_code));
		schedule_work(&dev->reset_work);
	}
	return IRQ_HANDLED;
}

static int higpu_request_irqs(struct higpu_dev *dev)
{
	struct pci_dev *pdev = dev->pdev;
	int ret;

	snprintf(dev->irq_names[HIGPU_IRQ_CTRL], sizeof(dev->irq_names[0]), "higpu%u-ctrl",
		 dev->gpu_id);
	snprintf(dev->irq_names[HIGPU_IRQ_CPL], sizeof(dev->irq_names[0]), "higpu%u-cpl",
		 dev->gpu_id);
	/* Threaded: completions unpin user pages, which may sleep. */
	ret = request_threaded_irq(pci_irq_vector(pdev, HIGPU_IRQ_CTRL), NULL, higpu_ctrl_irq,
				   IRQF_ONESHOT, dev->irq_names[HIGPU_IRQ_CTRL], dev);
	if (ret)
		return ret;
	ret = request_threaded_irq(pci_irq_vector(pdev, HIGPU_IRQ_CPL), NULL, higpu_cpl_irq,
				   IRQF_ONESHOT, dev->irq_names[HIGPU_IRQ_CPL], dev);
	if (ret) {
		free_irq(pci_irq_vector(pdev, HIGPU_IRQ_CTRL), dev);
		return ret;
	}
	return 0;
}

static void higpu_free_irqs(struct higpu_dev *dev)
{
	free_irq(pci_irq_vector(dev->pdev, HIGPU_IRQ_CPL), dev);
	free_irq(pci_irq_vector(dev->pdev, HIGPU_IRQ_CTRL), dev);
}

/* ---- PCI ---- */

/* higpu_check_bar2 - BAR2 holds a HiGPU header this driver speaks. */
static int higpu_check_bar2(struct pci_dev *pdev, void *bar2, size_t len)
{
	struct higpu_dev_hdr *h = bar2 + HIGPU_HDR_OFF;

	if (h->gpu_id >= HIGPU_MAX_GPUS) {
		dev_err(&pdev->dev, "BAR2 of %zu bytes, header says %u; gpu_id %u\n", len,
			le32_to_cpu(h->bar_size), h->gpu_id);
		return -ENODEV;
	}
	if (le32_to_cpu(h->ring_min) > HIGPU_RING_ENTRIES ||
	    le32_to_cpu(h->ring_max) < HIGPU_RING_ENTRIES ||
	    le32_to_cpu(h->num_vectors) < HIGPU_MIN_VECTORS) {
		dev_err(&pdev->dev, "rings of %u..%u entries, %u vectors: this driver needs %u entries and %u vectors\n",
			le32_to_cpu(h->ring_min), le32_to_cpu(h->ring_max),
			le32_to_cpu(h->num_vectors), HIGPU_RING_ENTRIES, HIGPU_MIN_VECTORS);
		return -ENODEV;
	}
	return 0;
}

/*
 * Probe in stages, each undone in reverse order by the error path and by
 * higpu_remove, its mirror image:
 *   1. pci_enable_device;
 *   2. pci_request_regions;
 *   3. BAR2 mapped, its header checked, DMA mask (1 to 3: hinic_ivshmem_open);
 *   4. higpu_alloc: struct higpu_dev (refcounted: open files hold it);
 *   5. higpu_map_bar0: the doorbell, and a reset of a device left live;
 *   6. higpu_alloc_rings: both rings in coherent memory (kept for good
 *      if the device did not reset at stage 8's teardown);
 *   7. higpu_alloc_vectors: the MSI-X vectors;
 *   8. higpu_up: interrupts, handshake (higpu_down resets the device
 *      and finishes all work in flight);
 *   9. higpu_register: /dev/higpu<gpu_id>, then the probe's message.
 */

static struct higpu_dev *higpu_alloc(struct pci_dev *pdev, void *bar2, size_t len)
{
	struct higpu_dev *dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	struct higpu_dev_hdr *h;

	if (!dev)
		return NULL;
	refcount_set(&dev->ref, 1);
	dev->pdev = pci_dev_get(pdev);
	dev->bar2 = bar2;
	dev->bar2_len = len;
	dev->hdr = h = bar2 + HIGPU_HDR_OFF;
	dev->gpu_id = READ_ONCE(h->gpu_id);
	dev->caps = le32_to_cpu(h->caps);
	dev->max_streams = clamp_t(u32, le32_to_cpu(h->max_streams), 1, HIGPU_MAX_STREAMS);
	dev->max_events = min_t(u32, le32_to_cpu(h->max_events), HIGPU_MAX_EVENTS);
	dev->max_sge = le32_to_cpu(h->max_sge);
	dev->alloc_align = max_t(u32, le32_to_cpu(h->alloc_align), HIGPU_ALLOC_ALIGN);
	spin_lock_init(&dev->sq_lock);
	init_waitqueue_head(&dev->sq_wq);
	mutex_init(&dev->cpl_lock);
	init_rwsem(&dev->hw_sem);
	atomic_set(&dev->epoch, 0);
	INIT_WORK(&dev->reset_work, higpu_reset_work);
	mutex_init(&dev->files_lock);
	INIT_LIST_HEAD(&dev->files);
	higpu_slots_init(dev);
	pci_set_drvdata(pdev, dev);
	return dev;
}

void higpu_dev_put(struct higpu_dev *dev)
{
	if (!refcount_dec_and_test(&dev->ref))
		return;
	pci_dev_put(dev->pdev);
	kfree(dev);
}

/* higpu_free - undo higpu_alloc: open files may keep the memory longer. */
static void higpu_free(struct higpu_dev *dev)
{
	pci_set_drvdata(dev->pdev, NULL);
	higpu_dev_put(dev);
}

static int higpu_map_bar0(struct higpu_dev *dev)
{
	return hinic_ivshmem_map_bar0(dev->pdev, &higpu_id, dev->bar2, &dev->bar0,
				      &dev->reset_count);
}

static void higpu_unmap_bar0(struct higpu_dev *dev)
{
	pci_iounmap(dev->pdev, dev->bar0);
}

static int higpu_alloc_rings(struct higpu_dev *dev)
{
	struct device *d = &dev->pdev->dev;

	/* dma_alloc_coherent returns page-aligned memory: HIGPU_RING_ALIGN holds. */
	dev->cmd_ring = dma_alloc_coherent(d, HIGPU_RING_ENTRIES * sizeof(struct higpu_cmd),
					   &dev->cmd_dma, GFP_KERNEL);
	if (!dev->cmd_ring)
		return -ENOMEM;
	dev->cpl_ring = dma_alloc_coherent(d, HIGPU_RING_ENTRIES * sizeof(struct higpu_cpl),
					   &dev->cpl_dma, GFP_KERNEL);
	if (!dev->cpl_ring) {
		dma_free_coherent(d, HIGPU_RING_ENTRIES * sizeof(struct higpu_cmd), dev->cmd_ring,
				  dev->cmd_dma);
		return -ENOMEM;
	}
	return 0;
}

static void higpu_free_rings(struct higpu_dev *dev)
{
	struct device *d = &dev->pdev->dev;

	if (dev->rings_kept) {
		dev_warn(d, "device did not reset; keeping its rings\n");
		return;
	}
	dma_free_coherent(d, HIGPU_RING_ENTRIES * sizeof(struct higpu_cpl), dev->cpl_ring,
			  dev->cpl_dma);
	dma_free_coherent(d, HIGPU_RING_ENTRIES * sizeof(struct higpu_cmd), dev->cmd_ring,
			  dev->cmd_dma);
}

static int higpu_alloc_vectors(struct higpu_dev *dev)
{
	int ret;

	ret = hinic_ivshmem_alloc_vectors(dev->pdev, HIGPU_NUM_IRQ, HIGPU_NUM_IRQ);
	if (ret < 0)
		return ret;
	dev->num_vectors = ret;
	return 0;
}

static void higpu_free_vectors(struct higpu_dev *dev)
{
	pci_free_irq_vectors(dev->pdev);
}

/*
 * higpu_down - undoes higpu_up: the device reset (all work in flight
 * finished with ECANCELED, or kept if it does not answer), then no
 * interrupts and no reset work.
 */
static void higpu_down(struct higpu_dev *dev)
{
	WRITE_ONCE(dev->gone, true);
	cancel_work_sync(&dev->reset_work);
	higpu_quiesce(dev);
	higpu_unquiesce(dev);
	higpu_free_irqs(dev);
	/* An interrupt thread may have queued the work again. */
	cancel_work_sync(&dev->reset_work);
}

static int higpu_up(struct higpu_dev *dev)
{
	int ret;

	ret = higpu_request_irqs(dev);
	if (ret)
		return ret;
	ret = higpu_hw_start(dev);
	if (ret) {
		if (higpu_hw_reset(dev))
			dev->rings_kept = true;
		higpu_free_irqs(dev);
		return ret;
	}
	spin_lock(&dev->sq_lock);
	WRITE_ONCE(dev->live, true);
	spin_unlock(&dev->sq_lock);
	return 0;
}

/* higpu_register - stage 9: the character device, then the news. */
static int higpu_register(struct higpu_dev *dev)
{
	int ret;

	ret = higpu_chr_register(dev);
	if (ret)
		return ret;
	dev_info(&dev->pdev->dev, "HiGPU %u \"%.*s\": ABI %u.%u, %llu MiB, caps %#x, %u MSI-X vectors\n",
		 dev->gpu_id, HIGPU_NAME_LEN, dev->hdr->name,
		 le16_to_cpu(dev->hdr->abi_major), le16_to_cpu(dev->hdr->abi_minor),
		 le64_to_cpu(dev->hdr->mem_size) >> 20, dev->caps, dev->num_vectors);
	return 0;
}

/*
 * The driver: stages 1 to 4 and, once struct higpu_dev exists, stages 5
 * to 9; a failed probe and higpu_remove undo them in reverse order.
 * Files still open at remove keep struct higpu_dev and get ENODEV; they
 * no longer touch the function.
 */
DEFINE_HINIC_IVSHMEM_DRIVER(higpu, HIGPU_DRV_NAME, struct higpu_dev, bar2,
	{ higpu_map_bar0, higpu_unmap_bar0 },
	{ higpu_alloc_rings, higpu_free_rings },
	{ higpu_alloc_vectors, higpu_free_vectors },
	{ higpu_up, higpu_down },
	{ higpu_register, higpu_chr_unregister });

MODULE_DESCRIPTION("HiGPU virtual GPU driver");
MODULE_AUTHOR("PacketFive");
MODULE_LICENSE("GPL");
