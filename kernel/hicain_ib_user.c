// SPDX-License-Identifier: GPL-2.0
/*
 * hicain_ib_user.c - user contexts and mapped queues: the doorbell page,
 * the memory of user queues that processes map (rdma_user_mmap_entry),
 * mmap and mmap_free.
 */

#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/pci.h>
#include <linux/vmalloc.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>
#define UVERBS_MODULE_NAME hicain_ib
#include <rdma/uverbs_named_ioctl.h>

#include "hicain_ib.h"

/* ---- mapped queues ---- */

/*
 * hicain_db_page - whether processes may map BAR0's page to ring the
 * doorbell without a system call. The ivshmem register BAR is 256 bytes
 * (IntrMask, IntrStatus, IVPosition, Doorbell); a process that maps it
 * can ring any vector of any peer, which makes the backend rescan
 * indices it never trusts (or raises this guest's own vectors, whose
 * handlers reread state): spurious work, as a process could cause with
 * system calls, and nothing else. IntrMask and IntrStatus drive INTx
 * only, which MSI-X disables. The page must hold nothing but that BAR:
 * BAR0 must start a page, and no other device's BAR or ROM may lie in
 * it (a firmware that packs small BARs into one page gets the system
 * call path).
 */
bool hicain_db_page(struct pci_dev *pdev)
{
	resource_size_t start = pci_resource_start(pdev, 0);
	resource_size_t end = start + PAGE_SIZE - 1;
	struct pci_dev *d = NULL;
	int i;

	if (!(pci_resource_flags(pdev, 0) & IORESOURCE_MEM) || !start ||
	    (start & ~PAGE_MASK) || pci_resource_len(pdev, 0) < HICAIN_BAR0_DOORBELL + 4)
		return false;
	for_each_pci_dev(d) {
		for (i = 0; i <= PCI_ROM_RESOURCE; i++) {
			const struct resource *r = &d->resource[i];

			if ((d == pdev && i == 0) || !(r->flags & IORESOURCE_MEM) ||
			    (r->flags & IORESOURCE_UNSET) || !r->start || r->end < r->start)
				continue;
			if (r->start <= end && r->end >= start) {
				pci_dev_put(d);
				return false;
			}
		}
	}
	return true;
}

static struct hicain_ucontext *to_huctx(struct ib_udata *udata)
{
	return rdma_udata_to_drv_context(udata, struct hicain_ucontext, ibuc);
}

/* The largest queue memory alloc_pages_exact hands out. */
#define HICAIN_UQ_MAX	(PAGE_SIZE << (MAX_ORDER - 1))

static void hicain_uq_unmap_pages(struct device *dma_dev, struct hicain_uq *uq, size_t n)
{
	while (n--)
		dma_unmap_page(dma_dev, uq->pg_dma[n], PAGE_SIZE, DMA_BIDIRECTIONAL);
	kvfree(uq->pg_dma);
	uq->pg_dma = NULL;
}

/*
 * hicain_uq_alloc_paged - a CQ ring of ring_bytes (whole pages) too large
 * for alloc_pages_exact: vmalloc_user pages, each DMA-mapped, a page
 * table the device reads once at CREATE_CQ (HICAIN_CQ_F_PAGED), and the
 * dbrec on a page of its own after the ring. Returns 1 when the device
 * or the sizes do not allow it.
 */
static int hicain_uq_alloc_paged(struct hicain_ibdev *hidev, struct ib_udata *udata,
				 struct hicain_uq *uq, size_t ring_bytes)
{
	struct device *dma_dev = hicain_dma_dev(hidev);
	size_t nring = ring_bytes / PAGE_SIZE, n = nring + 1, i;
	struct hicain_mmap_entry *e;
	int ret = -ENOMEM;

