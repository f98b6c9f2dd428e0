/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * hicain_abi.h - the HiNIC device ABI: BAR2 of the ivshmem-doorbell
 * function and the queue formats in guest memory.
 *
 * This header is the one source of truth. internal/device/zabi.go, its
 * Go mirror, is generated from it with cgo -godefs; Go tests fail when
 * the mirror is stale, lacks a HICAIN_ name, or an offset, size or value
 * drifts. docs/device-abi.md explains the protocol.
 *
 * All fields are little-endian. Every structure has explicit padding and
 * a fixed size. "GPA" is a guest-physical address (a DMA address of the
 * guest driver, dma_set_mask_and_coherent(DMA_BIT_MASK(64))).
 *
 * Memory ordering: a producer writes ring entries, then publishes its
 * producer index with a release store (smp_store_release / dma_wmb
 * before WRITE_ONCE); a consumer reads the index with an acquire load
 * (smp_load_acquire / READ_ONCE + dma_rmb) before reading entries.
 * Indices are free-running 32-bit counters; slot = index & (entries - 1);
 * entries are powers of two; prod - cons never exceeds entries.
 */
#ifndef HICAIN_ABI_H
#define HICAIN_ABI_H

#include <linux/types.h>	/* kernel and user space (uapi) alike */

#include "hidev_abi.h"

#define HICAIN_MAGIC		0x4e494348U	/* "HCIN" little-endian */
#define HICAIN_ABI_MAJOR	1
#define HICAIN_ABI_MINOR	18	/* 1.1: SRQ, UD, multicast, device_attr tail;
				 * 1.2: QUERY_COUNTERS;
				 * 1.3: address vectors in UD send WQEs;
				 * 1.4: MAD_IFC, LID_CHANGE (InfiniBand);
				 * 1.5: SM_CHANGE, CLIENT_REREGISTER;
				 * 1.6: SET_PORT_CAP;
				 * 1.7: hicain_cq_dbrec.events;
				 * 1.8: REREG_MR;
				 * 1.9: paged CQ rings (HICAIN_CQ_F_PAGED);
				 * 1.10: memory windows (ALLOC_MW, DEALLOC_MW,
				 * BIND_MW, LOCAL_INV, SEND_WITH_INV WQEs,
				 * device_attr.max_mw); ATOMIC_WRITE WQEs;
				 * 1.11: XRC (ALLOC_XRCD, DEALLOC_XRCD, XRC
				 *       SRQs and QPs, remote_srqn);
				 * 1.12: hicain_cqe.timestamp
				 *       (HICAIN_CAP_CQE_TS);
				 * 1.13: tag-matching SRQs (HICAIN_CAP_TM,
				 *       HICAIN_SRQT_TM, hicain_tm_op_wqe,
				 *       device_attr TM caps, CQE tm_tag and
				 *       tm_handle);
				 * 1.14: dev_hdr.heartbeat;
				 * 1.15: MAD_IFC answers PerfMgt MADs
				 *       on both link layers (the PMA);
				 * 1.16: raw packet QPs and flow steering
				 *       (HICAIN_CAP_RAW, CREATE_FLOW,
				 *       DESTROY_FLOW), receive work queues
				 *       and RSS QPs (SET_RSS);
				 * 1.17: QUERY_CLOCK;
				 * 1.18: hicain_wq_dbrec.no_db (receive
				 *       doorbells the device does not need) */
#define HICAIN_VENDOR_ID	0x1ED5
#define HICAIN_DEVICE_ID	0xCA10

/* BAR2 layout (offsets from the start of BAR2). */
#define HICAIN_BAR2_MIN_SIZE	0x100000	/* 1 MiB, a power of two */
#define HICAIN_HDR_OFF		0x0000
#define HICAIN_ADMIN_SQ_OFF	0x1000
#define HICAIN_ADMIN_SQ_ENTRIES	32		/* x 256 B = 8 KiB */
#define HICAIN_ADMIN_CQ_OFF	0x3000
#define HICAIN_ADMIN_CQ_ENTRIES	32		/* x 64 B = 2 KiB */
#define HICAIN_EQ_OFF		0x4000
#define HICAIN_EQ_ENTRIES	256		/* x 16 B = 4 KiB */
#define HICAIN_L2_TX_OFF	0x5000
#define HICAIN_L2_TX_ENTRIES	256		/* x 16 B = 4 KiB */
#define HICAIN_L2_RX_OFF	0x6000
#define HICAIN_L2_RX_ENTRIES	256		/* x 16 B = 4 KiB */

/*
 * Doorbells, guest to device: write (backend_peer_id << 16) | vector to
 * BAR0 offset 12. A doorbell carries no payload: the device rereads the
 * indices named below.
 */
#define HICAIN_DB_CTRL		0	/* driver_status, admin SQ prod */
#define HICAIN_DB_QP		1	/* some SQ/RQ/SRQ producer index moved */
#define HICAIN_DB_L2		2	/* L2 TX prod or RX prod moved */
#define HICAIN_DB_CQ		3	/* CQ consumer index/arm moved */
#define HICAIN_NUM_DB		4

/*
 * Interrupts, device to guest (MSI-X vectors). The device raises none
 * before the driver sets HICAIN_DRV_MSIX_ON: QEMU drops them.
 */
#define HICAIN_IRQ_CTRL		0	/* admin completions, events */
#define HICAIN_IRQ_L2		1	/* L2 TX consumed or RX filled */
#define HICAIN_IRQ_CQ_BASE	2	/* CQ comp_vector n -> vector 2 + n */

/* dev_status bits (device writes); the first three are hidev_abi.h's. */
#define HICAIN_DEV_READY	HINIC_DEV_READY
#define HICAIN_DEV_LIVE		HINIC_DEV_LIVE	/* queues serve */
#define HICAIN_DEV_FATAL	HINIC_DEV_FATAL
#define HICAIN_DEV_LINK_UP	0x8	/* fabric port attached */

/*
 * Heartbeat (1.14): the device adds 1 to dev_hdr.heartbeat every
 * HICAIN_HEARTBEAT_MS for as long as its backend runs, live or not. A
 * driver that sees it unchanged for HICAIN_HEARTBEAT_DEAD_MS while the
 * device is LIVE takes the backend for dead (docs/device-abi.md).
 */
