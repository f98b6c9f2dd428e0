/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the HiNIC guest drivers share about binding a QEMU
 * ivshmem-doorbell function served by a HiNIC backend: hicain_net (the
 * NIC, hicain_abi.h) and higpu (the GPU, higpu_abi.h).
 *
 * Both functions look alike to the PCI core: BAR0 holds the ivshmem
 * registers (the doorbell), BAR2 shared memory that starts with a device
 * header whose first words name the device (magic, ABI, identity) and
 * which holds the same status and handshake block (hidev_abi.h), the
 * device interrupts through MSI-X. Each driver probes in stages that its
 * remove undoes in reverse order. Everything here is static inline or a
 * macro: each module has its own copy, and no object is linked into
 * both.
 */
#ifndef HIDEV_IVSHMEM_H
#define HIDEV_IVSHMEM_H

#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/io.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/pci.h>
#include <linux/types.h>

#include "hidev_abi.h"

/*
 * DEFINE_HINIC_STAGES - the stage runners of a driver whose probe sets
 * up, once its private state of type @type exists, a table of stages
 * that a failed probe and remove undo in reverse order. It defines
 * struct @name_stage (a setup and its teardown), @name_setup (all
 * stages in order; on a failure the ones done are undone, last first)
 * and @name_teardown (undo the first n stages, last first).
 */
#define DEFINE_HINIC_STAGES(name, type)						\
struct name##_stage {								\
	int (*setup)(type *obj);						\
	void (*teardown)(type *obj);						\
};										\
										\
static void name##_teardown(const struct name##_stage *stages,		\
			    unsigned int n, type *obj)				\
{										\
	while (n--)								\
		stages[n].teardown(obj);					\
}										\
										\
static int name##_setup(const struct name##_stage *stages,		\
			unsigned int n, type *obj)				\
{										\
	unsigned int i;								\
	int ret;								\
										\
	for (i = 0; i < n; i++) {						\
		ret = stages[i].setup(obj);					\
		if (ret) {							\
			name##_teardown(stages, i, obj);			\
			return ret;						\
		}								\
	}									\
	return 0;								\
}

/*
 * BAR0 of ivshmem-doorbell: the doorbell register takes (peer << 16) |
 * vector; the backend is peer 0.
 */
#define HINIC_IVSHMEM_DOORBELL		12
#define HINIC_IVSHMEM_BACKEND_PEER	0

static inline void hinic_ivshmem_doorbell(void __iomem *bar0, unsigned int vector)
{
	/* writel orders the preceding stores to BAR2 and RAM before it. */
	writel((HINIC_IVSHMEM_BACKEND_PEER << 16) | (vector & 0xffff),
	       bar0 + HINIC_IVSHMEM_DOORBELL);
}

/*
 * What a driver expects of the BAR2 device header (hidev_abi.h):
 * where it is, its identity, and the handshake's control doorbell and
 * time limit. HINIC_IVSHMEM_ID fills it from the ABI header's constants.
 */
struct hinic_ivshmem_id {
	const char *name;	/* in messages: "HiNIC", "HiGPU" */
	u32 magic;
	u16 abi_major;
	u16 abi_minor;
	u16 vendor_id;
	u16 device_id;
	size_t hdr_off;		/* of the header in BAR2 */
	size_t hdr_end;		/* BAR2 holds at least this much */
	unsigned int db_ctrl;	/* doorbell: driver_status moved */
	unsigned int handshake_ms;
};

/*
 * HINIC_IVSHMEM_ID - the hinic_ivshmem_id of the device whose ABI header
 * names its constants @abi_MAGIC, @abi_ABI_MAJOR, ... and whose header
 * is struct @hdr; the driver defines @abi_HANDSHAKE_MS.
 */
#define HINIC_IVSHMEM_ID(dev_name, abi, hdr) {					\
	.name		= dev_name,						\
	.magic		= abi##_MAGIC,						\
	.abi_major	= abi##_ABI_MAJOR,					\
	.abi_minor	= abi##_ABI_MINOR,					\
	.vendor_id	= abi##_VENDOR_ID,					\
	.device_id	= abi##_DEVICE_ID,					\
	.hdr_off	= abi##_HDR_OFF,					\
	.hdr_end	= abi##_HDR_OFF + sizeof(struct hdr) +			\
			  BUILD_BUG_ON_ZERO(offsetof(struct hdr, dev_status) !=	\
					    HINIC_DEV_STATUS_OFF),		\
	.db_ctrl	= abi##_DB_CTRL,					\
	.handshake_ms	= abi##_HANDSHAKE_MS,					\
}

