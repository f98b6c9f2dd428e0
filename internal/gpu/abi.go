package gpu

// The Go mirror of kernel/higpu_abi.h, the one source of truth of the
// HiGPU device ABI, is zabi.go: `go generate` runs cgo -godefs on
// types_abi.go (internal/godefs), and TestABIGenerated fails when
// zabi.go is stale. TestABILayout compiles a C program against the
// header and compares every offset, size and constant of the mirror
// with it; TestABINames fails on a HIGPU_ name the mirror lacks. Field
// tags name the C field; struct names are in abiStructs (abi_test.go).
//
// The structures are read and written as raw little-endian memory (x86-64
// and arm64 hosts).

//go:generate go run ../godefs/mkgodefs types_abi.go zabi.go

// VABase is the first device address of GPU id (HIGPU_VA_BASE, a
// function-like macro that cgo cannot evaluate).
func VABase(id int) uint64 { return VAStride * (uint64(id) + 1) }