	if (PAGE_SIZE != HICAIN_CQ_PAGE_SIZE || ring_bytes % PAGE_SIZE ||
	    nring > HICAIN_CQ_MAX_PAGES || !hicain_abi_minor_at_least(hidev, 9))
		return 1;
	e = kzalloc(sizeof(*e), GFP_KERNEL);
	if (!e)
		return -ENOMEM;
	uq->size = n * PAGE_SIZE;
	uq->dbrec_off = ring_bytes;
	uq->cpu = vmalloc_user(uq->size);	/* zeroed */
	if (!uq->cpu)
		goto err_entry;
	uq->pg_dma = kvcalloc(n, sizeof(*uq->pg_dma), GFP_KERNEL);
	if (!uq->pg_dma)
		goto err_vfree;
	for (i = 0; i < n; i++) {
		uq->pg_dma[i] = dma_map_page(dma_dev, vmalloc_to_page(uq->cpu + i * PAGE_SIZE), 0,
					     PAGE_SIZE, DMA_BIDIRECTIONAL);
		if (dma_mapping_error(dma_dev, uq->pg_dma[i])) {
			hicain_uq_unmap_pages(dma_dev, uq, i);
			goto err_vfree;
		}
	}
	uq->tbl_size = nring * sizeof(*uq->tbl);
	uq->tbl = dma_alloc_coherent(dma_dev, uq->tbl_size, &uq->tbl_dma, GFP_KERNEL);
	if (!uq->tbl)
		goto err_unmap;
	for (i = 0; i < nring; i++)
		uq->tbl[i] = cpu_to_le64(uq->pg_dma[i]);
	uq->dma = uq->tbl_dma;
	uq->dbrec_dma = uq->pg_dma[nring];
	e->type = HICAIN_MMAP_QUEUE;
	e->cpu = uq->cpu;
	e->size = uq->size;
	ret = rdma_user_mmap_entry_insert(&to_huctx(udata)->ibuc, &e->rdma, uq->size);
	if (ret)
		goto err_tbl;
	uq->entry = e;
	return 0;

err_tbl:
	dma_free_coherent(dma_dev, uq->tbl_size, uq->tbl, uq->tbl_dma);
	uq->tbl = NULL;
err_unmap:
	hicain_uq_unmap_pages(dma_dev, uq, n);
err_vfree:
	vfree(uq->cpu);
	uq->cpu = NULL;
err_entry:
	kfree(e);
	return ret;
}

/*
 * hicain_uq_alloc - pages for a user queue of ring_bytes and a dbrec of
 * dbrec_bytes, and the mmap entry the process maps them through.
 * Returns 1 when the queue cannot be mapped (the context has no
 * doorbell page, or the queue is larger than HICAIN_UQ_MAX and not a
 * paged CQ ring): it then takes the kernel path.
 */
int hicain_uq_alloc(struct hicain_ibdev *hidev, struct ib_udata *udata,
		    struct hicain_uq *uq, size_t ring_bytes, size_t dbrec_bytes, bool paged)
{
	struct device *dma_dev = hicain_dma_dev(hidev);
	struct hicain_mmap_entry *e;
	size_t off = ALIGN(ring_bytes, 64);
	int ret;

	memset(uq, 0, sizeof(*uq));
	if (!udata || !to_huctx(udata)->db)
		return 1;
	if (PAGE_ALIGN(off + dbrec_bytes) > HICAIN_UQ_MAX)
		return paged ? hicain_uq_alloc_paged(hidev, udata, uq, ring_bytes) : 1;
	uq->size = PAGE_ALIGN(off + dbrec_bytes);
	uq->dbrec_off = off;
	e = kzalloc(sizeof(*e), GFP_KERNEL);
	if (!e)
		return -ENOMEM;
	uq->cpu = alloc_pages_exact(uq->size, GFP_KERNEL | __GFP_ZERO);
	if (!uq->cpu) {
		kfree(e);
		return -ENOMEM;
	}
	/* Cache-coherent on x86: no dma_sync is needed around the device's
	 * and the process's accesses.
	 */
	uq->dma = dma_map_single(dma_dev, uq->cpu, uq->size, DMA_BIDIRECTIONAL);
	if (dma_mapping_error(dma_dev, uq->dma)) {
		ret = -ENOMEM;
		goto err_free;
	}
	uq->dbrec_dma = uq->dma + off;
	e->type = HICAIN_MMAP_QUEUE;
	e->cpu = uq->cpu;
	e->size = uq->size;
	ret = rdma_user_mmap_entry_insert(&to_huctx(udata)->ibuc, &e->rdma, uq->size);
	if (ret) {
		dma_unmap_single(dma_dev, uq->dma, uq->size, DMA_BIDIRECTIONAL);
		goto err_free;
	}
	uq->entry = e;
	return 0;

err_free:
	free_pages_exact(uq->cpu, uq->size);
	kfree(e);
	uq->cpu = NULL;
	return ret;
}

