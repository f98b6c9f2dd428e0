package device

// The Go mirror of kernel/hicain_abi.h, the one source of truth of the
// device ABI, is zabi.go: `go generate` runs cgo -godefs on
// types_abi.go (internal/godefs), and TestABIGenerated fails when
// zabi.go is stale. TestABILayout compiles a C program against the
// header and compares every offset, size and constant of the mirror
// with it; TestABINames fails on a HICAIN_ name the mirror lacks.
// Field tags name the C field; struct names are in abiStructs
// (abi_test.go).
//
// The structures are read and written as raw little-endian memory (x86-64
// and arm64 hosts), through asBytes.

//go:generate go run ../godefs/mkgodefs types_abi.go zabi.go

import "unsafe"

// Go has no unions: CQE and CQETM are the two views of struct
// hicain_cqe, written here and checked by TestABILayout.

// CQE is struct hicain_cqe.
type CQE struct {
	WRID         uint64  `c:"wr_id"`
	Status       uint32  `c:"status"`
	Opcode       uint32  `c:"opcode"`
	VendorErr    uint32  `c:"vendor_err"`
	ByteLen      uint32  `c:"byte_len"`
	ImmData      uint32  `c:"imm_data"`
	QPNum        uint32  `c:"qp_num"`
	SrcQP        uint32  `c:"src_qp"`
	WCFlags      uint32  `c:"wc_flags"`
	PKeyIndex    uint16  `c:"pkey_index"`
	SLID         uint16  `c:"slid"`
	SL           uint8   `c:"sl"`
	DLIDPathBits uint8   `c:"dlid_path_bits"`
	_            [2]byte `c:"rsvd0"`
	Timestamp    uint64  `c:"timestamp"` // ABI 1.12: host CLOCK_REALTIME, ns
	TMHandle     uint32  `c:"tm_handle"` // ABI 1.13
	_            [4]byte `c:"rsvd"`
}

// CQETM is the view of a CQE with an IBV_WC_TM_* opcode (ABI 1.13):
// the bytes of pkey_index..rsvd0 hold the TMH tag.
type CQETM struct {
	WRID      uint64  `c:"wr_id"`
	Status    uint32  `c:"status"`
	Opcode    uint32  `c:"opcode"`
	VendorErr uint32  `c:"vendor_err"`
	ByteLen   uint32  `c:"byte_len"`
	ImmData   uint32  `c:"imm_data"` // the TMH's app_ctx
	QPNum     uint32  `c:"qp_num"`
	SrcQP     uint32  `c:"src_qp"`
	WCFlags   uint32  `c:"wc_flags"`
	Tag       uint64  `c:"tm_tag"`
	Timestamp uint64  `c:"timestamp"`
	TMHandle  uint32  `c:"tm_handle"`
	_         [4]byte `c:"rsvd"`
}

// AsBytes returns the memory of *p as a byte slice (for copying ABI
// structures to and from guest memory).
func AsBytes[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// PayloadOf returns the admin command's union viewed as *T.
func PayloadOf[T any](c *AdminCmd) *T {
	var z T
	if unsafe.Sizeof(z) > unsafe.Sizeof(c.Payload) {
		panic("device: payload too large")
	}
	return (*T)(unsafe.Pointer(&c.Payload[0]))
}
