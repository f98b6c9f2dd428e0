// SPDX-License-Identifier: GPL-2.0
/*
 * hicain_ib_mad.c - process_mad: the port's performance management
 * agent (PerfMgt from QUERY_COUNTERS) and, on an InfiniBand port, the
 * SMPs for the device's SMA (MAD_IFC).
 */

#include <asm/unaligned.h>
#include <linux/dma-mapping.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_pma.h>
#include <rdma/ib_sa.h>

#include "hicain_ib.h"

/* ---- performance management agent ---- */

/*
 * The port's PMA (IBA 16.1): ib_mad hands every MAD that arrives on QP1
 * to process_mad before its agents. PerfMgt Gets and Sets are answered
 * here from the device's counters (QUERY_COUNTERS); responses, other
 * classes and methods that no PMA answers go on to ib_mad's agents
 * (umad, CM) as before.
 *
 * The device's counters only grow. A Set of PortCounters or
 * PortCountersExtended clears counters by moving this driver's baseline
 * of that attribute to their current value (the attributes clear
 * independently, IBA 16.1.3.5 and 16.1.4.11). A device reset restarts
 * the device's counters and drops the baselines.
 */
/* PMA ClassPortInfo RespTimeValue: 4.096 us << 18, about 1 s (IBA 13.4.6.2). */
#define HICAIN_PMA_RESP_TIME	18
/* PortCounters CounterSelect bit 8, PortRcvConstraintErrors (IBA table 247). */
#define HICAIN_PMA_SEL_RCV_CONSTRAINT_ERRORS	cpu_to_be16(0x0100)

/*
 * hicain_pma_counters - the port's counters as view v shows them, after
 * clearing the counters in clear (a mask of BIT(enum hicain_pma_ctr)).
 * Sleeps (admin command).
 */
static int hicain_pma_counters(struct hicain_ibdev *hidev, u32 port, enum hicain_pma_view v,
			       u32 clear, u64 *val)
{
	struct hicain_port_counters pc;
	u64 cur[HICAIN_PMA_NR], *base;
	int epoch, i, ret;

	ret = hicain_admin_query(hidev, HICAIN_CMD_QUERY_COUNTERS, port, &pc, sizeof(pc));
	if (ret)
		return ret;
	cur[HICAIN_PMA_XMIT_DATA] = le64_to_cpu(pc.xmit_data);
	cur[HICAIN_PMA_RCV_DATA] = le64_to_cpu(pc.rcv_data);
	cur[HICAIN_PMA_XMIT_PKTS] = le64_to_cpu(pc.xmit_pkts);
	cur[HICAIN_PMA_RCV_PKTS] = le64_to_cpu(pc.rcv_pkts);
	cur[HICAIN_PMA_UCAST_XMIT_PKTS] = le64_to_cpu(pc.unicast_xmit_pkts);
	cur[HICAIN_PMA_UCAST_RCV_PKTS] = le64_to_cpu(pc.unicast_rcv_pkts);
	cur[HICAIN_PMA_MCAST_XMIT_PKTS] = le64_to_cpu(pc.multicast_xmit_pkts);
	cur[HICAIN_PMA_MCAST_RCV_PKTS] = le64_to_cpu(pc.multicast_rcv_pkts);
	cur[HICAIN_PMA_RCV_ERRORS] = le64_to_cpu(pc.rcv_errors);
	cur[HICAIN_PMA_XMIT_DISCARDS] = le64_to_cpu(pc.xmit_discards);
	cur[HICAIN_PMA_RCV_CONSTRAINT_ERRORS] = le64_to_cpu(pc.rcv_constraint_errors);
	cur[HICAIN_PMA_LINK_DOWNED] = le64_to_cpu(pc.link_downed);
	cur[HICAIN_PMA_VL15_DROPPED] = le64_to_cpu(pc.vl15_dropped);
	cur[HICAIN_PMA_QP1_DROPPED] = le64_to_cpu(pc.qp1_dropped);

	mutex_lock(&hidev->pma_lock);
	epoch = atomic_read(&hidev->epoch);
	if (hidev->pma_epoch != epoch) {
		memset(hidev->pma_base, 0, sizeof(hidev->pma_base));
		hidev->pma_epoch = epoch;
	}
	base = hidev->pma_base[v];
	for (i = 0; i < HICAIN_PMA_NR; i++) {
		if (clear & BIT(i))
			base[i] = cur[i];
		else if (cur[i] < base[i])
			base[i] = 0;	/* the device's counters restarted */
		val[i] = cur[i] - base[i];
	}
	mutex_unlock(&hidev->pma_lock);
	return 0;
}

