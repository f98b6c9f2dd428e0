package device

import "github.com/PacketFive/hinic/internal/ivshmem"

// BackendPeerID is the ivshmem peer ID of the backend (the pseudo-peer
// whose doorbell vectors the guest rings, device-facts §1.6).
const BackendPeerID = ivshmem.BackendPeerID

// The ivshmem server protocol and the eventfd and memfd helpers live in
// internal/ivshmem, shared with the GPU backend.
var (
	ivshmemSetup    = ivshmem.Setup
	newEventfds     = ivshmem.NewEventfds
	closeFDs        = ivshmem.CloseFDs
	signalEventfd   = ivshmem.Signal
	drainEventfd    = ivshmem.Drain
	newSharedMemory = ivshmem.NewSharedMemory
)
