package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
)

// fuzzBudget is the guest's memory budget in the fuzz targets: what a
// fuzzed size asks beyond it gets ENOMEM, so no input can make the
// backend allocate more than this (plus its fixed cost).
const fuzzBudget = 32 << 20

// newFuzzGuest is a testbed of two vNICs, the first with fuzzBudget,
// with a watchdog that turns a hang into a crash naming the input.
func newFuzzGuest(t *testing.T, what string) *testbed {
	wd := time.AfterFunc(15*time.Second, func() {
		buf := make([]byte, 1<<20)
		os.Stderr.Write(buf[:runtime.Stack(buf, true)])
		panic("hang: " + what)
	})
	t.Cleanup(func() { wd.Stop() })
	return newTestbedConfig(t, 2, func(i int, c *device.VNICConfig) {
		if i == 0 {
			c.MemBudget = fuzzBudget
		}
	})
}

// FuzzAdminCommands: admin commands are the guest's, every byte of
// them: opcodes, handles, GPAs and the sizes (depths, page counts,
// strides, SGE and inline limits, lengths) unmasked. The input is up to
// 16 commands of 256 bytes (cmd_id is the simulator's); they run after a
// PD, two CQs and an MR exist, so that small handles name objects.
// Whatever they hold, the backend must not panic or hang, every command
// must complete (with any status), the vNIC must not go fatal, the
// backend's heap must not grow past the guest's budget, and both vNICs
// must keep serving.
func FuzzAdminCommands(f *testing.F) {
	cmd := func(op uint16, handle uint32, payload ...uint32) []byte {
		var c device.AdminCmd
		c.Opcode, c.Handle = op, handle
		b := device.AsBytes(&c)
		for i, v := range payload {
			binary.LittleEndian.PutUint32(b[32+4*i:], v)
		}
		return append([]byte(nil), b...)
	}
	cat := func(cs ...[]byte) []byte {
		var b []byte
		for _, c := range cs {
			b = append(b, c...)
		}
		return b
	}
	// REG_MR of 2^20 pages and 2^32 pages, a CQ of max_cqe and one of
	// 2^31, a QP of the largest depths, resize and destroy of the seeded
	// CQ, an AH, garbage.
	f.Add(cat(cmd(device.CmdRegMR, 0, 1, 1, 0, 0, 0, 1<<12, 0, 0x10000, 0, 1<<20, 12)))
	f.Add(cat(cmd(device.CmdRegMR, 0, 1, 1, 0, 0, 0xffffffff, 0xffffffff, 0x10000, 0, 0xffffffff, 30)))
	f.Add(cat(cmd(device.CmdCreateCQ, 0, 0x10000, 0, 0x20000, 0, 1<<16, 0), cmd(device.CmdCreateCQ, 0, 0x10000, 0, 0x20000, 0, 1<<31, 0)))
	f.Add(cat(cmd(device.CmdCreateQP, 0, 1, 2, 1, 1, 0, 16384, 32, 256, 576, 0x10000, 0, 0x20000, 0, 16384, 32, 528, 0x10000, 0, 0x20000, 0)))
	f.Add(cat(cmd(device.CmdResizeCQ, 1, 0x10000, 0, 0x20000, 0, 1<<16, 0), cmd(device.CmdDestroyCQ, 1)))
	f.Add(cat(cmd(device.CmdCreateAH, 0, 1), cmd(device.CmdDestroyAH, 1), cmd(device.CmdDeallocPD, 1)))
	// Windows of both types and a bad one, a dealloc by a guessed key,
	// then the PD they hold.
	f.Add(cat(cmd(device.CmdAllocMW, 0, 1, 1), cmd(device.CmdAllocMW, 0, 1, 2), cmd(device.CmdAllocMW, 0, 1, 3),
		cmd(device.CmdDeallocMW, 0x80000001), cmd(device.CmdDeallocPD, 1)))
	// Raw packet QPs (ABI 1.16): one, its flows (Ethernet/IPv4/UDP,
	// an unknown header bit, both families), one destroyed, the QP
	// destroyed while the other stays, and a flow on a QP that is gone.
	f.Add(cat(cmd(device.CmdCreateQP, 0, 1, 8, 1, 1, 0, 16, 16, 1, 1, 0, 128, 32, 0, 0, 0x10000, 0, 0x30000, 0, 0x20000, 0, 0x20008, 0),
		cmd(device.CmdCreateFlow, 0, 0x11, device.FlowEth|device.FlowIPv4|device.FlowUDP, 1<<16),
		cmd(device.CmdCreateFlow, 0, 0x11, 0x40, 1<<16), cmd(device.CmdCreateFlow, 0, 0x11, device.FlowIPv4|device.FlowIPv6, 1<<16),
		cmd(device.CmdCreateFlow, 0, 0x11, device.FlowEth, 1<<16), cmd(device.CmdDestroyFlow, 1),
		cmd(device.CmdDestroyQP, 0x11), cmd(device.CmdDestroyFlow, 2), cmd(device.CmdDestroyQP, 0x11),
		cmd(device.CmdCreateFlow, 0, 0x11, device.FlowEth, 1<<16)))
	// RSS (ABI 1.16): a work queue (no SQ), an RSS QP (no queues), its
	// table of one, a second SET_RSS, the work queue destroyed in use.
	f.Add(cat(cmd(device.CmdCreateQP, 0, 1, 8, 1, 1, 0, 0, 16, 0, 1, 0, 0, 32, 0, 0, 0, 0, 0x30000, 0, 0, 0, 0x20008, 0),
		cmd(device.CmdCreateQP, 0, 1, 8), cmd(device.CmdSetRSS, 0, 0x12, 0, 3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0x11),
		cmd(device.CmdSetRSS, 0, 0x12, 5, 0xff, 0), cmd(device.CmdDestroyQP, 0x11), cmd(device.CmdDestroyQP, 0x12)))
	// XRC (ABI 1.11): a domain, an XRC SRQ in it on the seeded CQ, a
	// target QP in it, an initiator QP, the domain freed while in use.
	f.Add(cat(cmd(device.CmdAllocXRCD, 0),
		cmd(device.CmdCreateSRQ, 0, 1, 16, 1, 0, 32, device.SRQTXRC, 0x10000, 0, 0x20000, 0, 1, 1),
		cmd(device.CmdCreateQP, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1),
		cmd(device.CmdCreateQP, 0, 1, 9, 1, 0, 7, 64, 0, 1, 0, 0, 128, 0, 0, 0, 0x10000, 0, 0, 0, 0x20000, 0),
		cmd(device.CmdDeallocXRCD, 1)))
	f.Add([]byte("\x01\x00\xff\xff garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tb := newFuzzGuest(t, fmt.Sprintf("admin %x", data))
		g := tb.guests[0]
		ctx := testCtx(t)
		if _, err := g.AllocPD(ctx); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := g.CreateCQ(ctx, 64, 0); err != nil {
				t.Fatal(err)
			}
		}
		buf, _ := g.Alloc(1<<16, 4096, false)
		if _, _, err := g.RegMR(ctx, 1, buf, buf, 1<<16, 7); err != nil {
			t.Fatal(err)
		}
		base := heapInUse()
		for i := 0; i < 16 && len(data) > 0; i++ {
			var c device.AdminCmd
			n := copy(device.AsBytes(&c), data)
			data = data[n:]
			var se *guestsim.StatusError
			if _, err := g.Admin(ctx, &c); err != nil && !errors.As(err, &se) {
				t.Fatalf("command %d (opcode %d): %v", i, c.Opcode, err)
			}
		}
		if grown := int64(heapInUse()) - int64(base); grown > fuzzBudget+8<<20 {
			t.Errorf("the backend's heap grew %d MiB over a %d MiB budget", grown>>20, fuzzBudget>>20)
		}
		if g.DevStatus()&device.DevFatal != 0 {
			t.Error("admin commands made the vNIC fatal")
		}
		stillServes(t, g)
		stillServes(t, tb.guests[1])
	})
}