/* PMA counters stop at their maximum instead of wrapping (IBA 16.1.3.5). */
/*
 * struct hicain_pma_field - where the PMA attributes carry a counter:
 * PortCounters' big-endian field of pc_width octets at pc_off and
 * PortCountersExtended's 64-bit one at ext_off (0: the attribute has
 * none). Both get the counter shifted right by shift (data counts
 * 4-octet words), saturated to the field.
 */
struct hicain_pma_field {
	u8 pc_off;
	u8 pc_width;
	u8 ext_off;
	u8 shift;
};

#define HICAIN_PMA_PC(field)							\
	.pc_off = offsetof(struct ib_pma_portcounters, field),			\
	.pc_width = sizeof_field(struct ib_pma_portcounters, field)
#define HICAIN_PMA_EXT(field)	.ext_off = offsetof(struct ib_pma_portcounters_ext, field)

/*
 * hicain_pma_fields - each counter's places. PortCounters' reserved2
 * is QP1Dropped (IBA 1.3; reserved in ib_pma.h's layout), which no
 * CounterSelect bit clears.
 */
static const struct hicain_pma_field hicain_pma_fields[HICAIN_PMA_NR] = {
	[HICAIN_PMA_XMIT_DATA] = { HICAIN_PMA_PC(port_xmit_data),
				   HICAIN_PMA_EXT(port_xmit_data), .shift = 2 },
	[HICAIN_PMA_RCV_DATA] = { HICAIN_PMA_PC(port_rcv_data),
				  HICAIN_PMA_EXT(port_rcv_data), .shift = 2 },
	[HICAIN_PMA_XMIT_PKTS] = { HICAIN_PMA_PC(port_xmit_packets),
				   HICAIN_PMA_EXT(port_xmit_packets) },
	[HICAIN_PMA_RCV_PKTS] = { HICAIN_PMA_PC(port_rcv_packets),
				  HICAIN_PMA_EXT(port_rcv_packets) },
	[HICAIN_PMA_UCAST_XMIT_PKTS] = { HICAIN_PMA_EXT(port_unicast_xmit_packets) },
	[HICAIN_PMA_UCAST_RCV_PKTS] = { HICAIN_PMA_EXT(port_unicast_rcv_packets) },
	[HICAIN_PMA_MCAST_XMIT_PKTS] = { HICAIN_PMA_EXT(port_multicast_xmit_packets) },
	[HICAIN_PMA_MCAST_RCV_PKTS] = { HICAIN_PMA_EXT(port_multicast_rcv_packets) },
	[HICAIN_PMA_RCV_ERRORS] = { HICAIN_PMA_PC(port_rcv_errors) },
	[HICAIN_PMA_XMIT_DISCARDS] = { HICAIN_PMA_PC(port_xmit_discards) },
	[HICAIN_PMA_RCV_CONSTRAINT_ERRORS] = { HICAIN_PMA_PC(port_rcv_constraint_errors) },
	[HICAIN_PMA_LINK_DOWNED] = { HICAIN_PMA_PC(link_downed_counter) },
	[HICAIN_PMA_VL15_DROPPED] = { HICAIN_PMA_PC(vl15_dropped) },
	[HICAIN_PMA_QP1_DROPPED] = { HICAIN_PMA_PC(reserved2) },
};

/*
 * hicain_pma_fill - write the counters val into PortCounters data, or
 * PortCountersExtended data when ext.
 */
static void hicain_pma_fill(u8 *data, bool ext, const u64 *val)
{
	int i;

	for (i = 0; i < HICAIN_PMA_NR; i++) {
		const struct hicain_pma_field *f = &hicain_pma_fields[i];
		u64 v = val[i] >> f->shift;
		u8 *dst = data + (ext ? f->ext_off : f->pc_off);

		if (dst == data)
			continue;
		switch (ext ? 8 : f->pc_width) {
		case 1:
			*dst = min_t(u64, v, U8_MAX);
			break;
		case 2:
			put_unaligned_be16(min_t(u64, v, U16_MAX), dst);
			break;
		case 4:
			put_unaligned_be32(min_t(u64, v, U32_MAX), dst);
			break;
		case 8:
			put_unaligned_be64(v, dst);
			break;
		}
	}
}

static int hicain_pma_class_port_info(struct ib_pma_mad *pmp)
{
	struct ib_class_port_info *cpi = (struct ib_class_port_info *)pmp->data;

	if (pmp->mad_hdr.method != IB_MGMT_METHOD_GET)
		return IB_MGMT_MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB;
	memset(pmp->data, 0, sizeof(pmp->data));
	cpi->base_version = IB_MGMT_BASE_VERSION;
	cpi->class_version = 1;
	/* PortCountersExtended with every counter, unicast and multicast
	 * included; one port, no PortXmitWait.
	 */
	cpi->capability_mask = IB_PMA_CLASS_CAP_EXT_WIDTH;
	ib_set_cpi_resp_time(cpi, HICAIN_PMA_RESP_TIME);
	return IB_MGMT_MAD_STATUS_SUCCESS;
}

