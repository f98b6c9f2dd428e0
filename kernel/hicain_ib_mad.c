// SPDX-License-Identifier: GPL-2.0
/*
 * hicain_ib_mad.c - process_mad: the MADs the port's own agents answer,
 * which live in the device (MAD_IFC), as mlx4's live in its firmware:
 * the performance management agent (PerfMgt, both link layers, ABI 1.15)
 * and, on an InfiniBand port, the subnet management agent.
 */

#include <linux/dma-mapping.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_sa.h>

#include "hicain_ib.h"

/*
 * hicain_pma_method_has_resp - request methods a class answers with
 * method | R (IBA 13.4.5; ib_sa.h names the common methods 0x12 to
 * 0x15 after the SA): the device's PMA answers Get and Set and the
 * others of these with "method not supported". Responses (a remote
 * PMA's answers to this host's requests), Send, Trap, Report and vendor
 * methods go on to ib_mad's agents without a round trip to the device.
 */
static bool hicain_pma_method_has_resp(u8 method)
{
	switch (method) {
	case IB_MGMT_METHOD_GET:
	case IB_MGMT_METHOD_SET:
	case IB_SA_METHOD_GET_TABLE:
	case IB_SA_METHOD_GET_TRACE_TBL:
	case IB_SA_METHOD_GET_MULTI:
	case IB_SA_METHOD_DELETE:
		return true;
	}
	return false;
}

/*
 * hicain_mad_ifc - hand a MAD to the device's agents (MAD_IFC) and copy
 * their answer, if any, to out.
 */
static int hicain_mad_ifc(struct hicain_ibdev *hidev, const struct ib_mad *in,
			  struct ib_mad *out)
{
	struct device *dma_dev = hicain_dma_dev(hidev);
	struct hicain_admin_cmd cmd = {};
	struct hicain_admin_cqe cqe;
	bool reply;
	dma_addr_t dma;
	u8 *buf;
	int ret;

	BUILD_BUG_ON(sizeof(*in) != HICAIN_MAD_SIZE);
	buf = dma_alloc_coherent(dma_dev, 2 * HICAIN_MAD_SIZE, &dma, GFP_KERNEL);
	if (!buf)
		return IB_MAD_RESULT_FAILURE;
	memcpy(buf, in, HICAIN_MAD_SIZE);
	cmd.opcode = cpu_to_le16(HICAIN_CMD_MAD_IFC);
	cmd.handle = cpu_to_le32(1);
	cmd.resp_gpa = cpu_to_le64(dma + HICAIN_MAD_SIZE);
	cmd.resp_len = cpu_to_le32(HICAIN_MAD_SIZE);
	cmd.mad_ifc.in_gpa = cpu_to_le64(dma);
	ret = hicain_admin_exec(hidev->hdev, &cmd, &cqe);
	reply = !ret && (cqe.out[0] & HICAIN_MAD_IFC_REPLY);
	if (reply)
		memcpy(out, buf + HICAIN_MAD_SIZE, HICAIN_MAD_SIZE);
	if (hicain_admin_lost(ret))
		hicain_admin_keep(hidev->hdev, 2 * HICAIN_MAD_SIZE);
	else
		dma_free_coherent(dma_dev, 2 * HICAIN_MAD_SIZE, buf, dma);
	if (ret) {
		/* No answer: the requester times out and retries. */
		ibdev_dbg(&hidev->ibdev, "MAD_IFC (class %#x) failed: %d\n",
			  in->mad_hdr.mgmt_class, ret);
		return IB_MAD_RESULT_FAILURE;
	}
	return reply ? IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_REPLY : IB_MAD_RESULT_SUCCESS;
}

/*
 * hicain_process_mad - ib_mad hands process_mad every MAD that arrives on
 * QP0 and QP1, and the ones this host sends to its own port, before its
 * agents.
 *
 * PerfMgt requests go to the device's PMA (MAD_IFC, a device of ABI 1.15
 * or later): sysfs counters/, a local perfquery, and on RoCE a remote
 * one. On InfiniBand the device answers PerfMgt requests from the wire
 * itself, before they reach QP1.
 *
 * SMPs, on an InfiniBand port: ib_mad hands process_mad the
 * directed-route SMPs with HopCount 0 that a subnet manager on this port
 * sends (smi_check_local_smp: they never reach the wire, IBA 14.2.2.2),
 * and it passes every SMP that arrives on QP0; the device answers
 * requests from the wire itself, so those are answers for the SM and go
 * on to ib_mad's agents, as do methods other than Get and Set (Trap,
 * TrapRepress). Get and Set go to the device's SMA; its Sets change the
 * port as an SM's Sets over the wire do, and the port's events follow on
 * the event queue.
 *
 * Everything else goes on to ib_mad's agents.
 */
int hicain_process_mad(struct ib_device *ibdev, int flags, u32 port,
		       const struct ib_wc *in_wc, const struct ib_grh *in_grh,
		       const struct ib_mad *in, struct ib_mad *out,
		       size_t *out_mad_size, u16 *out_mad_pkey_index)
{
	struct hicain_ibdev *hidev = to_hidev(ibdev);
	const struct ib_mad_hdr *hdr = &in->mad_hdr;

	if (hdr->base_version != IB_MGMT_BASE_VERSION)
		return IB_MAD_RESULT_SUCCESS;
	switch (hdr->mgmt_class) {
	case IB_MGMT_CLASS_PERF_MGMT:
		if (!hicain_abi_minor_at_least(hidev, 15) || !hicain_pma_method_has_resp(hdr->method))
			return IB_MAD_RESULT_SUCCESS;
		break;
	case IB_MGMT_CLASS_SUBN_LID_ROUTED:
	case IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE:
		if (!hidev->ib || (hdr->method != IB_MGMT_METHOD_GET && hdr->method != IB_MGMT_METHOD_SET))
			return IB_MAD_RESULT_SUCCESS;
		break;
	default:
		return IB_MAD_RESULT_SUCCESS;
	}
	return hicain_mad_ifc(hidev, in, out);
}
