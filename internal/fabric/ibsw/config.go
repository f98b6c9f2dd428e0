package ibsw

import (
	"errors"
	"fmt"

	"github.com/PacketFive/hinic/internal/clock"
	"github.com/PacketFive/hinic/internal/proto"
)

// Limits and defaults of a switch.
const (
	// MaxPorts is the largest number of external ports: port numbers are
	// one byte, 255 is reserved and 0 is the management port.
	MaxPorts = 254

	// MaxLinearFDBCap is the largest LinearFDBCap: every unicast LID
	// (0x0000-0xBFFF), 768 blocks of 64.
	MaxLinearFDBCap = proto.LIDUnicastMax + 1
	// DefaultLinearFDBCap is the number of LFT entries by default: all
	// of them (ibsim HEAD has the same 48K).
	DefaultLinearFDBCap = MaxLinearFDBCap

	// DefaultMulticastFDBCap is the number of MFT entries (MLIDs
	// 0xC000-0xC3FF), as ibsim and most hardware have.
	DefaultMulticastFDBCap = 1024
	// MaxMulticastFDBCap is the largest MulticastFDBCap: 16383 MLIDs
	// (0xC000-0xFFFE) rounded up to whole 32-entry blocks.
	MaxMulticastFDBCap = 16384

	// DefaultPartitionEnforcementCap is the size of the P_Key table of
	// each external port (two blocks). A non-zero value makes OpenSM
	// program the tables of the switch ports that face CAs and turn on
	// PartitionEnforcementInbound/Outbound there (fabric-facts 2.4 step
	// 4), so partitions are enforced in the fabric as on real switches;
	// with 0 the switch would forward every P_Key.
	DefaultPartitionEnforcementCap = 64
	// MaxPKeyTableSize bounds PartitionCap and PartitionEnforcementCap.
	MaxPKeyTableSize = 4096

	// DefaultPartitionCap is the size of the P_Key table of port 0
	// (NodeInfo.PartitionCap): one block.
	DefaultPartitionCap = 32

	// DefaultVendorID is NodeInfo.VendorID: 0xFFFFFF, no IEEE OUI. It is
	// the vendor_id Linux rxe reports for a software device (its source
	// cites IBTA v1.4 A3.3.1); HiNIC owns no OUI and must not borrow
	// Mellanox's 0x0002C9 or ibsim's Voltaire 0x0008F1.
	DefaultVendorID = 0xFFFFFF
	// DefaultDeviceID is NodeInfo.DeviceID. It lies outside every range
	// OpenSM and libibnetdisc treat as Mellanox (fabric-facts 2.5), so no
	// MlnxExtPortInfo (0xFF90) is sent to the switch.
	DefaultDeviceID = 0x5E10
	// DefaultRevision is NodeInfo.Revision.
	DefaultRevision = 1

	// DefaultMTUCap is PortInfo.MTUCap: 4096 bytes.
	DefaultMTUCap = proto.IBMTU4096
	// DefaultVLCap is PortInfo.VLCap: data VLs 0-7. OperationalVLs starts
	// at VL0 and the SM raises it (OpenSM: min(max_op_vls, both VLCaps)).
	DefaultVLCap = proto.VLCapVL0To7
)

// Config describes one switch. Zero values select the defaults above.
type Config struct {
	// NodeGUID is the switch's node GUID; port 0's GUID is the same
	// (a switch has one port GUID, that of its management port).
	NodeGUID uint64
	// SystemImageGUID defaults to NodeGUID.
	SystemImageGUID uint64
	// NumPorts is the number of external ports, 1..NumPorts
	// (at most MaxPorts).
	NumPorts int
	// Description is NodeDescription, at most 64 bytes of UTF-8.
	Description string

	// VendorID (24-bit IEEE OUI), DeviceID and Revision fill NodeInfo.
	VendorID uint32
	DeviceID uint16
	Revision uint32

	// LinearFDBCap is the number of LFT entries: a multiple of 64, at
	// most MaxLinearFDBCap.
	LinearFDBCap int
	// MulticastFDBCap is the number of MFT entries: a multiple of 32, at
	// most MaxMulticastFDBCap.
	MulticastFDBCap int
	// PartitionEnforcementCap is the P_Key table size of each external
	// port; PartitionCap that of port 0. Both at most MaxPKeyTableSize.
	PartitionEnforcementCap int
	PartitionCap            int

	// MTUCap (proto.IBMTU256..IBMTU4096) and VLCap (proto.VLCapVL0..
	// VLCapVL0To14) are advertised in every port's PortInfo.
	MTUCap uint8
	VLCap  uint8

	// Clock times the M_Key lease (IBA 14.2.4.2); nil is the system
	// clock. Tests pass a manual one. The switch only reads it (Now) and
	// compares readings with deadlines it computed, on the goroutine that
	// owns it.
	Clock clock.Clock
}