/* The identity at the start of the device header in BAR2. */
static inline struct hinic_dev_id *hinic_ivshmem_hdr_id(void *bar2,
							const struct hinic_ivshmem_id *id)
{
	return bar2 + id->hdr_off;
}

/* The status and handshake block of the device header in BAR2. */
static inline struct hinic_dev_status *hinic_ivshmem_status(void *bar2,
							    const struct hinic_ivshmem_id *id)
{
	return bar2 + id->hdr_off + HINIC_DEV_STATUS_OFF;
}

static inline u32 hinic_ivshmem_load(const __le32 *p)
{
	return le32_to_cpu(READ_ONCE(*p));
}

static inline void hinic_ivshmem_store(__le32 *p, u32 v)
{
	WRITE_ONCE(*p, cpu_to_le32(v));
}

/*
 * hinic_ivshmem_check_id - the device header in BAR2 (@len bytes) is
 * the device @id names, in the ABI major this driver speaks, and says
 * BAR2 is no larger than it is; -ENODEV if not. Once it returns 0 the
 * rest of the header may be read.
 */
static inline int hinic_ivshmem_check_id(struct pci_dev *pdev, const struct hinic_ivshmem_id *id,
					 void *bar2, size_t len)
{
	const struct hinic_dev_id *h = hinic_ivshmem_hdr_id(bar2, id);
	u32 m = hinic_ivshmem_load(&h->magic);

	if (m != id->magic) {
		dev_info(&pdev->dev, "ivshmem device without a %s header (magic %#x), leaving it\n",
			 id->name, m);
		return -ENODEV;
	}
	/* The magic is written last: the rest is valid once it is seen. */
	dma_rmb();
	if (le16_to_cpu(h->abi_major) != id->abi_major ||
	    le16_to_cpu(h->vendor_id) != id->vendor_id ||
	    le16_to_cpu(h->device_id) != id->device_id) {
		dev_err(&pdev->dev, "%s ABI %u.%u, identity %04x:%04x: this driver speaks ABI %u\n",
			id->name, le16_to_cpu(h->abi_major), le16_to_cpu(h->abi_minor),
			le16_to_cpu(h->vendor_id), le16_to_cpu(h->device_id), id->abi_major);
		return -ENODEV;
	}
	if (le32_to_cpu(h->bar_size) > len) {
		dev_err(&pdev->dev, "BAR2 of %zu bytes, header says %u\n", len,
			le32_to_cpu(h->bar_size));
		return -ENODEV;
	}
	return 0;
}

/*
 * hinic_ivshmem_start - the driver-ready handshake, once the driver's
 * own header fields are written, MSI-X is enabled and the handlers are
 * installed (the device raises its control vector as soon as it goes
 * live): driver_abi, then driver_status = OK | MSIX_ON, then the control
 * doorbell. dev_status is polled (the device writes it; do not trust an
 * interrupt to come) until it has LIVE (0), FATAL (-EIO) or the
 * handshake time passed (-ETIMEDOUT).
 */
static inline int hinic_ivshmem_start(struct pci_dev *pdev, const struct hinic_ivshmem_id *id,
				      void *bar2, void __iomem *bar0)
{
	struct hinic_dev_status *s = hinic_ivshmem_status(bar2, id);
	unsigned long deadline;
	u32 st;

	hinic_ivshmem_store(&s->driver_abi, id->abi_major << 16 | id->abi_minor);
	dma_wmb();
	hinic_ivshmem_store(&s->driver_status, HINIC_DRV_OK | HINIC_DRV_MSIX_ON);
	hinic_ivshmem_doorbell(bar0, id->db_ctrl);

	deadline = jiffies + msecs_to_jiffies(id->handshake_ms);
	for (;;) {
		st = hinic_ivshmem_load(&s->dev_status);
		if (st & HINIC_DEV_FATAL) {
			dev_err(&pdev->dev, "device fatal during handshake, code %u\n",
				hinic_ivshmem_load(&s->fatal_code));
			return -EIO;
		}
		if (st & HINIC_DEV_LIVE)
			return 0;
		if (time_after(jiffies, deadline))
			break;
		usleep_range(500, 1000);
	}
	dev_err(&pdev->dev, "device did not go live (dev_status %#x)\n", st);
	return -ETIMEDOUT;
}

/*
 * hinic_ivshmem_reset - ask the device to forget everything of this
 * guest: driver_status = RESET alone, then the control doorbell. The
 * device drops what it held, rewrites the header as at start and
 * stores reset_count + 1 before the magic, which it writes last;
 * seeing both, with READY and not LIVE, means the header is complete
 * again, and *@reset_count becomes that count. -ENODEV as soon as
 * *@dead (when not NULL) says the device is gone, -ETIMEDOUT after the
 * handshake time. The device raises no interrupt until the next
 * hinic_ivshmem_start.
 */
