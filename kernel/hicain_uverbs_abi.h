/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * hicain_uverbs_abi.h - the private udata of the hicain verbs driver:
 * what hicain_ib.ko and the libibverbs provider (rdma-core/providers/
 * hicain) exchange through uverbs beyond the core command structs.
 *
 * Included by the kernel module and by the provider alike. Every struct
 * has explicit padding, a fixed size and only 32-bit members: uverbs puts
 * the driver bytes directly after the core response (offset 4 for
 * ALLOC_PD, 8 for GET_CONTEXT), so a member that needs 8-byte alignment
 * would open a hole on the provider side that the kernel does not see.
 */
#ifndef HICAIN_UVERBS_ABI_H
#define HICAIN_UVERBS_ABI_H

#include <linux/types.h>

/*
 * ops.uverbs_abi_ver of the kernel driver; the provider accepts exactly
 * this version (match_min/max_abi_version). Bump it on any change that
 * is not a pure addition at the end of a response.
 */
#define HICAIN_UVERBS_ABI_VERSION	1

/* GET_CONTEXT (alloc_ucontext) response, after ib_uverbs_get_context_resp. */
struct hicain_ib_alloc_ucontext_resp {
	__u32 dev_caps;		/* HICAIN_CAP_* of hicain_abi.h */
	__u32 max_qp_wr;
	__u32 max_sge;
	__u32 max_inline;	/* inline bytes a QP takes */
};

/* ALLOC_PD response, after ib_uverbs_alloc_pd_resp. */
struct hicain_ib_alloc_pd_resp {
	__u32 pdn;		/* the device's PD handle */
	__u32 reserved;
};

#endif /* HICAIN_UVERBS_ABI_H */