// ErrConfig is wrapped by every error New returns.
var ErrConfig = errors.New("ibsw: bad config")

// withDefaults returns c with zero fields replaced by defaults, or an error
// naming the first bad field.
func (c Config) withDefaults() (Config, error) {
	bad := func(format string, a ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
	}
	if c.NodeGUID == 0 {
		return bad("NodeGUID must not be 0")
	}
	if c.NumPorts < 1 || c.NumPorts > MaxPorts {
		return bad("NumPorts %d outside 1..%d", c.NumPorts, MaxPorts)
	}
	if len(c.Description) > proto.NodeDescriptionSize {
		return bad("Description is %d bytes, more than %d", len(c.Description), proto.NodeDescriptionSize)
	}
	if c.SystemImageGUID == 0 {
		c.SystemImageGUID = c.NodeGUID
	}
	if c.VendorID == 0 {
		c.VendorID = DefaultVendorID
	}
	if c.VendorID > 0xFFFFFF {
		return bad("VendorID %#x is wider than 24 bits", c.VendorID)
	}
	if c.DeviceID == 0 {
		c.DeviceID = DefaultDeviceID
	}
	if c.Revision == 0 {
		c.Revision = DefaultRevision
	}
	if c.LinearFDBCap == 0 {
		c.LinearFDBCap = DefaultLinearFDBCap
	}
	if c.LinearFDBCap < 0 || c.LinearFDBCap > MaxLinearFDBCap || c.LinearFDBCap%proto.LFTEntriesPerBlock != 0 {
		return bad("LinearFDBCap %d is not a multiple of %d in 0..%d", c.LinearFDBCap, proto.LFTEntriesPerBlock, MaxLinearFDBCap)
	}
	if c.MulticastFDBCap == 0 {
		c.MulticastFDBCap = DefaultMulticastFDBCap
	}
	if c.MulticastFDBCap < 0 || c.MulticastFDBCap > MaxMulticastFDBCap || c.MulticastFDBCap%proto.MFTEntriesPerBlock != 0 {
		return bad("MulticastFDBCap %d is not a multiple of %d in 0..%d", c.MulticastFDBCap, proto.MFTEntriesPerBlock, MaxMulticastFDBCap)
	}
	if c.PartitionEnforcementCap == 0 {
		c.PartitionEnforcementCap = DefaultPartitionEnforcementCap
	}
	if c.PartitionCap == 0 {
		c.PartitionCap = DefaultPartitionCap
	}
	if c.PartitionEnforcementCap < 0 || c.PartitionEnforcementCap > MaxPKeyTableSize ||
		c.PartitionCap < 0 || c.PartitionCap > MaxPKeyTableSize {
		return bad("P_Key table sizes %d/%d outside 1..%d", c.PartitionCap, c.PartitionEnforcementCap, MaxPKeyTableSize)
	}
	if c.MTUCap == 0 {
		c.MTUCap = DefaultMTUCap
	}
	if proto.IBMTUBytes(c.MTUCap) == 0 {
		return bad("MTUCap %d is not an MTU encoding", c.MTUCap)
	}
	if c.VLCap == 0 {
		c.VLCap = DefaultVLCap
	}
	if proto.VLCapNumVLs(c.VLCap) == 0 {
		return bad("VLCap %d is not a VLCap encoding", c.VLCap)
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	return c, nil
}