#define HICAIN_HEARTBEAT_MS	100
#define HICAIN_HEARTBEAT_DEAD_MS	3000

/* driver_status bits (hidev_abi.h; then ring HICAIN_DB_CTRL). */
#define HICAIN_DRV_OK		HINIC_DRV_OK
#define HICAIN_DRV_MSIX_ON	HINIC_DRV_MSIX_ON
#define HICAIN_DRV_RESET	HINIC_DRV_RESET

/* fatal codes */
#define HICAIN_FATAL_NONE	0
#define HICAIN_FATAL_ADMIN_RING	1	/* admin SQ index out of range */
#define HICAIN_FATAL_L2_RING	2	/* L2 ring index out of range */
#define HICAIN_FATAL_ABI	3	/* driver ABI major mismatch */

/* capabilities */
#define HICAIN_CAP_RC		0x1
#define HICAIN_CAP_UD		0x2
#define HICAIN_CAP_SRQ		0x4
#define HICAIN_CAP_ATOMIC	0x8
#define HICAIN_CAP_L2		0x10
#define HICAIN_CAP_XRC		0x20	/* ABI 1.11: XRC domains, SRQs, QPs */
#define HICAIN_CAP_CQE_TS	0x40	/* ABI 1.12: hicain_cqe.timestamp */
#define HICAIN_CAP_TM		0x80	/* ABI 1.13: tag-matching SRQs */
#define HICAIN_CAP_RAW		0x100	/* ABI 1.16: raw packet QPs, flows */

#define HICAIN_LINK_ETHERNET	2	/* IBV_LINK_LAYER_ETHERNET */
#define HICAIN_LINK_INFINIBAND	1

struct hicain_dev_hdr {
	/* 0x000: identity, written once by the device (hidev_abi.h) */
	HINIC_DEV_ID_FIELDS;
	__u8 mac[6];
	__u8 link_layer;
	__u8 phys_port_cnt;
	__le64 node_guid;
	__le64 port_guid;
	__le32 caps;
	__le32 max_mtu;		/* bytes */
	__le32 num_vectors;	/* doorbells and MSI-X vectors each */
	__le32 rsvd0[3];
	/* 0x040: limits */
	__le32 max_qp;
	__le32 max_cq;
	__le32 max_mr;
	__le32 max_pd;
	__le32 max_ah;
	__le32 max_qp_wr;
	__le32 max_cqe;
	__le32 max_sge;
	__le32 max_inline;
	__le32 max_qp_rd_atom;
	__le32 rsvd1[6];
	/* 0x080: status and handshake (hidev_abi.h) */
	HINIC_DEV_STATUS_FIELDS;
	__le32 heartbeat;	/* device: +1 every HICAIN_HEARTBEAT_MS (1.14) */
	__le32 rsvd2[2];
	/* 0x0a0: ring indices (prod written by producer, cons by consumer) */
	__le32 admin_sq_prod;	/* driver */
	__le32 admin_sq_cons;	/* device */
	__le32 admin_cq_prod;	/* device */
	__le32 admin_cq_cons;	/* driver */
	__le32 eq_prod;		/* device */
	__le32 eq_cons;		/* driver */
	__le32 l2_tx_prod;	/* driver */
	__le32 l2_tx_cons;	/* device */
	__le32 l2_rx_prod;	/* driver: buffers posted */
	__le32 l2_rx_cons;	/* device: buffers filled */
	__le32 rsvd3[6];
	/* 0x0e0: device counters, informational */
	__le64 doorbells;
	__le64 interrupts;
	__le64 admin_cmds;
	__le64 rsvd4;
};					/* 0x100 bytes */

/* Admin opcodes */
enum hicain_admin_op {
	HICAIN_CMD_QUERY_DEVICE = 1,	/* resp_gpa <- hicain_device_attr */
	HICAIN_CMD_QUERY_PORT,		/* resp_gpa <- hicain_port_attr */
	HICAIN_CMD_QUERY_GID,		/* index -> out[0..15] gid, out[16] type */
	HICAIN_CMD_QUERY_PKEY,		/* index -> out[0..1] */
	HICAIN_CMD_ALLOC_PD,		/* -> handle */
	HICAIN_CMD_DEALLOC_PD,
	HICAIN_CMD_REG_MR,		/* -> handle = lkey, out: lkey, rkey */
	HICAIN_CMD_DEREG_MR,
	HICAIN_CMD_CREATE_CQ,		/* -> handle = cqn */
	HICAIN_CMD_DESTROY_CQ,
	HICAIN_CMD_RESIZE_CQ,
	HICAIN_CMD_CREATE_QP,		/* -> handle = qpn */
	HICAIN_CMD_MODIFY_QP,
	HICAIN_CMD_QUERY_QP,		/* resp_gpa <- hicain_qp_attr */
	HICAIN_CMD_DESTROY_QP,
	HICAIN_CMD_CREATE_SRQ,		/* hicain_cmd_create_srq -> handle = srqn */
	HICAIN_CMD_MODIFY_SRQ,		/* hicain_cmd_modify_srq */
	HICAIN_CMD_QUERY_SRQ,		/* handle = srqn -> out = hicain_srq_attr */
	HICAIN_CMD_DESTROY_SRQ,		/* handle = srqn */
	HICAIN_CMD_CREATE_AH,		/* -> handle */
	HICAIN_CMD_DESTROY_AH,
	HICAIN_CMD_ATTACH_MCAST,	/* hicain_cmd_mcast */
	HICAIN_CMD_DETACH_MCAST,	/* hicain_cmd_mcast */
	HICAIN_CMD_SET_ADDR,		/* MAC, MTU, IP addresses (GIDs) */
	HICAIN_CMD_QUERY_COUNTERS,	/* handle = port -> resp_gpa <- hicain_port_counters */
	HICAIN_CMD_MAD_IFC,		/* hicain_cmd_mad_ifc -> resp_gpa <- answer MAD */
	HICAIN_CMD_SET_PORT_CAP,	/* ABI 1.6: handle = port, hicain_cmd_port_cap */
	HICAIN_CMD_REREG_MR,		/* ABI 1.8: handle = lkey, hicain_cmd_reg_mr:
					 * the MR's PD, access and pages, in place
					 * -> out: lkey, rkey (unchanged) */
	HICAIN_CMD_ALLOC_MW,		/* ABI 1.10: hicain_cmd_alloc_mw
					 * -> handle = out[0..3] = the window's
					 * R_Key (bit 31 set) */
	HICAIN_CMD_DEALLOC_MW,		/* ABI 1.10: handle = the R_Key ALLOC_MW
					 * gave (its index bits name the window) */
	HICAIN_CMD_ALLOC_XRCD,		/* ABI 1.11: -> handle */
	HICAIN_CMD_DEALLOC_XRCD,	/* ABI 1.11: handle; EBUSY while XRC SRQs
					 * or target QPs are in it */
	HICAIN_CMD_CREATE_FLOW,		/* ABI 1.16: hicain_cmd_create_flow
					 * -> handle */
	HICAIN_CMD_DESTROY_FLOW,	/* ABI 1.16: handle */
	HICAIN_CMD_SET_RSS,		/* ABI 1.16: hicain_cmd_set_rss */
	HICAIN_CMD_QUERY_CLOCK,		/* ABI 1.17: -> hicain_clock in out */
	/*
	 * One past the last opcode of this minor. It is no wire value (no
	 * field carries it, neither side acts on it) and grows with each
	 * opcode a minor adds; the opcodes above it never move.
	 */
	HICAIN_CMD_MAX
};

