package mmsg

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func pair(t testing.TB) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

func frames(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = bytes.Repeat([]byte{byte(i + 1)}, 60+i*7)
	}
	return out
}

// TestBatchRoundTrip sends batches and reads them back: every message
// whole, in order, message boundaries kept, a short read buffer marked
// truncated.
func TestBatchRoundTrip(t *testing.T) {
	a, b := pair(t)
	wa, err := New(a, 8)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := New(b, 8)
	if err != nil {
		t.Fatal(err)
	}
	want := frames(8)
	if err := wa.WriteBatch(want); err != nil {
		t.Fatal(err)
	}
	bufs := make([][]byte, 8)
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	bufs[3] = bufs[3][:10] // message 3 is 81 bytes
	sizes, trunc := make([]int, 8), make([]bool, 8)
	got := 0
	for got < len(want) {
		n, err := rb.ReadBatch(bufs[got:], sizes[got:], trunc[got:])
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	for i := range want {
		if i == 3 {
			if !trunc[i] || !bytes.Equal(bufs[i][:10], want[i][:10]) {
				t.Errorf("message 3: trunc %v, %x", trunc[i], bufs[i][:10])
			}
			continue
		}
		if trunc[i] || sizes[i] != len(want[i]) || !bytes.Equal(bufs[i][:sizes[i]], want[i]) {
			t.Errorf("message %d: %d bytes (trunc %v), want %d", i, sizes[i], trunc[i], len(want[i]))
		}
	}
}

// TestReadBatchEOF: the peer's close reads as io.EOF.
func TestReadBatchEOF(t *testing.T) {
	a, b := pair(t)
	rb, err := New(b, 4)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	bufs := [][]byte{make([]byte, 64), make([]byte, 64)}
	if _, err := rb.ReadBatch(bufs, make([]int, 2), make([]bool, 2)); !errors.Is(err, io.EOF) {
		t.Fatalf("ReadBatch after close: %v, want EOF", err)
	}
}

// TestBatchAllocs: a batch in each direction allocates nothing.
func TestBatchAllocs(t *testing.T) {
	a, b := pair(t)
	wa, _ := New(a, 4)
	rb, _ := New(b, 4)
	out := frames(4)
	bufs := make([][]byte, 4)
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	sizes, trunc := make([]int, 4), make([]bool, 4)
	n := testing.AllocsPerRun(200, func() {
		if err := wa.WriteBatch(out); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(out); {
			k, err := rb.ReadBatch(bufs[got:], sizes[got:], trunc[got:])
			if err != nil {
				t.Fatal(err)
			}
			got += k
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per batch, want 0", n)
	}
}

// TestWriter: frames gathered by Send arrive whole and in order, a full
// batch goes by itself, Flush sends the rest, an oversize frame goes at
// once after the ones before it, and none of it allocates.
func TestWriter(t *testing.T) {
	a, b := pair(t)
	wc, _ := New(a, 4)
	rb, _ := New(b, 16)
	w := NewWriter(wc, 128)
	want := frames(6) // 60..95 bytes
	big := bytes.Repeat([]byte{0xee}, 300)
	for _, f := range want[:5] {
		if err := w.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	if w.Pending() != 1 {
		t.Fatalf("pending %d after 5 frames in batches of 4, want 1", w.Pending())
	}
	if err := w.Send(big); err != nil {
		t.Fatal(err)
	}
	if err := w.Send(want[5]); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	order := append(append(append([][]byte{}, want[:5]...), big), want[5])
	bufs := make([][]byte, 16)
	for i := range bufs {
		bufs[i] = make([]byte, 512)
	}
	sizes, trunc := make([]int, 16), make([]bool, 16)
	got := 0
	for got < len(order) {
		n, err := rb.ReadBatch(bufs[got:], sizes[got:], trunc[got:])
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	for i, f := range order {
		if !bytes.Equal(bufs[i][:sizes[i]], f) {
			t.Errorf("frame %d: %d bytes, want %d", i, sizes[i], len(f))
		}
	}
	n := testing.AllocsPerRun(100, func() {
		for _, f := range want[:4] {
			_ = w.Send(f)
		}
		_ = w.Flush()
		for got := 0; got < 4; {
			k, err := rb.ReadBatch(bufs, sizes, trunc)
			if err != nil {
				t.Fatal(err)
			}
			got += k
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per batch, want 0", n)
	}
}

// TestTryWrite: TryWrite sends while the socket has room and reports
// false, without waiting, once it has none; after the reader takes a
// message it sends again.
func TestTryWrite(t *testing.T) {
	a, b := pair(t)
	wa, _ := New(a, 4)
	rb, _ := New(b, 1)
	msg := bytes.Repeat([]byte{7}, 2048)
	sent := 0
	for {
		ok, err := wa.TryWrite(msg)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if sent++; sent > 1<<16 {
			t.Fatal("the socket never filled")
		}
	}
	if sent == 0 {
		t.Fatal("nothing sent into an empty socket")
	}
	buf := [][]byte{make([]byte, 4096)}
	sizes, trunc := make([]int, 1), make([]bool, 1)
	for got := 0; got < 8; got++ { // room for at least one message again
		if _, err := rb.ReadBatch(buf, sizes, trunc); err != nil || sizes[0] != len(msg) {
			t.Fatalf("read %d bytes, %v", sizes[0], err)
		}
	}
	if ok, err := wa.TryWrite(msg); !ok || err != nil {
		t.Fatalf("TryWrite after the reader made room: %v, %v", ok, err)
	}
}

// TestWriterNoWait: in no-wait mode Send and Flush return while the peer
// reads nothing, holding back what the socket cannot take, in buffers
// beyond the batch; a Flush in waiting mode then sends it all, whole and
// in order, while the peer reads.
func TestWriterNoWait(t *testing.T) {
	a, b := pair(t)
	_ = a.SetWriteBuffer(4096)
	wc, _ := New(a, 4)
	rb, _ := New(b, 16)
	w := NewWriter(wc, 1100)
	w.SetNoWait(true)
	const total = 2000 // ~2 MB: far beyond any socket buffer
	frame := func(i int) []byte {
		f := bytes.Repeat([]byte{byte(i)}, 1000+i%100)
		f[0], f[1] = byte(i>>8), byte(i)
		return f
	}
	for i := range total {
		if i == total/2 {
			// an oversize frame, held back by copy
			if err := w.Send(bytes.Repeat([]byte{0xee}, 1500)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Send(frame(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.Pending() == 0 {
		t.Fatal("nothing held back with a peer that reads nothing")
	}
	t.Logf("%d frames held back", w.Pending())
	done := make(chan error, 1)
	got := make([][]byte, 0, total+1)
	go func() {
		bufs, sizes, trunc := make([][]byte, 16), make([]int, 16), make([]bool, 16)
		for i := range bufs {
			bufs[i] = make([]byte, 2048)
		}
		for len(got) < total+1 {
			n, err := rb.ReadBatch(bufs, sizes, trunc)
			if err != nil {
				done <- err
				return
			}
			for i := range n {
				got = append(got, append([]byte(nil), bufs[i][:sizes[i]]...))
			}
		}
		done <- nil
	}()
	w.SetNoWait(false)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.Pending() != 0 {
		t.Fatalf("%d frames left after a waiting Flush", w.Pending())
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	k := 0
	for i := range total {
		if i == total/2 {
			if len(got[k]) != 1500 || got[k][0] != 0xee {
				t.Fatalf("message %d: %d bytes, want the oversize frame", k, len(got[k]))
			}
			k++
		}
		if !bytes.Equal(got[k], frame(i)) {
			t.Fatalf("message %d: %d bytes starting %x, want frame %d", k, len(got[k]), got[k][:2], i)
		}
		k++
	}
}

// TestDatagramZeroLength: on a NewDatagram Conn over UDP a zero-length
// datagram is a message of size 0 between the others, not the end.
func TestDatagramZeroLength(t *testing.T) {
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	wb, err := NewDatagram(tx, 4)
	if err != nil {
		t.Fatal(err)
	}
	// sendmmsg needs a non-empty iovec base; a zero-length datagram goes
	// through the net package.
	if err := wb.WriteBatch([][]byte{{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Write(nil); err != nil {
		t.Fatal(err)
	}
	if err := wb.WriteBatch([][]byte{{4, 5}}); err != nil {
		t.Fatal(err)
	}
	rb, err := NewDatagram(rx, 4)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for len(got) < 3 {
		bufs := [][]byte{make([]byte, 16), make([]byte, 16), make([]byte, 16), make([]byte, 16)}
		sizes := make([]int, 4)
		n, err := rb.ReadBatch(bufs, sizes, make([]bool, 4))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, sizes[:n]...)
	}
	if len(got) != 3 || got[0] != 3 || got[1] != 0 || got[2] != 2 {
		t.Fatalf("sizes %v, want [3 0 2]", got)
	}
}
