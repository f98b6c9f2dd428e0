package shmport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var testGeo = Geometry{Entries: 64, BufSize: 4352}

func frameOf(i, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint32(b, uint32(i))
	for j := 4; j < size; j++ {
		b[j] = byte(i + j)
	}
	return b
}

// TestPairOrder sends frames of every size both ways at once, with
// polling on and off, in single sends, batched sends and queued sends
// published by Flush, and checks each arrives once, in order, intact.
func TestPairOrder(t *testing.T) {
	for _, poll := range []time.Duration{0, DefaultPoll} {
		for _, mode := range []string{"send", "batch", "queue"} {
			t.Run(fmt.Sprintf("poll=%v/%s", poll, mode), func(t *testing.T) {
				a, b, err := Pair(testGeo, Options{Poll: poll})
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				defer b.Close()
				const n = 3000
				var wg sync.WaitGroup
				errs := make(chan error, 4)
				send := func(c *Conn) {
					defer wg.Done()
					var pend [][]byte
					for i := range n {
						f := frameOf(i, 4+i%int(testGeo.BufSize-4))
						switch mode {
						case "send":
							if err := c.Send(f); err != nil {
								errs <- err
								return
							}
							continue
						case "queue":
							if err := c.Queue(f); err != nil {
								errs <- err
								return
							}
							if i%5 == 4 || i == n-1 {
								if err := c.Flush(); err != nil {
									errs <- err
									return
								}
							}
							continue
						}
						pend = append(pend, f)
						if len(pend) == 7 || i == n-1 {
							if d, err := c.SendBatch(pend); err != nil || d != 0 {
								errs <- fmt.Errorf("SendBatch: %d dropped, %v", d, err)
								return
							}
							pend = pend[:0]
						}
					}
				}
				recv := func(c *Conn) {
					defer wg.Done()
					next := 0
					for next < n {
						_, bad, err := c.Recv(16, func(fs [][]byte) {
							for _, f := range fs {
								if want := frameOf(next, 4+next%int(testGeo.BufSize-4)); !bytes.Equal(f, want) {
									errs <- fmt.Errorf("frame %d: got %d bytes, starting %x", next, len(f), f[:4])
								}
								next++
							}
						})
						if err != nil || bad != 0 {
							errs <- fmt.Errorf("Recv: %d bad, %v", bad, err)
							return
						}
					}
				}
				wg.Add(4)
				go send(a)
				go recv(b)
				go send(b)
				go recv(a)
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Error(err)
				}
			})
		}
	}
}

