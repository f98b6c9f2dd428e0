// SPDX-License-Identifier: GPL-2.0
/*
 * hicain_ib_admin.c - admin commands of the verbs driver: queries whose
 * result the device writes to memory, commands on one handle, and the
 * destroy of a device object with its epoch check.
 */

#include <linux/dma-mapping.h>

#include "hicain_ib.h"

/*
 * hicain_admin_query - run a QUERY_* command whose result the device
 * writes to memory (resp_gpa), and copy the result to out.
 */
int hicain_admin_query(struct hicain_ibdev *hidev, u16 opcode, u32 handle,
		       void *out, size_t len)
{
	struct device *dma_dev = hicain_dma_dev(hidev);
	struct hicain_admin_cmd cmd = {};
	dma_addr_t dma;
	void *buf;
	int ret;

	buf = dma_alloc_coherent(dma_dev, len, &dma, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	cmd.opcode = cpu_to_le16(opcode);
	cmd.handle = cpu_to_le32(handle);
	cmd.resp_gpa = cpu_to_le64(dma);
	cmd.resp_len = cpu_to_le32(len);
	ret = hicain_admin_exec(hidev->hdev, &cmd, NULL);
	if (!ret)
		memcpy(out, buf, len);
	if (hicain_admin_lost(ret))
		hicain_admin_keep(hidev->hdev, len);
	else
		dma_free_coherent(dma_dev, len, buf, dma);
	return ret;
}

/* hicain_admin_handle - run a command on one handle (destroy, index). */
int hicain_admin_handle(struct hicain_ibdev *hidev, u16 opcode, u32 handle,
			struct hicain_admin_cqe *cqe)
{
	struct hicain_admin_cmd cmd = {};

	cmd.opcode = cpu_to_le16(opcode);
	cmd.handle = cpu_to_le32(handle);
	return hicain_admin_exec(hidev->hdev, &cmd, cqe);
}

/*
 * hicain_create_handle - run cmd, whose fields but the opcode the caller
 * filled, as opcode and put the device's new handle in *handle. *epoch
 * gets the device epoch the handle belongs to, for
 * hicain_destroy_handle.
 */
int hicain_create_handle(struct hicain_ibdev *hidev, struct hicain_admin_cmd *cmd, u16 opcode,
			 int *epoch, u32 *handle)
{
	struct hicain_admin_cqe cqe;
	int ret;

	*epoch = atomic_read(&hidev->epoch);
	cmd->opcode = cpu_to_le16(opcode);
	ret = hicain_admin_exec(hidev->hdev, cmd, &cqe);
	if (ret)
		return ret;
	*handle = le32_to_cpu(cqe.handle);
	return 0;
}

/*
 * hicain_undo_create - destroy an object that create could not hand out
 * after all. Returns whether the device no longer has it, so that the
 * memory it used may be freed: never on a dead device.
 */
bool hicain_undo_create(struct hicain_ibdev *hidev, u16 opcode, u32 handle)
{
	int ret = hicain_admin_handle(hidev, opcode, handle, NULL);

	return !hicain_destroy_status(ret) && !hicain_ib_dead(hidev);
}

/*
 * hicain_destroy_handle - destroy object handle on the device with
 * opcode, unless it was made before the device's last reset (epoch), which
 * took it already. A device that is gone (-EIO) freed it too.
 */
int hicain_destroy_handle(struct hicain_ibdev *hidev, int epoch, u16 opcode, u32 handle)
{
	if (epoch != atomic_read(&hidev->epoch))
		return 0;
	return hicain_destroy_status(hicain_admin_handle(hidev, opcode, handle, NULL));
}