/* Admin completion status: 0 or a positive Linux errno. */
#define HICAIN_ST_OK		0
#define HICAIN_ST_ENOENT	2	/* unknown handle */
#define HICAIN_ST_ENOMEM	12
#define HICAIN_ST_EACCES	13	/* SET_ADDR: an address the host did not pin */
#define HICAIN_ST_EFAULT	14	/* GPA outside guest RAM */
#define HICAIN_ST_EBUSY		16
#define HICAIN_ST_ENODEV	19
#define HICAIN_ST_EINVAL	22
#define HICAIN_ST_EOPNOTSUPP	95

struct hicain_ah_attr {
	__u8 dgid[16];
	__le32 flow_label;
	__u8 sgid_index;
	__u8 hop_limit;
	__u8 traffic_class;
	__u8 sl;
	__u8 dmac[6];
	__le16 dlid;
	__u8 is_global;
	__u8 port_num;
	__u8 static_rate;
	__u8 src_path_bits;
	__le32 rsvd;
};					/* 40 bytes */

struct hicain_qp_attr {
	__le32 qp_state;
	__le32 cur_qp_state;
	__le32 path_mtu;		/* enum ib_mtu */
	__le32 qkey;
	__le32 rq_psn;
	__le32 sq_psn;
	__le32 dest_qp_num;
	__le32 qp_access_flags;
	__le16 pkey_index;
	__u8 port_num;
	__u8 timeout;
	__u8 retry_cnt;
	__u8 rnr_retry;
	__u8 min_rnr_timer;
	__u8 max_rd_atomic;
	__u8 max_dest_rd_atomic;
	__u8 sq_draining;
	__u8 rsvd[6];
	struct hicain_ah_attr ah_attr;
};					/* 88 bytes */

struct hicain_cmd_reg_mr {
	__le32 pd;
	__le32 access;			/* IB_ACCESS_* */
	__le64 iova;
	__le64 length;
	__le64 page_list_gpa;		/* npages __le64 GPAs */
	__le32 npages;
	__le32 page_shift;		/* 12..30 */
};

struct hicain_cmd_create_cq {
	__le64 ring_gpa;		/* depth x hicain_cqe; with HICAIN_CQ_F_PAGED
					 * the page table: depth x 64 / 4096
					 * __le64 GPAs of 4 KiB pages, in order */
	__le64 dbrec_gpa;		/* struct hicain_cq_dbrec */
	__le32 depth;			/* power of two */
	__le32 comp_vector;		/* MSI-X HICAIN_IRQ_CQ_BASE + n */
	__le32 flags;			/* 1.9: HICAIN_CQ_F_*; before, 0 */
	__le32 rsvd;
};

/* hicain_cmd_create_cq.flags (also RESIZE_CQ's) */
#define HICAIN_CQ_F_PAGED	0x1	/* ring_gpa is a page table (1.9) */
#define HICAIN_CQ_PAGE_SIZE	4096
#define HICAIN_CQ_MAX_PAGES	16384	/* a page table of at most 128 KiB */

/*
 * CREATE_QP. ABI 1.11 adds the XRC types: IB_QPT_XRC_INI has a PD, a
 * send CQ and an SQ only (recv_cq, srq and the rq_* fields are ignored);
 * IB_QPT_XRC_TGT has none of pd, CQs, SRQ or rings (all ignored) and
 * names its XRC domain in xrcd.
 */
struct hicain_cmd_create_qp {
	__le32 pd;
	__le32 qp_type;			/* HICAIN_QPT_* */
	__le32 send_cq;
	__le32 recv_cq;
	__le32 srq;			/* 0, or an SRQ: the rq_* fields are ignored */
	__le32 sq_depth;		/* power of two */
	__le32 rq_depth;		/* power of two */
	__le32 max_send_sge;
	__le32 max_recv_sge;
	__le32 max_inline;
	__le32 sq_stride;		/* bytes per SQ WQE, multiple of 64 */
	__le32 rq_stride;		/* bytes per RQ WQE, multiple of 16 */
	__le32 sq_sig_all;
	__le32 xrcd;			/* 1.11, IB_QPT_XRC_TGT: its XRCD; else 0 */
	__le64 sq_gpa;
	__le64 rq_gpa;
	__le64 sq_dbrec_gpa;		/* struct hicain_wq_dbrec */
	__le64 rq_dbrec_gpa;
};

/*
 * hicain_cmd_create_qp.qp_type = the kernel's enum ib_qp_type (which
 * libibverbs' enum ibv_qp_type shares from RC on).
 */