/*
 * hicain_uq_free - after the device destroyed the queue: no more DMA,
 * and no new mapping. mmap_free frees the pages once no mmap() holds the
 * entry; mappings that remain keep their pages.
 */
void hicain_uq_free(struct hicain_ibdev *hidev, struct hicain_uq *uq)
{
	struct device *dma_dev = hicain_dma_dev(hidev);

	if (!uq->entry)
		return;
	if (uq->tbl) {
		dma_free_coherent(dma_dev, uq->tbl_size, uq->tbl, uq->tbl_dma);
		hicain_uq_unmap_pages(dma_dev, uq, uq->size / PAGE_SIZE);
		uq->tbl = NULL;
	} else {
		dma_unmap_single(dma_dev, uq->dma, uq->size, DMA_BIDIRECTIONAL);
	}
	rdma_user_mmap_entry_remove(&uq->entry->rdma);
	uq->entry = NULL;
	uq->cpu = NULL;
}

/*
 * hicain_uq_keep - instead of hicain_uq_free while the device may still
 * use the queue (hicain_admin_lost): no new mapping, but the pages, their
 * DMA mappings and page table stay, never freed. Returns their size.
 */
size_t hicain_uq_keep(struct hicain_uq *uq)
{
	size_t bytes = uq->size;

	if (!uq->entry)
		return 0;
	if (uq->tbl)
		bytes += uq->tbl_size;
	uq->entry->kept = true;
	rdma_user_mmap_entry_remove(&uq->entry->rdma);
	uq->entry = NULL;
	uq->cpu = NULL;
	uq->tbl = NULL;
	return bytes;
}

void hicain_uq_resp(const struct hicain_uq *uq, u32 depth, u32 stride,
		    struct hicain_ib_queue *q)
{
	if (!uq->entry)
		return;		/* not mapped: mmap_key 0 */
	q->mmap_key = rdma_user_mmap_get_offset(&uq->entry->rdma);
	q->mmap_len = uq->size;
	q->depth = depth;
	q->stride = stride;
	q->dbrec_off = uq->dbrec_off;
}

void hicain_mmap_free(struct rdma_user_mmap_entry *re)
{
	struct hicain_mmap_entry *e = container_of(re, struct hicain_mmap_entry, rdma);

	if (e->type == HICAIN_MMAP_QUEUE && !e->kept) {
		if (is_vmalloc_addr(e->cpu))
			vfree(e->cpu);		/* a paged CQ ring */
		else
			free_pages_exact(e->cpu, e->size);
	}
	kfree(e);
}

/*
 * hicain_mmap - map an entry of the context: the doorbell page uncached
 * (rdma_user_mmap_io, which uverbs zaps when it disassociates the
 * context), a queue's pages as they are. No mapping is executable, none
 * goes to a child on fork (VM_DONTCOPY, as MADV_DONTFORK; VM_IO refuses
 * MADV_DOFORK and get_user_pages), none grows.
 */
int hicain_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *re;
	struct hicain_mmap_entry *e;
	unsigned long va;
	size_t i;
	int ret = 0;

	if (vma->vm_flags & VM_EXEC)
		return -EPERM;
	re = rdma_user_mmap_entry_get(ibuc, vma);	/* VM_SHARED, exact length */
	if (!re)
		return -EINVAL;
	e = container_of(re, struct hicain_mmap_entry, rdma);
	vma->vm_flags &= ~VM_MAYEXEC;
	vma->vm_flags |= VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP | VM_IO;
	if (e->type == HICAIN_MMAP_DB) {
		ret = rdma_user_mmap_io(ibuc, vma, e->pfn, PAGE_SIZE,
					pgprot_noncached(vma->vm_page_prot), re);
	} else {
		for (i = 0, va = vma->vm_start; va < vma->vm_end && !ret; va += PAGE_SIZE, i++) {
			void *p = e->cpu + i * PAGE_SIZE;

			ret = vm_insert_page(vma, va, is_vmalloc_addr(p) ? vmalloc_to_page(p) : virt_to_page(p));
		}
	}
	rdma_user_mmap_entry_put(re);
	return ret;
}

/* ---- user contexts ---- */

/*
 * hicain_alloc_ucontext - the device's limits, and the doorbell page of
 * the context when its queues can be mapped: the BAR layout allows it
 * (db_mappable) and the device counts CQ events (ABI 1.7), which the
 * interrupt needs for CQs a process arms itself.
 */
