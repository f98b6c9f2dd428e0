package device

import "github.com/PacketFive/hinic/internal/ivshmem"

// BackendPeerID is the ivshmem peer ID of the backend (the pseudo-peer
// whose doorbell vectors the guest rings, device-facts §1.6).
const BackendPeerID = ivshmem.BackendPeerID

// The ivshmem server protocol, the device side of a guest's
// ivshmem-doorbell function (ivshmem.Device) and the eventfd helpers
// live in internal/ivshmem, shared with the GPU backend.
