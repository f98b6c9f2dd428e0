/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the HiNIC guest drivers share about binding a QEMU
 * ivshmem-doorbell function served by a HiNIC backend: hicain_net (the
 * NIC, hicain_abi.h) and higpu (the GPU, higpu_abi.h).
 *
 * Both functions look alike to the PCI core: BAR0 holds the ivshmem
 * registers (the doorbell), BAR2 shared memory that starts with a device
 * header whose first words name the device (magic, ABI, identity), the
 * device interrupts through MSI-X. Each driver probes in stages that its
 * remove undoes in reverse order. Everything here is static inline or a
 * macro: each module has its own copy, and no object is linked into
 * both.
 */
#ifndef HINIC_IVSHMEM_H
#define HINIC_IVSHMEM_H

#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/io.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/pci.h>
#include <linux/types.h>

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

/* What a driver expects at the start of the BAR2 device header. */
struct hinic_ivshmem_id {
	const char *name;	/* in messages: "HiNIC", "HiGPU" */
	u32 magic;
	u16 abi_major;
	u16 vendor_id;
	u16 device_id;
};

static inline int __hinic_ivshmem_check_id(struct pci_dev *pdev,
					   const struct hinic_ivshmem_id *id,
					   const __le32 *magic, const __le16 *abi_major,
					   const __le16 *abi_minor, const __le16 *vendor_id,
					   const __le16 *device_id)
{
	u32 m = le32_to_cpu(READ_ONCE(*magic));

	if (m != id->magic) {
		dev_info(&pdev->dev, "ivshmem device without a %s header (magic %#x), leaving it\n",
			 id->name, m);
		return -ENODEV;
	}
	/* The magic is written last: the rest is valid once it is seen. */
	dma_rmb();
	if (le16_to_cpu(*abi_major) != id->abi_major ||
	    le16_to_cpu(*vendor_id) != id->vendor_id ||
	    le16_to_cpu(*device_id) != id->device_id) {
		dev_err(&pdev->dev, "%s ABI %u.%u, identity %04x:%04x: this driver speaks ABI %u\n",
			id->name, le16_to_cpu(*abi_major), le16_to_cpu(*abi_minor),
			le16_to_cpu(*vendor_id), le16_to_cpu(*device_id), id->abi_major);
		return -ENODEV;
	}
	return 0;
}

/*
 * hinic_ivshmem_check_id - the device header @h (struct hicain_dev_hdr
 * or struct higpu_dev_hdr: both start with these fields) is the device
 * @id names, in the ABI major this driver speaks; -ENODEV if not. Once
 * it returns 0 the rest of the header may be read.
 */
#define hinic_ivshmem_check_id(pdev, h, id) ({				\
	const typeof(*(h)) *__h = (h);						\
										\
	__hinic_ivshmem_check_id(pdev, id, &__h->magic, &__h->abi_major,	\
				 &__h->abi_minor, &__h->vendor_id,		\
				 &__h->device_id);				\
})

static inline int __hinic_ivshmem_wait_live(struct pci_dev *pdev, const __le32 *dev_status,
					    const __le32 *fatal_code, u32 live, u32 fatal,
					    unsigned int ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(ms);
	u32 st;

	for (;;) {
		st = le32_to_cpu(READ_ONCE(*dev_status));
		if (st & fatal) {
			dev_err(&pdev->dev, "device fatal during handshake, code %u\n",
				le32_to_cpu(READ_ONCE(*fatal_code)));
			return -EIO;
		}
		if (st & live)
			return 0;
		if (time_after(jiffies, deadline))
			break;
		usleep_range(500, 1000);
	}
	dev_err(&pdev->dev, "device did not go live (dev_status %#x)\n", st);
	return -ETIMEDOUT;
}

/*
 * hinic_ivshmem_wait_live - the end of the driver-ready handshake, once
 * driver_status says OK and the control doorbell rang: poll dev_status
 * of header @h (the device writes it; do not trust an interrupt to come)
 * until it has @live (0), @fatal (-EIO) or @ms passed (-ETIMEDOUT).
 */
#define hinic_ivshmem_wait_live(pdev, h, live, fatal, ms) ({			\
	const typeof(*(h)) *__h = (h);						\
										\
	__hinic_ivshmem_wait_live(pdev, &__h->dev_status, &__h->fatal_code,	\
				  live, fatal, ms);				\
})

/*
 * hinic_ivshmem_check_fn - whether BAR2, mapped at @bar2 (@len bytes),
 * holds a device header the driver speaks: 0, or -ENODEV to leave the
 * function to another driver.
 */
typedef int (*hinic_ivshmem_check_fn)(struct pci_dev *pdev, void *bar2, size_t len);

/*
 * hinic_ivshmem_open - probe's first stages: the function enabled, its
 * regions requested for @drv; BAR2 (at least @hdr_end bytes: up to the
 * end of the device header) mapped at *@bar2, *@len bytes, and @check'ed;
 * then, the device being ours, 64-bit DMA (it reads and writes guest RAM
 * at its DMA addresses) and bus mastering. BAR2 is RAM on the host
 * side, shared with the backend process. Undone by hinic_ivshmem_close.
 */
static inline int hinic_ivshmem_open(struct pci_dev *pdev, const char *drv, size_t hdr_end,
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
	if (!(pci_resource_flags(pdev, 2) & IORESOURCE_MEM) || *len < hdr_end)
		goto err_release_regions;
	ret = -ENOMEM;
	*bar2 = memremap(pci_resource_start(pdev, 2), *len, MEMREMAP_WB);
	if (!*bar2)
		goto err_release_regions;
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

#endif /* HINIC_IVSHMEM_H */
