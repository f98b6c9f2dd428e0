package proto

import (
	"encoding/binary"
)

// NodeInfo (IBA 14.2.5.3, table 146), 40 bytes:
//
//	offset  bits  field
//	     0     8  BaseVersion
//	     1     8  ClassVersion
//	     2     8  NodeType
//	     3     8  NumPorts
//	     4    64  SystemImageGUID
//	    12    64  NodeGUID
//	    20    64  PortGUID
//	    28    16  PartitionCap
//	    30    16  DeviceID
//	    32    32  Revision
//	    36     8  LocalPortNum
//	    37    24  VendorID
const (
	niBaseVersion     = 0
	niClassVersion    = 1
	niNodeType        = 2
	niNumPorts        = 3
	niSystemImageGUID = 4
	niNodeGUID        = 12
	niPortGUID        = 20
	niPartitionCap    = 28
	niDeviceID        = 30
	niRevision        = 32
	niLocalPortNum    = 36
	niVendorID        = 37

	// NodeInfoSize is the size of NodeInfo.
	NodeInfoSize = 40
)

// NodeType values (IBA 14.2.5.3).
const (
	// NodeTypeCA is a channel adapter.
	NodeTypeCA = 1
	// NodeTypeSwitch is a switch.
	NodeTypeSwitch = 2
	// NodeTypeRouter is a router.
	NodeTypeRouter = 3
)

// NodeInfo is a view of the NodeInfo attribute.
type NodeInfo []byte

// ParseNodeInfo checks that b holds NodeInfoSize bytes and returns a view
// of them.
func ParseNodeInfo(b []byte) (NodeInfo, error) {
	if len(b) < NodeInfoSize {
		return nil, ErrMADTruncated
	}
	return NodeInfo(b[:NodeInfoSize]), nil
}

// BaseVersion returns the MAD base version the node supports.
func (n NodeInfo) BaseVersion() uint8 { return n[niBaseVersion] }

// ClassVersion returns the SM class version the node supports.
func (n NodeInfo) ClassVersion() uint8 { return n[niClassVersion] }

// NodeType returns the node type (a NodeType constant).
func (n NodeInfo) NodeType() uint8 { return n[niNodeType] }

// NumPorts returns the number of physical ports.
func (n NodeInfo) NumPorts() uint8 { return n[niNumPorts] }

// SystemImageGUID returns the system image GUID.
func (n NodeInfo) SystemImageGUID() uint64 {
	return binary.BigEndian.Uint64(n[niSystemImageGUID:])
}

// NodeGUID returns the node GUID.
func (n NodeInfo) NodeGUID() uint64 { return binary.BigEndian.Uint64(n[niNodeGUID:]) }

// PortGUID returns the GUID of the port the SMP was received on (of port 0
// for a switch).
func (n NodeInfo) PortGUID() uint64 { return binary.BigEndian.Uint64(n[niPortGUID:]) }

// PartitionCap returns the number of P_Key table entries per port.
func (n NodeInfo) PartitionCap() uint16 { return binary.BigEndian.Uint16(n[niPartitionCap:]) }

// DeviceID returns the vendor's device ID.
func (n NodeInfo) DeviceID() uint16 { return binary.BigEndian.Uint16(n[niDeviceID:]) }

// Revision returns the device revision.
func (n NodeInfo) Revision() uint32 { return binary.BigEndian.Uint32(n[niRevision:]) }

// LocalPortNum returns the number of the port the SMP was received on.
func (n NodeInfo) LocalPortNum() uint8 { return n[niLocalPortNum] }

// VendorID returns the 24-bit vendor OUI.
func (n NodeInfo) VendorID() uint32 { return madUint24(n[niVendorID:]) }

// SetPortGUID writes PortGUID, which depends on the receiving port.
func (n NodeInfo) SetPortGUID(guid uint64) { binary.BigEndian.PutUint64(n[niPortGUID:], guid) }

// SetLocalPortNum writes LocalPortNum, which depends on the receiving port.
func (n NodeInfo) SetLocalPortNum(port uint8) { n[niLocalPortNum] = port }

// NodeInfoFields holds the fields of NodeInfo to encode.
type NodeInfoFields struct {
	BaseVersion     uint8  // MAD base version supported
	ClassVersion    uint8  // SM class version supported
	NodeType        uint8  // NodeTypeCA, NodeTypeSwitch or NodeTypeRouter
	NumPorts        uint8  // number of physical ports
	SystemImageGUID uint64 // system image GUID
	NodeGUID        uint64 // node GUID
	PortGUID        uint64 // GUID of the receiving port
	PartitionCap    uint16 // P_Key table entries per port
	DeviceID        uint16 // vendor's device ID
	Revision        uint32 // device revision
	LocalPortNum    uint8  // receiving port number
	VendorID        uint32 // 24-bit vendor OUI; the upper 8 bits are ignored
}

// Encode writes every field of f; n must hold NodeInfoSize bytes.
func (n NodeInfo) Encode(f *NodeInfoFields) {
	n[niBaseVersion] = f.BaseVersion
	n[niClassVersion] = f.ClassVersion
	n[niNodeType] = f.NodeType
	n[niNumPorts] = f.NumPorts
	binary.BigEndian.PutUint64(n[niSystemImageGUID:], f.SystemImageGUID)
	binary.BigEndian.PutUint64(n[niNodeGUID:], f.NodeGUID)
	binary.BigEndian.PutUint64(n[niPortGUID:], f.PortGUID)
	binary.BigEndian.PutUint16(n[niPartitionCap:], f.PartitionCap)
	binary.BigEndian.PutUint16(n[niDeviceID:], f.DeviceID)
	binary.BigEndian.PutUint32(n[niRevision:], f.Revision)
	n[niLocalPortNum] = f.LocalPortNum
	madPutUint24(n[niVendorID:], f.VendorID)
}

// Fields decodes the view into a NodeInfoFields.
func (n NodeInfo) Fields() NodeInfoFields {
	return NodeInfoFields{
		BaseVersion:     n.BaseVersion(),
		ClassVersion:    n.ClassVersion(),
		NodeType:        n.NodeType(),
		NumPorts:        n.NumPorts(),
		SystemImageGUID: n.SystemImageGUID(),
		NodeGUID:        n.NodeGUID(),
		PortGUID:        n.PortGUID(),
		PartitionCap:    n.PartitionCap(),
		DeviceID:        n.DeviceID(),
		Revision:        n.Revision(),
		LocalPortNum:    n.LocalPortNum(),
		VendorID:        n.VendorID(),
	}
}