/* The CounterSelect bits of PortCounters a Set clears with, as counters. */
static u32 hicain_pma_clear_mask(__be16 sel)
{
	static const struct {
		__be16 sel;
		enum hicain_pma_ctr ctr;
	} map[] = {
		{ IB_PMA_SEL_LINK_DOWNED, HICAIN_PMA_LINK_DOWNED },
		{ IB_PMA_SEL_PORT_RCV_ERRORS, HICAIN_PMA_RCV_ERRORS },
		{ IB_PMA_SEL_PORT_XMIT_DISCARDS, HICAIN_PMA_XMIT_DISCARDS },
		{ HICAIN_PMA_SEL_RCV_CONSTRAINT_ERRORS, HICAIN_PMA_RCV_CONSTRAINT_ERRORS },
		{ IB_PMA_SEL_PORT_VL15_DROPPED, HICAIN_PMA_VL15_DROPPED },
		{ IB_PMA_SEL_PORT_XMIT_DATA, HICAIN_PMA_XMIT_DATA },
		{ IB_PMA_SEL_PORT_RCV_DATA, HICAIN_PMA_RCV_DATA },
		{ IB_PMA_SEL_PORT_XMIT_PACKETS, HICAIN_PMA_XMIT_PKTS },
		{ IB_PMA_SEL_PORT_RCV_PACKETS, HICAIN_PMA_RCV_PKTS },
	};
	u32 mask = 0;
	int i;

	for (i = 0; i < ARRAY_SIZE(map); i++)
		if (sel & map[i].sel)
			mask |= BIT(map[i].ctr);
	return mask;
}

/*
 * hicain_pma_get - the start of a PortCounters or PortCountersExtended
 * answer, which both begin with PortSelect and CounterSelect: the
 * counters of view v, after a Set cleared those in clear, and the data
 * after CounterSelect zeroed. Returns a MAD status or a negative errno.
 */
static int hicain_pma_get(struct hicain_ibdev *hidev, u32 port, struct ib_pma_mad *pmp,
			  enum hicain_pma_view v, u32 clear, u64 *val)
{
	struct ib_pma_portcounters *p = (struct ib_pma_portcounters *)pmp->data;
	const size_t keep = offsetofend(struct ib_pma_portcounters, counter_select);
	int ret;

	BUILD_BUG_ON(offsetof(struct ib_pma_portcounters_ext, port_select) !=
		     offsetof(struct ib_pma_portcounters, port_select));
	BUILD_BUG_ON(offsetof(struct ib_pma_portcounters_ext, counter_select) !=
		     offsetof(struct ib_pma_portcounters, counter_select));
	if (p->port_select != port)
		return IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE;
	if (pmp->mad_hdr.method != IB_MGMT_METHOD_SET)
		clear = 0;
	ret = hicain_pma_counters(hidev, port, v, clear, val);
	if (ret)
		return ret;
	p->reserved = 0;
	memset(pmp->data + keep, 0, sizeof(pmp->data) - keep);
	return IB_MGMT_MAD_STATUS_SUCCESS;
}

/*
 * hicain_pma_port_counters - PortCounters (IBA 16.1.3.5). Data counts
 * 4-octet words; the counters the port has no source for (symbol and
 * link integrity errors, relay errors, PortXmitWait) stay 0. Returns a
 * MAD status or a negative errno.
 */
static int hicain_pma_port_counters(struct hicain_ibdev *hidev, u32 port, struct ib_pma_mad *pmp)
{
	struct ib_pma_portcounters *p = (struct ib_pma_portcounters *)pmp->data;
	u64 val[HICAIN_PMA_NR];
	int ret;

	ret = hicain_pma_get(hidev, port, pmp, HICAIN_PMA_VIEW_COUNTERS,
			     hicain_pma_clear_mask(p->counter_select), val);
	if (ret)
		return ret;
	hicain_pma_fill(pmp->data, false, val);
	return IB_MGMT_MAD_STATUS_SUCCESS;
}

/* hicain_pma_port_counters_ext - PortCountersExtended (IBA 16.1.4.11). */
static int hicain_pma_port_counters_ext(struct hicain_ibdev *hidev, u32 port,
					struct ib_pma_mad *pmp)
{
	struct ib_pma_portcounters_ext *p = (struct ib_pma_portcounters_ext *)pmp->data;
	u64 val[HICAIN_PMA_NR];
	int ret;

