package fabric

import (
	"encoding/binary"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// streamPair is a connected SOCK_STREAM socket pair: the switch's end as
// a *net.UnixConn (what a QEMU -netdev stream port accepts) and the
// guest's.
func streamPair(tb testing.TB) (sw *net.UnixConn, guest net.Conn) {
	tb.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "stream")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			tb.Fatal(err)
		}
		return c
	}
	return conn(fds[0]).(*net.UnixConn), conn(fds[1])
}

func streamFrames(frames ...[]byte) []byte {
	var out []byte
	for _, f := range frames {
		out = binary.BigEndian.AppendUint32(out, uint32(len(f)))
		out = append(out, f...)
	}
	return out
}

// FuzzQEMUStream feeds arbitrary bytes to a QEMU stream port's framing
// (4-byte big-endian length, then the frame) as a hostile guest's QEMU
// would send them. Property: no panic, the port's reader stops at the
// end of the input or at a length it cannot take, every frame it passes
// on is at most the port's max-frame, and it never takes more frames than
// the input holds length words.
func FuzzQEMUStream(f *testing.F) {
	mac1, mac2 := macN(1), macN(2)
	f.Add(streamFrames(ethFrame(bcast, mac1, -1, 0, 60, 0)))
	f.Add(streamFrames(ethFrame(mac2, mac1, 100, 3, 300, 1), ethFrame(bcast, mac1, -1, 0, 1514, 0)))
	f.Add(streamFrames(make([]byte, 3000)))             // over max-frame: skipped
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3})      // over the stream's limit: the session ends
	f.Add(append(streamFrames(make([]byte, 60)), 0, 0)) // a torn length word
	f.Add(streamFrames(nil, nil))                       // empty frames
	sw := newBareSwitch(f, SwitchConfig{Ports: 2, MaxFrame: 2048,
		Port: []PortConfig{{Num: 1, Kind: KindQEMUStream}, {Num: 2, Kind: KindQEMUStream}}})
	p := sw.ports[0]
	now := time.Unix(0, 0)
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := streamPair(t)
		s := &session{p: p, conn: a, stream: true, done: make(chan struct{}), txDone: make(chan struct{})}
		before := p.ctr.rxFrames.Load()
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.rxStream(s)
		}()
		go func() {
			b.Write(data) // fails once rxStream has given up and a is closed
			b.Close()
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("rxStream did not return at the end of its input")
		}
		a.Close()
		got := p.ctr.rxFrames.Load() - before
		if words := uint64(len(data) / 4); got > words {
			t.Fatalf("%d frames from %d bytes", got, len(data))
		}
		for _, lens := range drain(sw, now) {
			for _, n := range lens {
				if n > 2048 {
					t.Fatalf("a %d-byte frame passed a 2048-byte port", n)
				}
			}
		}
	})
}
