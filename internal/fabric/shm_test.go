package fabric

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
	"github.com/PacketFive/hinic/internal/shmport"
)

// dialShm dials port num as a NIC offering shared memory.
func dialShm(t *testing.T, sw *Switch, num int, id byte) *PortConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pc, _, err := DialPortWith(ctx, sw.SocketPath(num), &proto.HelloFields{
		Version: proto.HelloVersion, LinkLayer: proto.HelloLinkEthernet, Role: proto.HelloRoleNIC,
		MaxFrame: 4200, MAC: macN(id), PortNum: 1, Name: fmt.Sprintf("shm%d", id),
	}, DialOptions{Shm: true, ShmEntries: 64, ShmOptions: shmport.Options{Poll: shmport.DefaultPoll}})
	if err != nil {
		t.Fatalf("dial port %d: %v", num, err)
	}
	t.Cleanup(func() { pc.Close() })
	waitFor(t, "port up", func() bool { return sw.ports[num-1].isUp() })
	return pc
}

// recvShm returns the next data frame from pc's rings, or nil after d.
func recvShm(t *testing.T, pc *PortConn, d time.Duration) []byte {
	t.Helper()
	ch := make(chan []byte, 1)
	go func() {
		for {
			var got []byte
			_, _, err := pc.Shm.Recv(1, func(fs [][]byte) { got = bytes.Clone(fs[0]) })
			if err != nil {
				ch <- nil
				return
			}
			if !isMACControl(got) {
				ch <- got
				return
			}
		}
	}()
	select {
	case f := <-ch:
		return f
	case <-time.After(d):
		t.Fatal("no frame from the ring")
		return nil
	}
}

// TestShmPort joins a shared-memory NIC and a socket NIC on one switch:
// frames both ways, in order, the transport shown in the status, and a
// clean teardown when the shared-memory NIC goes away.
func TestShmPort(t *testing.T) {
	f := startFabric(t, Config{Ports: 2})
	sw := f.Switches()[0]
	a := dialShm(t, sw, 1, 1)
	if a.Shm == nil {
		t.Fatal("the switch did not take the rings")
	}
	b := connect(t, sw, 2, 2)
	if got := portStatus(sw, 1).Transport; got != TransportShm {
		t.Errorf("port 1 transport %q, want shm", got)
	}
	if got := portStatus(sw, 2).Transport; got != TransportSocket {
		t.Errorf("port 2 transport %q, want socket", got)
	}

	// b speaks first so the switch learns it; a hears the flood.
	hi := ethFrame(a.mac(), b.mac, 0, 3, 100, 0xB0)
	b.send(hi)
	if got := recvShm(t, a, 2*time.Second); !bytes.Equal(got, hi) {
		t.Fatalf("a got %x, want %x", got, hi)
	}
	// A stream from a to b in the lossless class, in batches: every frame
	// once, in order.
	const n = 2000
	sent := make(chan error, 1)
	go func() {
		var batch [][]byte
		for i := range n {
			batch = append(batch, ethFrame(b.mac, a.mac(), 0, 3, 64+i%4000, byte(i)))
			if len(batch) == 16 || i == n-1 {
				if d, err := a.Shm.SendBatch(batch); err != nil || d != 0 {
					sent <- fmt.Errorf("SendBatch: %d dropped, %v", d, err)
					return
				}
				batch = batch[:0]
			}
		}
		sent <- nil
	}()
	for i := range n {
		b.expectFrame(ethFrame(b.mac, a.mac(), 0, 3, 64+i%4000, byte(i)))
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	// A frame over the slot size is dropped on the way to a and counted.
	before := portStatus(sw, 1).Drops[DropOversize.String()]
	b.send(ethFrame(a.mac(), b.mac, 0, 3, 5000, 0xEE))
	small := ethFrame(a.mac(), b.mac, 0, 3, 60, 0xEF)
	b.send(small)
	if got := recvShm(t, a, 2*time.Second); !bytes.Equal(got, small) {
		t.Fatalf("a got %x, want the small frame", got[:min(len(got), 32)])
	}
	// The tx goroutine counts the drop once its batch write returns,
	// which may be after a has read the small frame of the same batch.
	waitFor(t, "the oversize drop counted", func() bool {
		return portStatus(sw, 1).Drops[DropOversize.String()] == before+1
	})

	a.Close()
	waitFor(t, "port 1 down", func() bool { return torndown(sw.ports[0]) })
	if got := portStatus(sw, 1).Transport; got != "" {
		t.Errorf("port down, transport %q", got)
	}
	// The port takes a new peer, on rings again.
	a2 := dialShm(t, sw, 1, 1)
	if a2.Shm == nil {
		t.Fatal("second session not on rings")
	}
}

func (pc *PortConn) mac() [6]byte { return macN(1) }

// TestShmFallback checks that every refusal leaves a working socket: a
// fabric with shared memory off, and a region over the port's budget.
func TestShmFallback(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no-shm", Config{Ports: 2, NoShm: true}},
		{"over budget", Config{Ports: 2, ShmMax: 64 << 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFabric(t, tc.cfg)
			sw := f.Switches()[0]
			a := dialShm(t, sw, 1, 1)
			if a.Shm != nil || a.Transport() != TransportSocket {
				t.Fatalf("transport %s, want socket", a.Transport())
			}
			if got := portStatus(sw, 1).Transport; got != TransportSocket {
				t.Errorf("status transport %q, want socket", got)
			}
			b := connect(t, sw, 2, 2)
			hi := ethFrame(macN(1), b.mac, 0, 3, 100, 0xB0)
			b.send(hi)
			buf := make([]byte, 9000)
			a.Conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			k, err := a.Conn.Read(buf)
			if err != nil || !bytes.Equal(buf[:k], hi) {
				t.Fatalf("fallback frame: %x, %v", buf[:k], err)
			}
		})
	}
}