/* hicain_ucontext_resp - what a context's process learns of it. */
static void hicain_ucontext_resp(struct hicain_ibdev *hidev, struct hicain_ucontext *uctx,
				 struct hicain_ib_alloc_ucontext_resp *resp)
{
	struct hicain_dev_hdr *h = hidev->hdev->hdr;
	u64 key;

	memset(resp, 0, sizeof(*resp));
	resp->dev_caps = le32_to_cpu(READ_ONCE(h->caps));
	resp->max_qp_wr = le32_to_cpu(READ_ONCE(h->max_qp_wr));
	resp->max_sge = le32_to_cpu(READ_ONCE(h->max_sge));
	resp->max_inline = min_t(u32, le32_to_cpu(READ_ONCE(h->max_inline)), HICAIN_MAX_INLINE);
	if (!uctx->db)
		return;
	key = rdma_user_mmap_get_offset(&uctx->db->rdma);
	resp->flags = HICAIN_UCTX_MAPPED;
	resp->db_off = HICAIN_BAR0_DOORBELL;
	resp->db_qp = (HICAIN_BACKEND_PEER << 16) | HICAIN_DB_QP;
	resp->db_cq = (HICAIN_BACKEND_PEER << 16) | HICAIN_DB_CQ;
	resp->db_mmap_key_lo = lower_32_bits(key);
	resp->db_mmap_key_hi = upper_32_bits(key);
	resp->db_mmap_len = PAGE_SIZE;
}

int hicain_alloc_ucontext(struct ib_ucontext *ibuc, struct ib_udata *udata)
{
	struct hicain_ibdev *hidev = to_hidev(ibuc->device);
	struct hicain_ucontext *uctx = container_of(ibuc, struct hicain_ucontext, ibuc);
	struct hicain_ib_alloc_ucontext_resp resp;
	struct hicain_mmap_entry *e;
	int ret;

	if (hidev->db_mappable && hicain_abi_minor_at_least(hidev, 7)) {
		e = kzalloc(sizeof(*e), GFP_KERNEL);
		if (!e)
			return -ENOMEM;
		e->type = HICAIN_MMAP_DB;
		e->pfn = hidev->db_pfn;
		ret = rdma_user_mmap_entry_insert(ibuc, &e->rdma, PAGE_SIZE);
		if (ret) {
			kfree(e);
			return ret;
		}
		uctx->db = e;
	}
	hicain_ucontext_resp(hidev, uctx, &resp);
	ret = hicain_udata_resp(udata, &resp, sizeof(resp));
	if (ret && uctx->db) {
		rdma_user_mmap_entry_remove(&uctx->db->rdma);
		uctx->db = NULL;
	}
	return ret;
}

void hicain_dealloc_ucontext(struct ib_ucontext *ibuc)
{
	struct hicain_ucontext *uctx = container_of(ibuc, struct hicain_ucontext, ibuc);

	/* Every object of the context was destroyed by uverbs before; a
	 * doorbell mapping still open keeps the entry until it closes.
	 */
	if (uctx->db)
		rdma_user_mmap_entry_remove(&uctx->db->rdma);
}

/*
 * hicain_disassociate_ucontext - the device goes away (the function is
 * removed, or hicain_ib unloaded) while a process holds a context. With
 * this op ib_uverbs does not wait for the process to close its files:
 * it zaps every mapping the context handed out (rdma_user_mmap_entry,
 * the doorbell page included), destroys the context's objects through
 * the driver's destroy verbs and calls this, then hicain_dealloc_ucontext.
 * The process sees IB_EVENT_DEVICE_FATAL, and EIO from every later verb
 * but the destroys, as after a hardware reset; it must open the device
 * again. Nothing is left for the driver to do here, as in mlx5.
 */
void hicain_disassociate_ucontext(struct ib_ucontext *ibuc)
{
}

/* ---- importing (ibv_import_device, ibv_import_pd) ---- */

/*
 * hicain_query_ucontext - QUERY_CONTEXT of an imported context: the
 * response its creator had, which names the same doorbell page.
 */
int hicain_query_ucontext(struct ib_ucontext *ibuc, struct uverbs_attr_bundle *attrs)
{
	struct hicain_ucontext *uctx = container_of(ibuc, struct hicain_ucontext, ibuc);
	struct hicain_ib_alloc_ucontext_resp resp;

	if (!uverbs_attr_is_valid(attrs, HICAIN_IB_ATTR_QUERY_CONTEXT_RESP_UCTX))
		return 0;
	hicain_ucontext_resp(to_hidev(ibuc->device), uctx, &resp);
	return uverbs_copy_to_struct_or_zero(attrs, HICAIN_IB_ATTR_QUERY_CONTEXT_RESP_UCTX,
					     &resp, sizeof(resp));
}

