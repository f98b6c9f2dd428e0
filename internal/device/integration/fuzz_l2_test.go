package integration

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/PacketFive/hinic/internal/device"
)

// FuzzL2Descriptors: the L2 TX ring's descriptors and its producer index
// are the guest's: addr, len (any value, beyond the buffer, beyond
// L2MaxFrame, zero) and flags unmasked, and the frame bytes at addr.
// The input is descriptors of 16 bytes (addr, len, flags, buf_len) and
// then the bytes of a buffer every descriptor may point into, and a
// producer index. Whatever they hold, the backend must not panic, the
// vNIC must go fatal only for a producer index beyond the ring (the
// ABI's rule), no frame with another source MAC or of MAC Control may
// reach the peer, and the peer must keep serving.
func FuzzL2Descriptors(f *testing.F) {
	desc := func(addr uint64, ln, flags, bufLen uint16) []byte {
		b := make([]byte, 16)
		binary.LittleEndian.PutUint64(b, addr)
		binary.LittleEndian.PutUint16(b[8:], ln)
		binary.LittleEndian.PutUint16(b[10:], flags)
		binary.LittleEndian.PutUint16(b[12:], bufLen)
		return b
	}
	frame := append(append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 0x02, 0x48, 0x4e, 0, 0, 2, 0x88, 0x08), make([]byte, 50)...)
	// An honest-looking frame with the peer's source, a MAC Control
	// frame, a length of 0xffff, an address outside RAM, an index
	// beyond the ring.
	f.Add(desc(0, 64, 0, 0), frame, uint32(1))
	f.Add(desc(0, 0xffff, 0, 0), frame, uint32(1))
	f.Add(desc(1<<40, 64, 0xffff, 0xffff), frame, uint32(1))
	f.Add(append(desc(0, 13, 0, 0), desc(0, 9216, 0, 0)...), frame, uint32(2))
	f.Add([]byte{}, []byte{}, uint32(1000))
	f.Fuzz(func(t *testing.T, descs, data []byte, prod uint32) {
		tb := newFuzzGuest(t, fmt.Sprintf("l2 descs=%x data=%x prod=%d", descs, data, prod))
		g, peer := tb.guests[0], tb.guests[1]
		rx, err := peer.NewL2()
		if err != nil {
			t.Fatal(err)
		}
		buf, err := g.Alloc(16<<10, 4096, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 16<<10 {
			data = data[:16<<10]
		}
		if err := g.RAM().WriteAt(data, buf); err != nil {
			t.Fatal(err)
		}
		shm := g.BAR2()
		for i := 0; i < device.L2TxEntries && len(descs) > 0; i++ {
			var d device.L2Desc
			n := copy(unsafe.Slice((*byte)(unsafe.Pointer(&d)), 16), descs)
			descs = descs[n:]
			if d.Addr < 16<<10 {
				d.Addr += buf // most descriptors point into the buffer
			}
			copy(shm[device.L2TxOff+16*i:], unsafe.Slice((*byte)(unsafe.Pointer(&d)), 16))
		}
		atomic.StoreUint32(&g.Header().L2TxProd, prod)
		g.Ring(device.DBL2)
		time.Sleep(10 * time.Millisecond)
		if g.DevStatus()&device.DevFatal != 0 && prod <= device.L2TxEntries {
			t.Errorf("the vNIC went fatal with l2_tx_prod %d", prod)
		}
		// What reached the peer came from the guest's MAC and is no
		// MAC Control frame.
		for rx.Pending() {
			f, err := rx.Recv(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if f != nil && ([6]byte(f[6:12]) != tb.cfgs[0].MAC || (f[12] == 0x88 && f[13] == 0x08)) {
				t.Fatalf("the peer got %x", f)
			}
		}
		stillServes(t, peer)
	})
}