#define HICAIN_QPT_SMI		0	/* QP0, InfiniBand only */
#define HICAIN_QPT_GSI		1	/* QP1 */
#define HICAIN_QPT_RC		2
#define HICAIN_QPT_UC		3
#define HICAIN_QPT_UD		4
#define HICAIN_QPT_RAW_PACKET	8	/* ABI 1.16, Ethernet only */
#define HICAIN_QPT_XRC_INI	9	/* ABI 1.11 */
#define HICAIN_QPT_XRC_TGT	10	/* ABI 1.11 */

struct hicain_cmd_modify_qp {
	__le32 qpn;
	__le32 attr_mask;		/* IB_QP_* */
	struct hicain_qp_attr attr;
};

struct hicain_cmd_create_ah {
	__le32 pd;
	__le32 rsvd;
	struct hicain_ah_attr attr;
};

/*
 * CREATE_SRQ: a shared receive queue whose ring lives in guest memory,
 * depth x stride bytes of struct hicain_recv_wqe + SGEs (as a QP's RQ),
 * with its own struct hicain_wq_dbrec. The driver rings HICAIN_DB_QP
 * after it moves the SRQ's prod: that doorbell rescans every SQ, RQ and
 * SRQ producer index.
 */
struct hicain_cmd_create_srq {
	__le32 pd;
	__le32 depth;			/* power of two: max_wr */
	__le32 max_sge;			/* >= 1 */
	__le32 limit;			/* arms SRQ_LIMIT when non-zero, <= depth */
	__le32 stride;			/* multiple of 16, >= 16 + 16 x max_sge */
	__le32 srq_type;		/* 1.11: HICAIN_SRQT_*; before, 0 */
	__le64 ring_gpa;
	__le64 dbrec_gpa;		/* struct hicain_wq_dbrec, 8-byte aligned */
	__le32 xrcd;			/* 1.11, HICAIN_SRQT_XRC: its XRCD */
	__le32 cq;			/* 1.11, HICAIN_SRQT_XRC and _TM: its CQ */
	/* 1.13, HICAIN_SRQT_TM: the tag list and its operations ring,
	 * ops_depth (a power of two) x struct hicain_tm_op_wqe with its
	 * own struct hicain_tm_dbrec.
	 */
	__le32 max_num_tags;		/* 1..device_attr.max_num_tags */
	__le32 max_ops;			/* 1..device_attr.max_tm_ops */
	__le64 ops_ring_gpa;
	__le64 ops_dbrec_gpa;		/* struct hicain_tm_dbrec, 8-byte aligned */
	__le32 ops_depth;		/* >= max_ops */
	__le32 rsvd2;
};

/*
 * hicain_cmd_create_srq.srq_type = enum ib_srq_type. An XRC SRQ's handle
 * is its SRQ number (24 bits), the one XRC requests name in their XRCETH
 * and ibv_get_srq_num returns; its receive completions go to cq.
 */
#define HICAIN_SRQT_BASIC	0
#define HICAIN_SRQT_XRC		1
#define HICAIN_SRQT_TM		2	/* ABI 1.13, HICAIN_CAP_TM */

/* MODIFY_SRQ attr_mask bits = enum ib_srq_attr_mask */
#define HICAIN_SRQ_MAX_WR	0x1	/* resize: see hicain_cmd_modify_srq */
#define HICAIN_SRQ_LIMIT	0x2	/* arm (non-zero) or disarm the limit */

/*
 * MODIFY_SRQ. A resize (HICAIN_SRQ_MAX_WR) moves the SRQ to a new ring:
 * max_wr (a power of two) entries of the stride given at creation at
 * ring_gpa, with a new dbrec at dbrec_gpa whose prod the device reads
 * as the starting point. The device first takes every WQE still in the
 * old ring; the old ring and dbrec are free once the command completed.
 * Without HICAIN_SRQ_MAX_WR, ring_gpa and dbrec_gpa are ignored.
 */
struct hicain_cmd_modify_srq {
	__le32 srqn;
	__le32 attr_mask;		/* HICAIN_SRQ_* */
	__le32 max_wr;
	__le32 limit;
	__le64 ring_gpa;		/* HICAIN_SRQ_MAX_WR: the new ring */
	__le64 dbrec_gpa;		/* HICAIN_SRQ_MAX_WR: the new dbrec */
};

/* QUERY_SRQ result, in hicain_admin_cqe.out */
struct hicain_srq_attr {
	__le32 max_wr;
	__le32 max_sge;
	__le32 srq_limit;		/* 0 once SRQ_LIMIT fired (one-shot) */
	__le32 rsvd;
};

/*
 * QUERY_CLOCK result, in hicain_admin_cqe.out: the device clock now, the
 * clock hicain_cqe.timestamp is read from (the backend host's
 * CLOCK_REALTIME in ns; device_attr hca_core_clock is 1 GHz).
 */
struct hicain_clock {
	__le64 realtime_ns;
};

/* ATTACH_MCAST / DETACH_MCAST: a UD QP joins or leaves a group */
struct hicain_cmd_mcast {
	__le32 qpn;
	__le16 lid;			/* ignored on RoCE */
	__le16 rsvd;
	__u8 gid[16];			/* ff00::/8 or ::ffff:224.0.0.0/4 */
};

/*
 * MAD_IFC (ABI 1.4): the port's subnet management agent answers an SMP
 * (classes 0x01 and 0x81) that the driver hands it directly, as if it had
 * arrived on QP0 from the port itself: a directed-route SMP with HopCount
 * 0, which never reaches the wire (IBA 14.2.2.2), or a LID-routed one.
 * in_gpa holds the HICAIN_MAD_SIZE-byte MAD; resp_len must be at least
 * HICAIN_MAD_SIZE. When out[0] of the completion has HICAIN_MAD_IFC_REPLY,
 * the answer is at resp_gpa; without it the MAD was not the SMA's
 * (a response, another class) and nothing was written. Status EINVAL:
 * handle (the port) is not 1, resp_len is short, or a directed route
 * does not end at this port; EOPNOTSUPP for an SMP on an Ethernet port,
 * which has no SMA; EFAULT: a buffer outside guest RAM.
 *
 * From ABI 1.15 MAD_IFC also takes PerfMgt MADs (class 0x04) on either
 * link layer: the port's performance management agent is the device's
 * (ClassPortInfo, PortCounters, PortCountersExtended of port 1), the same
 * one that answers PerfMgt requests from the wire on InfiniBand.
 */
