/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * hidev_abi.h - what the HiNIC device ABIs share. The NIC's device
 * header (struct hicain_dev_hdr, hicain_abi.h) and the GPU's (struct
 * higpu_dev_hdr, higpu_abi.h), each at the start of BAR2 of an
 * ivshmem-doorbell function, begin with the same identity and hold at
 * 0x080 the same status and handshake block, whose bits mean the same
 * for both devices.
 *
 * Each ABI header lays its fields out from the lists below and names
 * the bits with its own prefix (HICAIN_DEV_LIVE is HINIC_DEV_LIVE), so
 * its names and offsets stay what the Go mirrors check. struct
 * hinic_dev_id and struct hinic_dev_status are the same fields as views
 * that code shared by both drivers (hidev_ivshmem.h) reads either
 * header through.
 */
#ifndef HIDEV_ABI_H
#define HIDEV_ABI_H

#ifdef __KERNEL__
#include <linux/build_bug.h>	/* static_assert */
#include <linux/types.h>
#else
#include <linux/types.h>
#include <assert.h>		/* static_assert (C11) */
#endif

/*
 * HINIC_ABI_SIZE - assert that struct name is size bytes, wherever a
 * device ABI header is compiled: the kernel, user space and cgo (C11
 * static_assert, from the headers included above).
 */
#define HINIC_ABI_SIZE(name, size) \
	static_assert(sizeof(struct name) == (size), "struct " #name " is not " #size " bytes")

/* dev_status bits (device writes). */
#define HINIC_DEV_READY		0x1	/* header valid, accepts the handshake */
#define HINIC_DEV_LIVE		0x2	/* driver accepted: the device serves */
#define HINIC_DEV_FATAL		0x4	/* fatal_code says why; reset needed */

/* driver_status bits (driver writes, then rings the control doorbell). */
#define HINIC_DRV_OK		0x1	/* driver bound and ready */
#define HINIC_DRV_MSIX_ON	0x2	/* MSI-X enabled: interrupts work */
#define HINIC_DRV_RESET		0x4	/* request a reset; device clears it */

/*
 * 0x000: identity, written once by the device, magic last: a driver
 * that sees its magic may read the rest.
 */
#define HINIC_DEV_ID_FIELDS						\
	__le32 magic;							\
	__le16 abi_major;						\
	__le16 abi_minor;						\
	__le16 vendor_id;						\
	__le16 device_id;						\
	__le32 bar_size

/* 0x080: status and handshake. */
#define HINIC_DEV_STATUS_OFF	0x080
#define HINIC_DEV_STATUS_FIELDS						\
	__le32 dev_status;	/* device writes */			\
	__le32 driver_status;	/* driver writes */			\
	__le32 fatal_code;	/* device writes */			\
	__le32 reset_count;	/* device increments at each reset */	\
	__le32 driver_abi	/* driver writes (major << 16 | minor) */

struct hinic_dev_id {
	HINIC_DEV_ID_FIELDS;
};

struct hinic_dev_status {
	HINIC_DEV_STATUS_FIELDS;
};

static_assert(sizeof(struct hinic_dev_id) == 0x10, "hinic_dev_id");
static_assert(sizeof(struct hinic_dev_status) == 0x14, "hinic_dev_status");

#endif /* HIDEV_ABI_H */
