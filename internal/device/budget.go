package device

import (
	"unsafe"

	"github.com/PacketFive/hinic/internal/rdma"
)

// DefaultMemBudget is the host memory one guest's verbs objects may hold
// when its vNIC sets none (VNICConfig.MemBudget): room for about thirty
// QPs at the largest sizes, or thousands of ordinary ones.
const DefaultMemBudget = 1 << 30

// budget counts the host memory a guest's objects hold: MR page lists,
// QP, SRQ and CQ rings at their full size, AHs, memory windows, XRC
// domains. The guest sizes them all through admin commands and may reuse one page list or one pair of
// rings for any number of objects, so its own memory bounds nothing: a
// command whose object would pass the limit gets ENOMEM, and another
// guest's vNIC, with its own budget, does not notice. Each object is
// charged the most it can come to hold (the rdma package's *Memory
// figures), although the engine allocates as the object is used.
// Worker-owned.
type budget struct {
	limit, used int64
}

// charge takes n bytes from the budget, or reports that they are not
// there.
func (b *budget) charge(n int64) bool {
	if n < 0 || n > b.limit-b.used {
		return false
	}
	b.used += n
	return true
}

func (b *budget) refund(n int64) { b.used -= n }

// The backend's own share of each object, on top of the engine's.
const (
	gqpSize   = int64(unsafe.Sizeof(gqp{}))
	gcqSize   = int64(unsafe.Sizeof(gcq{}))
	gsrqSize  = int64(unsafe.Sizeof(gsrq{}))
	gahSize   = int64(unsafe.Sizeof(gah{}))
	gxrcdSize = int64(unsafe.Sizeof(gxrcd{}))
)

func mrCost(pages uint32) int64 { return rdma.MRMemory(int(pages)) }

func cqCost(depth uint32) int64 { return gcqSize + rdma.CQMemory(int(depth)) }

func srqCost(depth, maxSGE uint32) int64 { return gsrqSize + rdma.SRQMemory(int(depth), int(maxSGE)) }

func ahCost() int64 { return gahSize + rdma.AHMemory() }

// mwCost is a memory window's: the engine's window and the session's map
// entry.
func mwCost() int64 { return rdma.MWMemory() + 16 }

func xrcdCost() int64 { return gxrcdSize + rdma.XRCDMemory() }