#define HICAIN_MAD_SIZE		256
#define HICAIN_MAD_IFC_REPLY	0x1	/* hicain_admin_cqe.out[0] */

struct hicain_cmd_mad_ifc {
	__le64 in_gpa;			/* HICAIN_MAD_SIZE bytes */
	__le64 rsvd;
};

/*
 * SET_PORT_CAP (1.6, InfiniBand): the capability bits the host's agents
 * claim now (modify_port's IsSM, ...), the whole set; PortInfo's
 * CapabilityMask is the device's bits plus these. EINVAL for a bit a
 * host cannot claim, EOPNOTSUPP on Ethernet.
 */
struct hicain_cmd_port_cap {
	__le32 cap_mask;
	__le32 rsvd;
};

/* ABI 1.10: ALLOC_MW. type is 1 or 2 (IB_MW_TYPE_*). */
struct hicain_cmd_alloc_mw {
	__le32 pd;
	__le32 type;
};

/*
 * ABI 1.16 (HICAIN_CAP_RAW): CREATE_FLOW steers the Ethernet frames it
 * matches to a raw packet QP (IB_QPT_RAW_PACKET). Each header named in
 * match is compared field by field under its mask (value & mask ==
 * frame & mask); a header not named matches any frame. Wire fields are
 * in network byte order, as in the frame. IPv4 addresses are the first
 * 4 bytes of src_ip/dst_ip (the rest zero). IPV4 and IPV6, and TCP and
 * UDP, exclude each other; TCP or UDP without an IP header matches over
 * both families. A lower priority wins among flows that match.
 */
#define HICAIN_FLOW_ETH		0x1
#define HICAIN_FLOW_IPV4	0x2
#define HICAIN_FLOW_IPV6	0x4
#define HICAIN_FLOW_TCP		0x8
#define HICAIN_FLOW_UDP		0x10

struct hicain_cmd_create_flow {
	__le32 qpn;			/* a raw packet QP */
	__le32 match;			/* HICAIN_FLOW_* */
	__le16 priority;
	__u8 port;			/* 1 */
	__u8 rsvd0;
	__le32 rsvd1;
	__u8 dmac[6];
	__u8 dmac_mask[6];
	__u8 smac[6];
	__u8 smac_mask[6];
	__u8 ether_type[2];		/* after an 802.1Q tag */
	__u8 ether_type_mask[2];
	__u8 vlan_tag[2];		/* the 802.1Q TCI */
	__u8 vlan_tag_mask[2];
	__u8 src_ip[16];
	__u8 src_ip_mask[16];
	__u8 dst_ip[16];
	__u8 dst_ip_mask[16];
	__u8 ip_proto;			/* IPv4 protocol, IPv6 next header */
	__u8 ip_proto_mask;
	__u8 rsvd2[2];
	__u8 src_port[2];
	__u8 src_port_mask[2];
	__u8 dst_port[2];
	__u8 dst_port_mask[2];
};					/* 124 bytes */

/*
 * ABI 1.16: receive-side scaling. A raw packet QP created with sq_depth 0
 * is a receive work queue (ibv_wq); one with sq_depth and rq_depth 0 (no
 * CQs, send_cq and recv_cq ignored) is an RSS QP, which SET_RSS gives, once,
 * an indirection table of 1 << log_table work queues and a Toeplitz hash
 * over the IBV_RX_HASH_* fields (bits 0..7): a frame one of its flows
 * takes goes to table[hash % entries].
 */
#define HICAIN_RSS_KEY_LEN	40
#define HICAIN_RSS_MAX_TABLE	32

struct hicain_cmd_set_rss {
	__le32 qpn;			/* an RSS QP */
	__le32 log_table;		/* 0..5 */
	__le64 fields;			/* IBV_RX_HASH_SRC_IPV4 ... _DST_PORT_UDP */
	__u8 key[HICAIN_RSS_KEY_LEN];
	__le32 table[HICAIN_RSS_MAX_TABLE];	/* work queues (their QPNs) */
};					/* 184 bytes */

struct hicain_cmd_set_addr {
	__u8 mac[6];
	__le16 mtu;			/* bytes */
	__le32 n_ipv4;			/* <= 4 */
	__u8 ipv4[4][4];		/* GID ::ffff:a.b.c.d each */
};

struct hicain_admin_cmd {
	__le16 opcode;
	__le16 rsvd0;
	__le32 cmd_id;			/* echoed in the completion */
	__le64 resp_gpa;		/* for QUERY_* with large results */
	__le32 resp_len;
	__le32 handle;			/* object of destroy/query/index */
	__le64 rsvd1;
	union {
		__u8 raw[224];		/* first: the Go mirror's Payload */
		struct hicain_cmd_reg_mr reg_mr;
		struct hicain_cmd_create_cq create_cq;
		struct hicain_cmd_create_qp create_qp;
		struct hicain_cmd_modify_qp modify_qp;
		struct hicain_cmd_create_ah create_ah;
		struct hicain_cmd_set_addr set_addr;
		struct hicain_cmd_create_srq create_srq;
		struct hicain_cmd_modify_srq modify_srq;
		struct hicain_cmd_mcast mcast;
		struct hicain_cmd_mad_ifc mad_ifc;
		struct hicain_cmd_port_cap port_cap;
		struct hicain_cmd_alloc_mw alloc_mw;
		struct hicain_cmd_create_flow create_flow;
		struct hicain_cmd_set_rss set_rss;
	};
};					/* 256 bytes */

struct hicain_admin_cqe {
	__le32 cmd_id;
	__le16 opcode;
	__le16 status;			/* HICAIN_ST_* */
	__le32 handle;
	__le32 rsvd;
	__u8 out[48];
};					/* 64 bytes */