// TestCloseWakes checks Close wakes a receiver asleep on an empty ring
// and a sender asleep on a full one.
func TestCloseWakes(t *testing.T) {
	a, b, err := Pair(testGeo, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	done := make(chan error, 2)
	go func() {
		_, _, err := a.Recv(1, func([][]byte) {})
		done <- err
	}()
	go func() {
		var err error
		for err == nil {
			err = a.Send([]byte{1, 2, 3})
		}
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	a.Close()
	for range 2 {
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("got %v, want ErrClosed", err)
		}
	}
}

// TestUntrustedIndices checks a peer's head or tail that claims more than
// a ring is an error and a descriptor outside the buffer area a dropped
// frame.
func TestUntrustedIndices(t *testing.T) {
	a, b := testPair(t)

	// b's ring to a: a forged head.
	b.tx.r.head.Store(testGeo.Entries + 1)
	if _, _, err := a.Recv(8, func([][]byte) {}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("head past a ring: got %v, want ErrCorrupt", err)
	}
	b.tx.r.head.Store(0)

	// a's ring to b: a forged tail (ahead of head).
	b.rx.r.tail.Store(5)
	a.tx.free = 0
	if err := a.Send([]byte{1}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("tail ahead of head: got %v, want ErrCorrupt", err)
	}
	b.rx.r.tail.Store(0)
	b.rx.tail = 0

	// Descriptors out of range: offset past the area, length past a slot,
	// zero length; then a good one.
	if err := a.Send([]byte{0xAA}); err != nil { // slot 0, overwritten below
		t.Fatal(err)
	}
	forge := []struct{ off, n uint32 }{{uint32(len(a.tx.r.bufs)), 1}, {0, testGeo.BufSize + 1}, {0, 0},
		{uint32(len(a.tx.r.bufs)) - 2, 4}}
	for i, f := range forge {
		if i > 0 {
			if err := a.Send([]byte{0xAA}); err != nil {
				t.Fatal(err)
			}
		}
		d := a.tx.r.desc[i*descSize:]
		binary.LittleEndian.PutUint32(d[0:], f.off)
		binary.LittleEndian.PutUint32(d[4:], f.n)
	}
	if err := a.Send([]byte{7, 8, 9}); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	n, bad, err := b.Recv(16, func(fs [][]byte) {
		for _, f := range fs {
			got = append(got, bytes.Clone(f))
		}
	})
	if err != nil || n != 1 || bad != len(forge) || !bytes.Equal(got[0], []byte{7, 8, 9}) {
		t.Errorf("got n=%d bad=%d err=%v frames %x; want 1 good frame and %d bad", n, bad, err, got, len(forge))
	}
}

func seqpacketPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	a, b := conn(fds[0]), conn(fds[1])
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestOfferAccept runs the setup over a socket pair: accepted, over
// budget, declined, and forged descriptors.
func TestOfferAccept(t *testing.T) {
	t.Run("ok", func(t *testing.T) {
		d, s := seqpacketPair(t)
		type res struct {
			c  *Conn
			st uint16
			e  error
		}
		ch := make(chan res, 1)
		go func() {
			c, st, err := Accept(s, 1<<30, 4096, Options{})
			ch <- res{c, st, err}
		}()
		dc, st, err := Offer(d, testGeo, Options{})
		if err != nil || st != StatusOK {
			t.Fatalf("Offer: %s, %v", StatusText(st), err)
		}
		defer dc.Close()
		r := <-ch
		if r.e != nil || r.st != StatusOK {
			t.Fatalf("Accept: %s, %v", StatusText(r.st), r.e)
		}
		defer r.c.Close()
		if err := dc.Send([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		var got []byte
		if _, _, err := r.c.Recv(4, func(fs [][]byte) { got = bytes.Clone(fs[0]) }); err != nil || string(got) != "hello" {
			t.Fatalf("got %q, %v", got, err)
		}
	})
	for _, tc := range []struct {
		name     string
		budget   uint64
		peerMax  int
		want     uint16
		mangle   func(t *testing.T, d *net.UnixConn) // sends its own setup when set
		declined bool
	}{
		{name: "over budget", budget: testGeo.RegionSize() - 1, peerMax: 4096, want: StatusTooBig},
		{name: "slot smaller than peer frames", budget: 1 << 30, peerMax: 9000, want: StatusBadSetup},
		{name: "declined", budget: 1 << 30, peerMax: 4096, want: StatusDeclined, declined: true},
		{name: "no descriptors", budget: 1 << 30, peerMax: 4096, want: StatusBadFds, mangle: func(t *testing.T, d *net.UnixConn) {
			d.Write(AppendSetup(nil, &Setup{Version: SetupVersion, Geometry: testGeo, RegionSize: testGeo.RegionSize()}))
		}},
		{name: "unsealed memfd", budget: 1 << 30, peerMax: 4096, want: StatusBadFds, mangle: func(t *testing.T, d *net.UnixConn) {
			mfd, _ := unix.MemfdCreate("x", unix.MFD_CLOEXEC)
			unix.Ftruncate(mfd, int64(testGeo.RegionSize()))
			fds := []int{mfd}
			for range 4 {
				e, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
				fds = append(fds, e)
			}
			d.WriteMsgUnix(AppendSetup(nil, &Setup{Version: SetupVersion, Geometry: testGeo, RegionSize: testGeo.RegionSize()}), unix.UnixRights(fds...), nil)
			for _, fd := range fds {
				unix.Close(fd)
			}
		}},
		{name: "pipes for eventfds", budget: 1 << 30, peerMax: 4096, want: StatusBadFds, mangle: func(t *testing.T, d *net.UnixConn) {
			r, err := create(testGeo)
			if err != nil {
				t.Fatal(err)
			}
			defer r.close()
			var p [2]int
			unix.Pipe2(p[:], unix.O_CLOEXEC)
			defer unix.Close(p[0])
			defer unix.Close(p[1])
			fds := []int{r.fds[0], r.fds[1], p[0], r.fds[3], r.fds[4]}
			d.WriteMsgUnix(AppendSetup(nil, &Setup{Version: SetupVersion, Geometry: testGeo, RegionSize: testGeo.RegionSize()}), unix.UnixRights(fds...), nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, s := seqpacketPair(t)
			type res struct {
				c  *Conn
				st uint16
				e  error
			}
			ch := make(chan res, 1)
			go func() {
				c, st, err := Accept(s, tc.budget, tc.peerMax, Options{})
				ch <- res{c, st, err}
			}()
			var st uint16
			var err error
			switch {
			case tc.mangle != nil:
				tc.mangle(t, d)
				st, err = readAnswer(d)
			case tc.declined:
				st, err = Decline(d)
			default:
				var c *Conn
				c, st, err = Offer(d, testGeo, Options{})
				if c != nil {
					c.Close()
					t.Error("Offer returned a Conn on refusal")
				}
			}
			r := <-ch
			if r.c != nil {
				r.c.Close()
				t.Error("Accept returned a Conn on refusal")
			}
			if err != nil || st != tc.want || r.st != tc.want || r.e != nil {
				t.Errorf("got %s (%v) / %s (%v), want %s", StatusText(st), err, StatusText(r.st), r.e, StatusText(tc.want))
			}
			// The socket still carries frames: the fallback.
			if _, err := d.Write([]byte("frame")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 16)
			if n, err := s.Read(buf); err != nil || string(buf[:n]) != "frame" {
				t.Errorf("fallback frame: %q, %v", buf[:n], err)
			}
		})
	}
}

func TestGeometry(t *testing.T) {
	for _, g := range []Geometry{{8, 4096}, {100, 4096}, {8192, 4096}, {64, 100}, {64, 4100}, {64, 1 << 20}} {
		if g.Validate() == nil {
			t.Errorf("%+v: accepted", g)
		}
	}
	g := GeometryFor(256, 4352)
	if err := g.Validate(); err != nil || g.BufSize != 4352 {
		t.Errorf("GeometryFor: %+v %v", g, err)
	}
	if g.RegionSize()%pageSize != 0 || g.bufOff()+uint64(g.Entries)*uint64(g.BufSize) > g.ringSize() {
		t.Errorf("layout %+v: ring %d, buffers at %d", g, g.ringSize(), g.bufOff())
	}
}

// BenchmarkPair measures a one-way stream of 4 KiB frames through a ring
// pair, against a SEQPACKET socket pair of the same run.
func BenchmarkPair(b *testing.B) {
	for _, size := range []int{64, 4096} {
		b.Run(fmt.Sprintf("kind=shm/size=%d", size), func(b *testing.B) {
			a, c, err := Pair(testGeo, Options{Poll: DefaultPoll})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			defer c.Close()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			done := make(chan struct{})
			go func() {
				defer close(done)
				for got := 0; got < b.N; {
					n, _, err := c.Recv(64, func([][]byte) {})
					if err != nil {
						return
					}
					got += n
				}
			}()
			f := make([]byte, size)
			for range b.N {
				if err := a.Send(f); err != nil {
					b.Fatal(err)
				}
			}
			<-done
		})
	}
}

// TestTrySend: TrySend fills the ring and reports false, without
// waiting, when it is full; once the peer consumes it sends again, and
// every frame arrives in order.
func TestTrySend(t *testing.T) {
	a, b := testPair(t)
	n := 0
	for {
		ok, err := a.TrySend(frameOf(n, 64))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		n++
	}
	if n != int(testGeo.Entries) {
		t.Fatalf("sent %d into an empty ring of %d", n, testGeo.Entries)
	}
	next := 0
	check := inOrder(t, &next)
	if _, _, err := b.Recv(16, check); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.TrySend(frameOf(n, 64)); !ok || err != nil {
		t.Fatalf("TrySend after the peer consumed: %v, %v", ok, err)
	}
	n++
	for next < n {
		if _, _, err := b.Recv(64, check); err != nil {
			t.Fatal(err)
		}
	}
}

// TestQueueFlush: queued frames stay invisible to the consumer until
// Flush, which wakes a sleeping consumer once for all of them; Queue on
// a full ring publishes what it queued before it waits, so a sender that
// never flushes still makes progress, in order.
func TestQueueFlush(t *testing.T) {
	a, b := testPair(t)
	for i := range 3 {
		if err := a.Queue(frameOf(i, 64)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := b.rx.avail(); err != nil || n != 0 {
		t.Fatalf("before Flush the consumer sees %d frames (%v), want 0", n, err)
	}
	if q := a.queued(); q != 3 {
		t.Fatalf("Queued = %d, want 3", q)
	}
	a.tx.r.consWait.Store(1) // the consumer sleeps
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil { // nothing queued: no second kick
		t.Fatal(err)
	}
	a.tx.r.consWait.Store(0)
	if k := a.Stats().Kicks; k != 1 {
		t.Fatalf("%d kicks for one Flush of 3 frames, want 1", k)
	}
	if q := a.queued(); q != 0 {
		t.Fatalf("Queued = %d after Flush, want 0", q)
	}
	next := 0
	check := inOrder(t, &next)
	if n, _, err := b.Recv(16, check); err != nil || n != 3 {
		t.Fatalf("Recv: %d frames, %v; want 3", n, err)
	}

	// Three rings' worth without a Flush: every full ring publishes.
	total := 3 + 3*int(testGeo.Entries)
	done := make(chan error, 1)
	go func() {
		for next < total {
			if _, _, err := b.Recv(16, check); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := 3; i < total-1; i++ {
		if err := a.Queue(frameOf(i, 64)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Queue(frameOf(total-1, 64)); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := a.Queue(nil); !errors.Is(err, ErrTooBig) {
		t.Errorf("Queue of an empty frame: %v, want ErrTooBig", err)
	}
	a.Shutdown()
	if err := a.Queue([]byte{1}); !errors.Is(err, ErrClosed) {
		t.Errorf("Queue after Shutdown: %v, want ErrClosed", err)
	}
	if err := a.Flush(); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Shutdown: %v, want ErrClosed", err)
	}
}

// testPair returns a connected pair without polling, closed when the
// test ends.
func testPair(t *testing.T) (*Conn, *Conn) {
	t.Helper()
	a, b, err := Pair(testGeo, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// inOrder returns a Recv callback that checks each frame is the 64-byte
// frameOf(*next) and counts it.
func inOrder(t *testing.T, next *int) func([][]byte) {
	return func(fs [][]byte) {
		for _, f := range fs {
			if !bytes.Equal(f, frameOf(*next, 64)) {
				t.Errorf("frame %d differs", *next)
			}
			*next++
		}
	}
}

// TestTryQueue: TryQueue fills the ring without publishing; on a full
// ring it publishes what it queued, wakes a sleeping consumer once and
// reports false without waiting; once the consumer frees slots it
// queues again, and every frame arrives once, in order.
func TestTryQueue(t *testing.T) {
	a, b := testPair(t)
	n := 0
	for ; n < int(testGeo.Entries); n++ {
		ok, err := a.TryQueue(frameOf(n, 64))
		if err != nil || !ok {
			t.Fatalf("TryQueue %d into a ring with room: %v, %v", n, ok, err)
		}
	}
	if got, err := b.rx.avail(); err != nil || got != 0 {
		t.Fatalf("before the ring filled the consumer sees %d frames (%v), want 0", got, err)
	}
	a.tx.r.consWait.Store(1) // the consumer sleeps
	if ok, err := a.TryQueue(frameOf(n, 64)); ok || err != nil {
		t.Fatalf("TryQueue into a full ring: %v, %v; want false, nil", ok, err)
	}
	a.tx.r.consWait.Store(0)
	if k := a.Stats().Kicks; k != 1 {
		t.Fatalf("%d kicks for a full ring, want 1", k)
	}
	if got, err := b.rx.avail(); err != nil || got != testGeo.Entries {
		t.Fatalf("after the ring filled the consumer sees %d frames (%v), want %d", got, err, testGeo.Entries)
	}
	next := 0
	check := inOrder(t, &next)
	if _, _, err := b.Recv(16, check); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.TryQueue(frameOf(n, 64)); !ok || err != nil {
		t.Fatalf("TryQueue after the consumer freed slots: %v, %v", ok, err)
	}
	n++
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	for next < n {
		if _, _, err := b.Recv(64, check); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := a.TryQueue(make([]byte, testGeo.BufSize+1)); ok || !errors.Is(err, ErrTooBig) {
		t.Errorf("TryQueue of an oversize frame: %v, %v; want ErrTooBig", ok, err)
	}
	a.Shutdown()
	if ok, err := a.TryQueue([]byte{1}); ok || !errors.Is(err, ErrClosed) {
		t.Errorf("TryQueue after Shutdown: %v, %v; want ErrClosed", ok, err)
	}
}
