package device

import (
	"github.com/PacketFive/hinic/internal/guestmem"
	"github.com/PacketFive/hinic/internal/rdma"
)

// Guest RAM mapping and GPA translation live in internal/guestmem,
// shared with the GPU backend; these names keep the device's API.
type (
	// Machine is a QEMU x86 machine type (guestmem.Machine).
	Machine = guestmem.Machine
	// GuestRAM is a guest's RAM file mapped for DMA (guestmem.RAM).
	GuestRAM = guestmem.RAM
)

// Machine types.
const (
	MachinePC  = guestmem.MachinePC
	MachineQ35 = guestmem.MachineQ35
)

// ErrOutsideRAM is returned for a guest-physical range that is not RAM.
var ErrOutsideRAM = guestmem.ErrOutsideRAM

// OpenGuestRAM opens or creates the RAM file at path as QEMU does and
// maps it shared (guestmem.Open).
func OpenGuestRAM(path string, size uint64, m Machine) (*GuestRAM, error) {
	return guestmem.Open(path, size, m)
}

// BelowFourG returns how many bytes of RAM QEMU 7.2 maps below 4 GiB
// (guestmem.BelowFourG).
func BelowFourG(m Machine, ramSize uint64) (uint64, error) { return guestmem.BelowFourG(m, ramSize) }

var _ rdma.Bounded = (*GuestRAM)(nil)
var _ rdma.Memory = (*GuestRAM)(nil)