struct hicain_device_attr {
	__le64 node_guid;
	__le64 sys_image_guid;
	__le64 max_mr_size;
	__le64 page_size_cap;
	__le32 vendor_id;
	__le32 vendor_part_id;
	__le32 hw_ver;
	__le32 max_qp;
	__le32 max_qp_wr;
	__le32 device_cap_flags;
	__le32 max_sge;
	__le32 max_sge_rd;
	__le32 max_cq;
	__le32 max_cqe;
	__le32 max_mr;
	__le32 max_pd;
	__le32 max_qp_rd_atom;
	__le32 max_qp_init_rd_atom;
	__le32 max_res_rd_atom;
	__le32 atomic_cap;
	__le32 max_pkeys;
	__le32 max_inline;
	__le64 max_msg_sz;
	__u8 local_ca_ack_delay;
	__u8 phys_port_cnt;
	__u8 rsvd[6];
	/* 0x078: ABI 1.1 */
	__le32 max_srq;
	__le32 max_srq_wr;
	__le32 max_srq_sge;
	__le32 max_mcast_grp;
	__le32 max_mcast_qp_attach;
	__le32 max_total_mcast_qp_attach;
	__le32 max_ah;
	__le32 max_mw;			/* ABI 1.10 (rsvd before: 0, no windows) */
	/* 0x098: ABI 1.13, struct ibv_tm_caps (0 before: no tag matching) */
	__le32 max_rndv_hdr_size;
	__le32 max_num_tags;
	__le32 tm_flags;		/* IBV_TM_CAP_* */
	__le32 max_tm_ops;
	__le32 max_tm_sge;
	__le32 rsvd_tm;
};					/* 176 bytes */

/*
 * QUERY_DEVICE accepts resp_len >= HICAIN_DEVICE_ATTR_V1_0_SIZE and
 * writes min(resp_len, sizeof(struct hicain_device_attr)) bytes: a 1.0
 * driver gets the fields it knows.
 */
#define HICAIN_DEVICE_ATTR_V1_0_SIZE	120

struct hicain_port_attr {
	__le32 state;
	__le32 max_mtu;
	__le32 active_mtu;
	__le32 gid_tbl_len;
	__le32 port_cap_flags;
	__le32 max_msg_sz;
	__le32 bad_pkey_cntr;
	__le32 qkey_viol_cntr;
	__le32 pkey_tbl_len;
	__le16 lid;
	__le16 sm_lid;
	__u8 lmc;
	__u8 max_vl_num;
	__u8 sm_sl;
	__u8 subnet_timeout;
	__u8 active_width;
	__u8 active_speed;
	__u8 phys_state;
	__u8 link_layer;
};					/* 48 bytes */

/*
 * QUERY_COUNTERS (ABI 1.2): the port's RoCE traffic counters since the
 * device's transport was created (guest connect, reset, SET_ADDR). They
 * only grow; clearing (a PMA Set of PortCounters) is the driver's
 * baseline. Octets count frames from the Ethernet header through the
 * ICRC, as the transport builds and accepts them (loopback included);
 * multicast counts RoCE frames to a group MAC through the fabric port,
 * unicast the rest of the totals.
 */
struct hicain_port_counters {
	__le64 xmit_data;		/* octets sent */
	__le64 rcv_data;		/* octets received */
	__le64 xmit_pkts;
	__le64 rcv_pkts;
	__le64 unicast_xmit_pkts;
	__le64 unicast_rcv_pkts;
	__le64 multicast_xmit_pkts;
	__le64 multicast_rcv_pkts;
	__le64 rcv_errors;		/* bad ICRC, malformed */
	__le64 xmit_discards;		/* frames the port refused (link down) */
	__le64 rcv_constraint_errors;	/* P_Key mismatches */
	__le64 link_downed;		/* fabric link losses */
	__le64 vl15_dropped;		/* native IB only */
	__le64 qp1_dropped;		/* QP1 packets without a consumer, bad Q_Key */
	__le64 rsvd[2];
};					/* 128 bytes */

/* Event queue entry (BAR2, HICAIN_IRQ_CTRL). */
enum hicain_event_type {
	HICAIN_EV_PORT_ACTIVE = 1,
	HICAIN_EV_PORT_ERR,
	HICAIN_EV_QP_FATAL,		/* handle = qpn, data = reason */
	HICAIN_EV_CQ_ERR,		/* handle = cqn: overflow/bad ring */
	HICAIN_EV_SRQ_LIMIT,		/* handle = srqn: fewer WQEs than limit */
	HICAIN_EV_DEVICE_FATAL,
	HICAIN_EV_QP_LAST_WQE,		/* handle = qpn: an SRQ QP left for ERR */
	HICAIN_EV_SRQ_ERR,		/* handle = srqn, data = reason */
	HICAIN_EV_LID_CHANGE,		/* ABI 1.4, InfiniBand: an SM changed
					 * the port's LID (handle = port) */
	HICAIN_EV_SM_CHANGE,		/* ABI 1.5, InfiniBand: another master
					 * SM LID (handle = port) */
	HICAIN_EV_CLIENT_REREGISTER,	/* ABI 1.5, InfiniBand: the SM set
					 * ClientReregister (handle = port) */
};

/* hicain_eqe.data of HICAIN_EV_QP_FATAL and HICAIN_EV_SRQ_ERR */
#define HICAIN_QP_FATAL_SQ_INDEX	1	/* SQ prod out of range */
#define HICAIN_QP_FATAL_RQ_INDEX	2	/* RQ or SRQ prod out of range */
#define HICAIN_QP_FATAL_WQE		3	/* malformed WQE */
#define HICAIN_QP_FATAL_RING		4	/* ring or dbrec not readable */
#define HICAIN_QP_FATAL_TRANSPORT	5	/* the transport's fatal error */

/* hicain_eqe.data of HICAIN_EV_CQ_ERR */
#define HICAIN_CQ_ERR_OVERRUN		1	/* a completion was lost */

struct hicain_eqe {
	__le32 type;
	__le32 handle;
	__le32 data;
	__le32 seq;			/* eq_prod value when written */
};

/* L2 ring descriptor (BAR2); buffers are in guest RAM. */
#define HICAIN_L2_F_ERR		0x1	/* device: frame dropped */
#define HICAIN_L2_MAX_FRAME	9216

struct hicain_l2_desc {
	__le64 addr;			/* GPA of the buffer */
	__le16 len;			/* TX: frame length; RX: device writes it */
	__le16 flags;
	__le16 buf_len;			/* RX: buffer size posted */
	__le16 rsvd;
};