static inline int hinic_ivshmem_reset(struct pci_dev *pdev, const struct hinic_ivshmem_id *id,
				      void *bar2, void __iomem *bar0, const bool *dead,
				      u32 *reset_count)
{
	const struct hinic_dev_id *h = hinic_ivshmem_hdr_id(bar2, id);
	struct hinic_dev_status *s = hinic_ivshmem_status(bar2, id);
	u32 old = hinic_ivshmem_load(&s->reset_count);
	unsigned long deadline;

	if (dead && READ_ONCE(*dead))
		return -ENODEV;
	hinic_ivshmem_store(&s->driver_status, HINIC_DRV_RESET);
	hinic_ivshmem_doorbell(bar0, id->db_ctrl);

	deadline = jiffies + msecs_to_jiffies(id->handshake_ms);
	while (hinic_ivshmem_load(&s->reset_count) != old + 1 ||
	       hinic_ivshmem_load(&h->magic) != id->magic ||
	       (hinic_ivshmem_load(&s->dev_status) & (HINIC_DEV_READY | HINIC_DEV_LIVE)) !=
	       HINIC_DEV_READY) {
		if (dead && READ_ONCE(*dead))
			return -ENODEV;
		if (time_after(jiffies, deadline)) {
			dev_err(&pdev->dev, "device reset timed out\n");
			return -ETIMEDOUT;
		}
		usleep_range(500, 1000);
	}
	dma_rmb();
	*reset_count = old + 1;
	return 0;
}

/*
 * hinic_ivshmem_map_bar0 - the doorbell register at *@bar0, and
 * *@reset_count as the device says. A device a previous driver left
 * live, or that went fatal, is reset first: its rings are not ours.
 * Undone by pci_iounmap.
 */
static inline int hinic_ivshmem_map_bar0(struct pci_dev *pdev, const struct hinic_ivshmem_id *id,
					 void *bar2, void __iomem **bar0, u32 *reset_count)
{
	struct hinic_dev_status *s = hinic_ivshmem_status(bar2, id);
	int ret;

	*bar0 = pci_iomap(pdev, 0, 0);
	if (!*bar0)
		return -ENOMEM;
	*reset_count = hinic_ivshmem_load(&s->reset_count);
	if (!(hinic_ivshmem_load(&s->dev_status) & (HINIC_DEV_LIVE | HINIC_DEV_FATAL)))
		return 0;
	ret = hinic_ivshmem_reset(pdev, id, bar2, *bar0, NULL, reset_count);
	if (ret)
		pci_iounmap(pdev, *bar0);
	return ret;
}

/*
 * hinic_ivshmem_check_fn - whether BAR2, mapped at @bar2 (@len bytes),
 * holds a device header the driver drives, its identity already
 * checked: 0, or -ENODEV to leave the function to another driver.
 */
typedef int (*hinic_ivshmem_check_fn)(struct pci_dev *pdev, void *bar2, size_t len);

/*
 * hinic_ivshmem_open - probe's first stages: the function enabled, its
 * regions requested for @drv; BAR2 (at least up to the end of the
 * device header) mapped at *@bar2, *@len bytes, and its header checked
 * against @id and by @check; then, the device being ours, 64-bit DMA
 * (it reads and writes guest RAM at its DMA addresses) and bus
 * mastering. BAR2 is RAM on the host side, shared with the backend
 * process. Undone by hinic_ivshmem_close.
 */
static inline int hinic_ivshmem_open(struct pci_dev *pdev, const char *drv,
				     const struct hinic_ivshmem_id *id,
				     hinic_ivshmem_check_fn check, void **bar2, size_t *len)
{
	int ret;

	ret = pci_enable_device(pdev);
	if (ret)
		return ret;
	ret = pci_request_regions(pdev, drv);
	if (ret)
		goto err_disable;
	*len = pci_resource_len(pdev, 2);
	ret = -ENODEV;
	if (!(pci_resource_flags(pdev, 2) & IORESOURCE_MEM) || *len < id->hdr_end)
		goto err_release_regions;
	ret = -ENOMEM;
	*bar2 = memremap(pci_resource_start(pdev, 2), *len, MEMREMAP_WB);
	if (!*bar2)
		goto err_release_regions;
	ret = hinic_ivshmem_check_id(pdev, id, *bar2, *len);
	if (!ret)
		ret = check(pdev, *bar2, *len);
	if (ret)
		goto err_unmap;
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret) {
		dev_err(&pdev->dev, "no 64-bit DMA\n");
		goto err_unmap;
	}
	pci_set_master(pdev);
	return 0;

