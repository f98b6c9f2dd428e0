// Package gpu is the HiGPU device backend: it emulates a GPU as a PCI
// function that a stock QEMU guest drives through the ivshmem-doorbell
// device, with the ABI of kernel/higpu_abi.h (abi.go mirrors it).
//
// Per GPU it owns: the ivshmem server socket QEMU connects to (BAR2
// holds the device header only), the guest's RAM mapped for DMA
// (internal/guestmem), the device memory (a host file or memfd mapped
// by the backend, never visible to the guest except through commands),
// the command and completion rings in guest memory, contexts with their
// allocations, streams and events, the copy engines and the built-in
// kernels. docs/gpu.md describes the design.
//
// gpu imports the shared leaf packages (ivshmem, guestmem, unixsock);
// it must not import the NIC's packages (device, rdma, fabric).
package gpu