/*
 * Work queues in guest memory.
 *
 * ABI 1.18: no_db, in the dbrec of an RQ or SRQ, is the device's word
 * (a driver of 1.17 or before has 8-byte dbrecs, and the device leaves
 * it alone). Non-zero says the device holds enough of the queue's
 * receive WQEs and will fetch the ring again by itself before it runs
 * short: a driver that posts receives may then leave out the
 * HICAIN_DB_QP doorbell. The driver stores prod (release), then a full
 * barrier, then reads no_db, and rings while it reads 0. The device
 * stores 0 before it fetches the ring and whenever it wants every
 * doorbell again (a queue running short, a QP in ERR or RESET, an SRQ
 * with its limit armed); it stores non-zero only after a fetch, so that
 * a WQE posted without a doorbell is fetched before the device needs it.
 * Zero, as after allocation, is always safe: the driver rings.
 */
struct hicain_wq_dbrec {		/* SQ, RQ or SRQ, 8-byte aligned */
	__le32 prod;			/* driver: WQEs posted */
	__le32 cons;			/* device: WQEs taken */
	__le32 no_db;			/* 1.18, device: receive doorbells not needed */
	__le32 rsvd;
};

/*
 * ABI 1.13: the dbrec of a TM SRQ's ops ring. busy is the device's set
 * of tag handles in use (bit h: handle h holds a tagged buffer), stored
 * whenever it changes (an ADD, a DEL, a message consuming a tag) and
 * before that operation's cons or that message's completion: a handle
 * whose bit is clear, and whose last ADD the device has taken, may be
 * added again.
 */
struct hicain_tm_dbrec {
	__le32 prod;			/* driver: operations posted */
	__le32 cons;			/* device: operations taken */
	__le64 busy;			/* device: handles in use */
};

#define HICAIN_CQ_ARM_NEXT	1
#define HICAIN_CQ_ARM_SOLICITED	2

struct hicain_cq_dbrec {		/* 16-byte aligned */
	__le32 prod;			/* device: CQEs written */
	__le32 cons;			/* driver: CQEs consumed */
	__le32 arm;			/* driver sets, device clears (CAS) */
	/*
	 * ABI 1.7, device: +1 each time the device clears arm and raises
	 * the CQ's vector (before it raises it), from 0 at CREATE_CQ. The
	 * interrupt handler tells by it which CQs of a vector fired, also
	 * for CQs that a process arms through a mapped dbrec (the kernel
	 * never sees those arm). A 1.6 device leaves it 0.
	 */
	__le32 events;
};

struct hicain_sge {
	__le64 addr;
	__le32 length;
	__le32 lkey;
};

/* opcodes = enum ib_wr_opcode of libibverbs (IBV_WR_*) */
#define HICAIN_WR_RDMA_WRITE		0
#define HICAIN_WR_RDMA_WRITE_IMM	1
#define HICAIN_WR_SEND			2
#define HICAIN_WR_SEND_IMM		3
#define HICAIN_WR_RDMA_READ		4
#define HICAIN_WR_ATOMIC_CMP_SWP	5
#define HICAIN_WR_ATOMIC_FETCH_ADD	6
/*
 * ABI 1.10, RC only. LOCAL_INV and SEND_INV carry the R_Key to
 * invalidate in imm_data (as ibv_send_wr's invalidate_rkey shares
 * imm_data). A BIND_MW WQE has no SGEs and carries:
 *   rkey         the window (its index bits; the variant byte is not
 *                compared), remote_addr the first address it covers,
 *   compare_add  its length (0: unbind, type 1 only),
 *   imm_data     the window's new R_Key (only bits 7..0 are the
 *                consumer's; the rest must be rkey's),
 *   swap         bits 31..0 the L_Key of the MR it covers, bits 63..32
 *                the access it grants (IBV_ACCESS_REMOTE_*).
 * Errors: a bind that breaks a rule of IBA 10.6.7.2 completes with
 * IBV_WC_MW_BIND_ERR, a LOCAL_INV of a key that is not a bound type 2
 * window with IBV_WC_LOC_QP_OP_ERR; both move the QP to ERR.
 */
#define HICAIN_WR_LOCAL_INV		7
#define HICAIN_WR_BIND_MW		8
#define HICAIN_WR_SEND_INV		9
/*
 * ABI 1.10, RC only: RDMA ATOMIC WRITE (IBA 1.5). remote_addr (8-byte
 * aligned) and rkey as an RDMA WRITE; the 8-byte value is one SGE or
 * inline data of 8 bytes, or, with num_sge 0 and no inline data,
 * compare_add (the value's bytes in memory order). It completes with
 * IBV_WC_ATOMIC_WRITE.
 */
#define HICAIN_WR_ATOMIC_WRITE		15

/* send flags = IBV_SEND_* */
#define HICAIN_SEND_FENCE	0x1
#define HICAIN_SEND_SIGNALED	0x2
#define HICAIN_SEND_SOLICITED	0x4
#define HICAIN_SEND_INLINE	0x8	/* inline_len bytes follow the header */
/*
 * ABI 1.3, a bit no IBV_SEND_* flag uses: the WQE of a UD, GSI or SMI QP
 * carries its address vector, a struct hicain_wqe_av right after the
 * 64-byte header, and the SGEs or the inline data follow the AV; the
 * ah field is ignored. The driver needs no CREATE_AH (an admin command,
 * which sleeps) to send a datagram: it is what an AH made in atomic
 * context uses. The QP's send stride must hold header, AV and data.
 */
#define HICAIN_SEND_AV		0x8000

struct hicain_send_wqe {
	__le64 wr_id;
	__u8 opcode;
	__u8 num_sge;
	__le16 send_flags;
	__le32 imm_data;		/* host order number, as ibv_send_wr */
	__le64 remote_addr;
	__le32 rkey;
	__le32 inline_len;
	__le64 compare_add;
	__le64 swap;
	__le32 ah;			/* UD: CREATE_AH handle, the QP's PD
					 * (ignored with HICAIN_SEND_AV) */
	__le32 remote_qpn;		/* UD (ignored for a multicast AH) */
	__le32 remote_qkey;		/* UD: bit 31 set = the QP's Q_Key */
	__le32 remote_srqn;		/* 1.11, XRC_INI: the target's XRC SRQ
					 * number (24 bits); else 0 */
	/* struct hicain_sge sge[num_sge] or inline data */
};					/* 64 bytes */