ADD_UVERBS_ATTRIBUTES_SIMPLE(hicain_ib_query_context, UVERBS_OBJECT_DEVICE,
			     UVERBS_METHOD_QUERY_CONTEXT,
			     UVERBS_ATTR_PTR_OUT(HICAIN_IB_ATTR_QUERY_CONTEXT_RESP_UCTX,
						 UVERBS_ATTR_STRUCT(struct hicain_ib_alloc_ucontext_resp,
								    reserved),
						 UA_OPTIONAL));

/* PD_QUERY: the device's number of a PD the caller's file holds. */
static int UVERBS_HANDLER(HICAIN_IB_METHOD_PD_QUERY)(struct uverbs_attr_bundle *attrs)
{
	struct ib_pd *pd = uverbs_attr_get_obj(attrs, HICAIN_IB_ATTR_QUERY_PD_HANDLE);
	u32 pdn;

	if (IS_ERR(pd))
		return PTR_ERR(pd);
	pdn = to_hpd(pd)->pdn;
	return uverbs_copy_to(attrs, HICAIN_IB_ATTR_QUERY_PD_RESP_PDN, &pdn, sizeof(pdn));
}

DECLARE_UVERBS_NAMED_METHOD(HICAIN_IB_METHOD_PD_QUERY,
			    UVERBS_ATTR_IDR(HICAIN_IB_ATTR_QUERY_PD_HANDLE, UVERBS_OBJECT_PD,
					    UVERBS_ACCESS_READ, UA_MANDATORY),
			    UVERBS_ATTR_PTR_OUT(HICAIN_IB_ATTR_QUERY_PD_RESP_PDN,
						UVERBS_ATTR_TYPE(u32), UA_MANDATORY));

ADD_UVERBS_METHODS(hicain_ib_pd, UVERBS_OBJECT_PD, &UVERBS_METHOD(HICAIN_IB_METHOD_PD_QUERY));

/*
 * QUERY_CLOCK: the device clock now, which completions are stamped with
 * (ibv_query_rt_values_ex). One admin command; the answer is in the CQE.
 */
static int UVERBS_HANDLER(HICAIN_IB_METHOD_QUERY_CLOCK)(struct uverbs_attr_bundle *attrs)
{
	struct ib_ucontext *ibuc = ib_uverbs_get_ucontext(attrs);
	struct hicain_admin_cqe cqe;
	struct hicain_clock clk;
	struct hicain_ibdev *hidev;
	u64 ns;
	int ret;

	if (IS_ERR(ibuc))
		return PTR_ERR(ibuc);
	hidev = to_hidev(ibuc->device);
	if (!hicain_abi_minor_at_least(hidev, 17))
		return -EOPNOTSUPP;
	ret = hicain_admin_handle(hidev, HICAIN_CMD_QUERY_CLOCK, 0, &cqe);
	if (ret)
		return ret;
	BUILD_BUG_ON(sizeof(clk) > sizeof(cqe.out));
	memcpy(&clk, cqe.out, sizeof(clk));
	ns = le64_to_cpu(clk.realtime_ns);
	return uverbs_copy_to(attrs, HICAIN_IB_ATTR_QUERY_CLOCK_NS, &ns, sizeof(ns));
}

DECLARE_UVERBS_NAMED_METHOD(HICAIN_IB_METHOD_QUERY_CLOCK,
			    UVERBS_ATTR_PTR_OUT(HICAIN_IB_ATTR_QUERY_CLOCK_NS,
						UVERBS_ATTR_TYPE(u64), UA_MANDATORY));

ADD_UVERBS_METHODS(hicain_ib_device, UVERBS_OBJECT_DEVICE,
		   &UVERBS_METHOD(HICAIN_IB_METHOD_QUERY_CLOCK));

const struct uapi_definition hicain_ib_uapi_defs[] = {
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DEVICE, &hicain_ib_query_context),
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_DEVICE, &hicain_ib_device),
	UAPI_DEF_CHAIN_OBJ_TREE(UVERBS_OBJECT_PD, &hicain_ib_pd),
	{},
};