	/* Bits 0..7 select the counters of the same enum positions. */
	ret = hicain_pma_get(hidev, port, pmp, HICAIN_PMA_VIEW_EXT,
			     be16_to_cpu(p->counter_select) & 0xff, val);
	if (ret)
		return ret;
	hicain_pma_fill(pmp->data, true, val);
	return IB_MGMT_MAD_STATUS_SUCCESS;
}

/*
 * hicain_pma_method_has_resp - request methods a class answers with
 * method | R (IBA 13.4.5; ib_sa.h names the common methods 0x12 to
 * 0x15 after the SA): the PMA supports Get and Set only and
 * answers the others of these with "method not supported". Send, Trap,
 * Report and vendor methods go on to ib_mad's agents.
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

/* ---- subnet management agent (InfiniBand) ---- */

/*
 * hicain_process_smp - an SMP for the port's SMA, which lives in the
 * device. ib_mad hands process_mad the directed-route SMPs with HopCount
 * 0 that a subnet manager on this port sends (smi_check_local_smp: they
 * never reach the wire, IBA 14.2.2.2), and it passes every SMP that
 * arrives on QP0; the device answers requests from the wire itself, so
 * those are answers for the SM and go on to ib_mad's agents, as do
 * methods other than Get and Set (Trap, TrapRepress). Get and Set go to
 * the device (MAD_IFC); its Sets change the port as an SM's Sets over
 * the wire do, and the port's events follow on the event queue.
 */
static int hicain_process_smp(struct hicain_ibdev *hidev, const struct ib_mad *in,
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
	if (in->mad_hdr.method != IB_MGMT_METHOD_GET && in->mad_hdr.method != IB_MGMT_METHOD_SET)
		return IB_MAD_RESULT_SUCCESS;
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
		/* No answer: the SM's request times out (and is retried). */
		ibdev_dbg(&hidev->ibdev, "SMA: MAD_IFC failed: %d\n", ret);
		return IB_MAD_RESULT_FAILURE;
	}
	return reply ? IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_REPLY : IB_MAD_RESULT_SUCCESS;
}

int hicain_process_mad(struct ib_device *ibdev, int flags, u32 port,
		       const struct ib_wc *in_wc, const struct ib_grh *in_grh,
		       const struct ib_mad *in, struct ib_mad *out,
		       size_t *out_mad_size, u16 *out_mad_pkey_index)
{
	const struct ib_mad_hdr *hdr = &in->mad_hdr;
	struct ib_pma_mad *pmp = (struct ib_pma_mad *)out;
	int status;

	if (to_hidev(ibdev)->ib && hdr->base_version == IB_MGMT_BASE_VERSION &&
	    (hdr->mgmt_class == IB_MGMT_CLASS_SUBN_LID_ROUTED ||
	     hdr->mgmt_class == IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE))
		return hicain_process_smp(to_hidev(ibdev), in, out);

	if (hdr->mgmt_class != IB_MGMT_CLASS_PERF_MGMT ||
	    hdr->base_version != IB_MGMT_BASE_VERSION ||
	    !hicain_pma_method_has_resp(hdr->method))
		return IB_MAD_RESULT_SUCCESS;

	memcpy(out, in, sizeof(*out));
	if (hdr->class_version != 1)
		status = IB_MGMT_MAD_STATUS_BAD_VERSION;
	else if (hdr->method != IB_MGMT_METHOD_GET && hdr->method != IB_MGMT_METHOD_SET)
		status = IB_MGMT_MAD_STATUS_UNSUPPORTED_METHOD;
	else if (hdr->attr_id == IB_PMA_CLASS_PORT_INFO)
		status = hicain_pma_class_port_info(pmp);
	else if (hdr->attr_id == IB_PMA_PORT_COUNTERS)
		status = hicain_pma_port_counters(to_hidev(ibdev), port, pmp);
	else if (hdr->attr_id == IB_PMA_PORT_COUNTERS_EXT)
		status = hicain_pma_port_counters_ext(to_hidev(ibdev), port, pmp);
	else
		status = IB_MGMT_MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB;
	if (status < 0) {
		/* No counters (the device is resetting): no answer; the
		 * requester times out and retries.
		 */
		ibdev_dbg(ibdev, "PMA: QUERY_COUNTERS failed: %d\n", status);
		return IB_MAD_RESULT_FAILURE;
	}
	/* Get and Set are both answered with GetResp (IBA 13.4.5). */
	pmp->mad_hdr.method = hdr->method == IB_MGMT_METHOD_SET ? IB_MGMT_METHOD_GET_RESP :
			      hdr->method | IB_MGMT_METHOD_RESP;
	pmp->mad_hdr.status = cpu_to_be16(status);
	return IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_REPLY;
}