/* The address vector of a HICAIN_SEND_AV WQE, checked as CREATE_AH checks
 * it, with the QP's PD.
 */
struct hicain_wqe_av {
	struct hicain_ah_attr attr;
	__le32 rsvd[2];
};					/* 48 bytes */

/*
 * ABI 1.13: an operation on a tag-matching SRQ's tag list (struct
 * ibv_ops_wr), in the SRQ's ops ring. The poster picks the handle of
 * an ADD (below the SRQ's max_num_tags, not in use). A tagged buffer
 * is sge; a zero length means none. The device completes the
 * operation on the SRQ's CQ (IBV_WC_TM_ADD + opcode) when flags has
 * IBV_OPS_SIGNALED, or with an error status.
 */
struct hicain_tm_op_wqe {
	__le64 wr_id;
	__le32 opcode;			/* IBV_WR_TAG_ADD, _DEL, _SYNC */
	__le32 flags;			/* IBV_OPS_SIGNALED, IBV_OPS_TM_SYNC */
	__le32 unexpected_cnt;
	__le32 handle;
	__le64 recv_wr_id;		/* ADD: the wr_id of its TM_RECV */
	__le64 tag;			/* ADD */
	__le64 mask;			/* ADD */
	struct hicain_sge sge;		/* ADD */
};					/* 64 bytes */

struct hicain_recv_wqe {
	__le64 wr_id;
	__le32 num_sge;
	__le32 rsvd;
	/* struct hicain_sge sge[num_sge] */
};					/* 16 bytes */

/* CQE = struct ib_wc; status/opcode/flags are IB_WC_* (ibv numbering). */
/* ABI 1.10: a receive of a SEND_WITH_INV has IBV_WC_WITH_INV (1 << 3;
 * the kernel's IB_WC_WITH_INVALIDATE is 1 << 2) in wc_flags and the
 * invalidated R_Key in imm_data, a little-endian number.
 */
#define HICAIN_WC_WITH_INV	0x8
/* The sl of a RoCEv2 UD receive's CQE: the L3 header type of the
 * datagram (as ConnectX reports it), since RoCE has no service level.
 */
#define HICAIN_SL_ROCE_IPV6 0x1
#define HICAIN_SL_ROCE_IPV4 0x2

struct hicain_cqe {
	__le64 wr_id;
	__le32 status;
	__le32 opcode;
	__le32 vendor_err;
	__le32 byte_len;
	__le32 imm_data;
	__le32 qp_num;
	__le32 src_qp;
	__le32 wc_flags;
	union {
		struct {
			__le16 pkey_index;
			__le16 slid;
			__u8 sl;
			__u8 dlid_path_bits;
			__u8 rsvd0[2];
		};
		/* ABI 1.13, opcodes IBV_WC_TM_*: the message's TMH tag
		 * (TM_RECV with IBV_WC_TM_MATCH); imm_data is its app_ctx.
		 */
		__le64 tm_tag;
	};
	/*
	 * ABI 1.12 (HICAIN_CAP_CQE_TS): when the device wrote the CQE, in
	 * nanoseconds since the Unix epoch on the host's real-time clock.
	 * It is both the free-running completion clock (1 GHz) and the
	 * wall clock; a guest's own clock may differ from the host's.
	 */
	__le64 timestamp;
	/* ABI 1.13: the tag handle of a TM_ADD, a TM_DEL and a TM_RECV
	 * with IBV_WC_TM_MATCH (it is free again once that completes).
	 */
	__le32 tm_handle;
	__u8 rsvd[4];			/* rsvd[3]: the provider's own mark */
};					/* 64 bytes */

/*
 * The size of every structure above, checked wherever this header is
 * compiled: the kernel modules, the provider and the Go mirror's
 * generator (cgo -godefs).
 */
HINIC_ABI_SIZE(hicain_dev_hdr, 0x100);
HINIC_ABI_SIZE(hicain_ah_attr, 40);
HINIC_ABI_SIZE(hicain_qp_attr, 88);
HINIC_ABI_SIZE(hicain_cmd_reg_mr, 40);
HINIC_ABI_SIZE(hicain_cmd_create_cq, 32);
HINIC_ABI_SIZE(hicain_cmd_create_qp, 88);
HINIC_ABI_SIZE(hicain_cmd_modify_qp, 96);
HINIC_ABI_SIZE(hicain_cmd_create_ah, 48);
HINIC_ABI_SIZE(hicain_cmd_create_srq, 80);
HINIC_ABI_SIZE(hicain_cmd_modify_srq, 32);
HINIC_ABI_SIZE(hicain_srq_attr, 16);
HINIC_ABI_SIZE(hicain_cmd_mcast, 24);
HINIC_ABI_SIZE(hicain_cmd_mad_ifc, 16);
HINIC_ABI_SIZE(hicain_cmd_port_cap, 8);
HINIC_ABI_SIZE(hicain_cmd_alloc_mw, 8);
HINIC_ABI_SIZE(hicain_cmd_set_addr, 28);
HINIC_ABI_SIZE(hicain_admin_cmd, 256);
HINIC_ABI_SIZE(hicain_admin_cqe, 64);
HINIC_ABI_SIZE(hicain_device_attr, 176);
HINIC_ABI_SIZE(hicain_port_attr, 48);
HINIC_ABI_SIZE(hicain_port_counters, 128);
HINIC_ABI_SIZE(hicain_eqe, 16);
HINIC_ABI_SIZE(hicain_l2_desc, 16);
HINIC_ABI_SIZE(hicain_wq_dbrec, 16);
HINIC_ABI_SIZE(hicain_tm_dbrec, 16);
HINIC_ABI_SIZE(hicain_cq_dbrec, 16);
HINIC_ABI_SIZE(hicain_sge, 16);
HINIC_ABI_SIZE(hicain_send_wqe, 64);
HINIC_ABI_SIZE(hicain_wqe_av, 48);
HINIC_ABI_SIZE(hicain_tm_op_wqe, 64);
HINIC_ABI_SIZE(hicain_recv_wqe, 16);
HINIC_ABI_SIZE(hicain_cqe, 64);

#endif /* HICAIN_ABI_H */
