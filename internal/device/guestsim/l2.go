package guestsim

import (
	"context"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/PacketFive/hinic/internal/device"
)

// L2 is the netdev side of a guest: the L2 TX and RX rings in BAR2 with
// buffers in guest RAM. Owned by one goroutine.
type L2 struct {
	g      *Guest
	txProd uint32
	txBuf  []uint64
	rxProd uint32
	rxCons uint32
	rxBuf  []uint64
}

const l2BufSize = 2048

// NewL2 allocates one buffer per ring slot and posts every RX buffer.
func (g *Guest) NewL2() (*L2, error) {
	l := &L2{g: g, txBuf: make([]uint64, device.L2TxEntries), rxBuf: make([]uint64, device.L2RxEntries)}
	for i := range l.txBuf {
		a, err := g.Alloc(l2BufSize, 64, false)
		if err != nil {
			return nil, err
		}
		l.txBuf[i] = a
	}
	for i := range l.rxBuf {
		a, err := g.Alloc(l2BufSize, 64, false)
		if err != nil {
			return nil, err
		}
		l.rxBuf[i] = a
	}
	for range device.L2RxEntries {
		l.postRx()
	}
	atomic.StoreUint32(&g.hdr.L2RxProd, l.rxProd)
	g.Ring(device.DBL2)
	return l, nil
}

func (l *L2) desc(off int, idx uint32) *device.L2Desc {
	return (*device.L2Desc)(unsafe.Pointer(&l.g.shm[off+int(idx%256)*16]))
}

func (l *L2) postRx() {
	d := l.desc(device.L2RxOff, l.rxProd)
	*d = device.L2Desc{Addr: l.rxBuf[l.rxProd%device.L2RxEntries], BufLen: l2BufSize}
	l.rxProd++
}

// Send queues one frame on the TX ring and rings the L2 doorbell.
func (l *L2) Send(frame []byte) error {
	h := l.g.hdr
	if l.txProd-atomic.LoadUint32(&h.L2TxCons) >= device.L2TxEntries {
		return fmt.Errorf("guestsim: L2 TX ring full")
	}
	buf := l.txBuf[l.txProd%device.L2TxEntries]
	if err := l.g.ram.WriteAt(frame, buf); err != nil {
		return err
	}
	*l.desc(device.L2TxOff, l.txProd) = device.L2Desc{Addr: buf, Len: uint16(len(frame))}
	l.txProd++
	atomic.StoreUint32(&h.L2TxProd, l.txProd)
	l.g.Ring(device.DBL2)
	return nil
}

// Recv waits for the next received frame and reposts its buffer.
func (l *L2) Recv(ctx context.Context) ([]byte, error) {
	h := l.g.hdr
	for atomic.LoadUint32(&h.L2RxCons) == l.rxCons {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l.g.WaitIRQ(device.IRQL2, 5_000_000)
	}
	d := l.desc(device.L2RxOff, l.rxCons)
	var frame []byte
	if d.Flags&device.L2FlagErr == 0 {
		frame = make([]byte, d.Len)
		l.g.ram.ReadAt(frame, d.Addr)
	}
	l.rxCons++
	l.postRx()
	atomic.StoreUint32(&h.L2RxProd, l.rxProd)
	l.g.Ring(device.DBL2)
	return frame, nil
}

// Pending reports whether the device has filled RX buffers Recv has not
// taken yet.
func (l *L2) Pending() bool { return atomic.LoadUint32(&l.g.hdr.L2RxCons) != l.rxCons }