err_unmap:
	memunmap(*bar2);
err_release_regions:
	pci_release_regions(pdev);
err_disable:
	pci_disable_device(pdev);
	return ret;
}

static inline void hinic_ivshmem_close(struct pci_dev *pdev, void *bar2)
{
	memunmap(bar2);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
}

/*
 * hinic_ivshmem_alloc_vectors - @min to @max MSI-X vectors: how many,
 * or a negative errno. QEMU's ivshmem has as many as its vectors=.
 */
static inline int hinic_ivshmem_alloc_vectors(struct pci_dev *pdev, unsigned int min,
					      unsigned int max)
{
	int ret;

	ret = pci_alloc_irq_vectors(pdev, min, max, PCI_IRQ_MSIX);
	if (ret < 0)
		dev_err(&pdev->dev, "MSI-X: %d (QEMU's vectors= must be at least %u)\n", ret,
			min);
	return ret;
}

/* QEMU's ivshmem-doorbell function, which both devices are. */
#define HINIC_IVSHMEM_VENDOR	0x1af4	/* Red Hat / Qumranet */
#define HINIC_IVSHMEM_DEVICE	0x1110	/* ivshmem */

/*
 * DEFINE_HINIC_IVSHMEM_DRIVER - the PCI driver @drv_name of ivshmem
 * functions whose BAR2 holds the device header @pfx_id describes,
 * with probe and remove as mirror images. Like DEFINE_SHOW_ATTRIBUTE
 * it builds on what the driver defined before it, for its private
 * state of type @type:
 *   @pfx_id: struct hinic_ivshmem_id (HINIC_IVSHMEM_ID);
 *   @pfx_check_bar2: a hinic_ivshmem_check_fn, the driver's own checks;
 *   @pfx_alloc(pdev, bar2, len): the private state, with drvdata set
 *     to it, or NULL when out of memory; @pfx_free undoes it.
 * @bar2 is the member of @type that holds where BAR2 is mapped; the
 * rest, { setup, teardown } pairs of DEFINE_HINIC_STAGES(pfx, type),
 * are the stages that follow once the state exists, @pfx_stages.
 */
#define DEFINE_HINIC_IVSHMEM_DRIVER(pfx, drv_name, type, bar2, ...)		\
DEFINE_HINIC_STAGES(pfx, type)							\
										\
static const struct pfx##_stage pfx##_stages[] = { __VA_ARGS__ };		\
										\
static int pfx##_probe(struct pci_dev *pdev, const struct pci_device_id *pci_id) \
{										\
	void *map;								\
	size_t len;								\
	type *obj;								\
	int ret;								\
										\
	ret = hinic_ivshmem_open(pdev, drv_name, &pfx##_id, pfx##_check_bar2,\
				 &map, &len);					\
	if (ret)								\
		return ret;							\
	obj = pfx##_alloc(pdev, map, len);					\
	if (!obj) {								\
		ret = -ENOMEM;							\
		goto err_close;							\
	}									\
	ret = pfx##_setup(pfx##_stages, ARRAY_SIZE(pfx##_stages), obj);	\
	if (ret)								\
		goto err_free;							\
	return 0;								\
										\
err_free:									\
	pfx##_free(obj);							\
err_close:									\
	hinic_ivshmem_close(pdev, map);						\
	return ret;								\
}										\
										\
static void pfx##_remove(struct pci_dev *pdev)				\
{										\
	type *obj = pci_get_drvdata(pdev);					\
	void *map = obj->bar2;							\
										\
	pfx##_teardown(pfx##_stages, ARRAY_SIZE(pfx##_stages), obj);	\
	pfx##_free(obj);							\
	hinic_ivshmem_close(pdev, map);						\
}										\
										\
static const struct pci_device_id pfx##_pci_ids[] = {			\
	{ PCI_DEVICE(HINIC_IVSHMEM_VENDOR, HINIC_IVSHMEM_DEVICE) },		\
	{ }									\
};										\
MODULE_DEVICE_TABLE(pci, pfx##_pci_ids);					\
										\
static struct pci_driver pfx##_pci_driver = {				\
	.name		= drv_name,						\
	.id_table	= pfx##_pci_ids,					\
	.probe		= pfx##_probe,						\
	.remove		= pfx##_remove,					\
};										\
module_pci_driver(pfx##_pci_driver)

#endif /* HIDEV_IVSHMEM_H */
