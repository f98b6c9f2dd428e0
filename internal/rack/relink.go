package rack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/mmsg"
	"github.com/PacketFive/hinic/internal/shmport"
)

// A host's link to its fabric port outlives the switch behind it: when
// the connection drops (the fabric process restarted, or RestartFabric
// replaced it), the host's rx goroutine dials the port again, as the
// device backend redials for a guest (docs/device.md, "Fabric
// restarts"), and the engine sends through the new connection. Frames
// sent while no link is up are lost, as on an unplugged cable; RC
// retransmits them once the link is back, within the QP's retry budget.

const (
	// nicSocketBuffer is the socket buffer size asked for at a host's end.
	nicSocketBuffer = 4 << 20
	// rxBatch is the most frames the rx goroutine takes at once (one
	// recvmmsg); txBatch the most an engine's socket port gathers for
	// one sendmmsg.
	rxBatch = 64
	txBatch = 64
	// hostShmEntries is the slots of each ring of a host's ring pair.
	// Few slots keep the frames in flight in the caches of the two
	// cores that copy them (32 slots of 4 KiB frames are 128 KiB a
	// ring), and an engine that fills its ring waits for the switch
	// rather than running ahead of it. Measured with `hinic bench rdma
	// --port shm` on 2 cores, ib_write_bw 64 KiB: 512 slots 1,435 to
	// 1,452 MiB/s, 128 slots 1,560 to 1,614, 32 slots 2,097 to 2,175;
	// 64 B ib_send_bw 55 against 74 to 79 MiB/s.
	hostShmEntries = 32
	// redialMin and redialMax bound the back-off of a host dialling its
	// port again. The switch is in this process or next to it: it comes
	// back in milliseconds, and every millisecond without a link eats
	// into the RC retry budget.
	redialMin = 2 * time.Millisecond
	redialMax = 100 * time.Millisecond
)

// ShmGeometry is the shape of a host's ring pair when the port kind is
// PortShm.
func ShmGeometry() shmport.Geometry { return shmport.GeometryFor(hostShmEntries, maxFrame) }

// hostLink is one attachment of a host to its port: the socket, and the
// ring pair when the port kind is shm (the socket then only tells that
// the switch is alive). A hostLink is never reused once it fails.
type hostLink struct {
	conn *net.UnixConn
	shm  *shmport.Conn
	w    *mmsg.Writer // the engine's batched sends on conn, without shm
}

// shutdown breaks the link: the socket closes, the rings fail every call.
func (l *hostLink) shutdown() error {
	err := ignoreClosed(l.conn.Close())
	if l.shm != nil {
		l.shm.Shutdown()
	}
	return err
}

// close shuts the link down and unmaps the rings (after any call in
// progress returns).
func (l *hostLink) close() {
	_ = l.shutdown()
	if l.shm != nil {
		l.shm.Close()
	}
}

// newFabric builds and starts the rack's fabric in its run directory.
func (r *Rack) newFabric() (*fabric.Fabric, error) {
	cfg := r.cfg
	ports := max(fabric.DefaultPorts, cfg.Hosts)
	sc := fabric.SwitchConfig{Name: fabric.DefaultSwitchName, Ports: ports}
	for i := range cfg.Hosts {
		pc := fabric.PortConfig{Num: i + 1, Faults: cfg.Faults}
		if cfg.LinkLayer == LinkIB {
			pc.Link = "ib"
		}
		sc.Port = append(sc.Port, pc)
	}
	sc.Port = append(sc.Port, cfg.Uplinks...)
	for _, u := range cfg.Uplinks {
		sc.Ports = max(sc.Ports, u.Num)
	}
	ports = sc.Ports
	// No polling on either side of the rings (the hosts' too, in dial):
	// here both ends of every ring, the engines and the workloads share
	// one process and its few Ps, so a side polling for a frame takes
	// the CPU from the goroutine that would produce it and keeps the
	// netpoller from running the sleepers it would wake. Measured on
	// 2 cores: ib_send_lat 2 B 17.7 -> 11.2 us, ib_write_bw 64 B
	// 32 -> 40 MiB/s with polling off.
	fab, err := fabric.New(fabric.Config{RunDir: r.runDir, Ports: ports, Switches: []fabric.SwitchConfig{sc},
		Pcap: cfg.Pcap, Logger: cfg.Logger, ShmNoPoll: true, DialTunnel: cfg.DialTunnel})
	if err != nil {
		return nil, fmt.Errorf("rack: %w", err)
	}
	if err := fab.Start(); err != nil {
		return nil, fmt.Errorf("rack: start fabric: %w", err)
	}
	return fab, nil
}

// dial attaches the host to its port: the hello, and the ring pair when
// shm is set.
func (h *Host) dial(ctx context.Context, shm bool) (*hostLink, error) {
	opts := fabric.DialOptions{Shm: shm, ShmEntries: hostShmEntries, ShmOptions: shmport.Options{Poll: 0}}
	pc, _, err := fabric.DialPortWith(ctx, h.portPath, h.hello, opts)
	if err != nil {
		return nil, fmt.Errorf("rack: attach %s: %w", h.Name, err)
	}
	if shm && pc.Shm == nil {
		pc.Close()
		return nil, fmt.Errorf("rack: attach %s: the switch refused shared memory", h.Name)
	}
	l := &hostLink{conn: pc.Conn, shm: pc.Shm}
	if pc.Shm == nil {
		// Room for a burst of an engine's window in each direction.
		_ = pc.Conn.SetReadBuffer(nicSocketBuffer)
		_ = pc.Conn.SetWriteBuffer(nicSocketBuffer)
		bio, err := mmsg.New(pc.Conn, txBatch)
		if err != nil {
			pc.Close()
			return nil, fmt.Errorf("rack: attach %s: %w", h.Name, err)
		}
		l.w = mmsg.NewWriter(bio, maxFrame)
	}
	return l, nil
}

// linkPort is the engine's Port: the host's current link. Over a socket,
// one frame per SEQPACKET message, gathered over a round of the engine's
// work and sent with one sendmmsg (an rdma.FlushPort), blocking while the
// socket buffer is full (the back-pressure a NIC gets from its link);
// over rings, Send copies the frame into the next slot (waiting while
// the ring is full) and Flush publishes the round's frames with at most
// one wake-up of the switch. A frame sent on a link that just failed is lost, and
// so are frames gathered for a link that was replaced before the flush.
type linkPort struct{ h *Host }

func (p linkPort) Send(frame []byte) error {
	l := p.h.link.Load()
	if l.shm != nil {
		return l.shm.Queue(frame)
	}
	return l.w.Send(frame)
}

func (p linkPort) Flush() error {
	l := p.h.link.Load()
	if l.shm != nil {
		return l.shm.Flush()
	}
	return l.w.Flush()
}

// receive is the host's rx goroutine: it hands every frame from the
// fabric to the engine (which copies what it keeps; on rings the frames
// are delivered where they lie), a batch at a time (recvmmsg into fixed
// buffers on a socket), each batch in one DeliverBatch so that the
// engine's ACKs coalesce over it; when the link fails it dials again,
// until Close.
func (r *Rack) receive(h *Host) {
	defer r.wg.Done()
	bufs, frames := make([][]byte, rxBatch), make([][]byte, 0, rxBatch)
	sizes, trunc := make([]int, rxBatch), make([]bool, rxBatch)
	for i := range bufs {
		// One byte over the largest frame, so a longer one shows.
		bufs[i] = make([]byte, maxFrame+1)
	}
	for {
		l := h.link.Load()
		if l.shm != nil {
			r.receiveShm(h, l)
		} else if bio, err := mmsg.New(l.conn, rxBatch); err == nil {
			for {
				n, err := bio.ReadBatch(bufs, sizes, trunc)
				if err != nil {
					break // the switch went away, or Close
				}
				frames = frames[:0]
				for i := range n {
					// A truncated frame is passed on at one byte over
					// the engine's largest: it counts it malformed.
					frames = append(frames, bufs[i][:min(sizes[i], len(bufs[i]))])
				}
				// The engine handles the batch on this goroutine, as
				// the device backend's does: no wake-up between the
				// frame and its completion.
				h.Device.HoldKick()
				h.Device.DeliverBatch(frames)
				h.Device.RunInline(true)
			}
		}
		if !r.redial(h, l) {
			return
		}
	}
}

// receiveShm delivers the frames of a ring pair until it fails. The
// socket carries nothing once the rings are up; its EOF is how the
// host learns that the switch went away, so a watcher reads it and
// shuts the rings down, which wakes Recv (and a Send waiting for room).
func (r *Rack) receiveShm(h *Host, l *hostLink) {
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var b [64]byte
		for {
			if _, err := l.conn.Read(b[:]); err != nil {
				break
			}
		}
		l.shm.Shutdown()
	}()
	dev := h.Device
	deliver := func(frames [][]byte) {
		dev.HoldKick()
		dev.DeliverBatch(frames)
	}
	for {
		n, _, err := l.shm.Recv(rxBatch, deliver)
		if n > 0 {
			// The slots are free again; the engine handles the batch
			// on this goroutine.
			dev.RunInline(true)
		}
		if err != nil {
			break
		}
	}
	l.conn.Close()
	<-watched
}

// redial replaces the failed link old with a new attachment to the same
// port, backing off while the switch is away. It returns false when the
// rack is closing.
func (r *Rack) redial(h *Host, old *hostLink) bool {
	backoff := redialMin
	for {
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if closed {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := h.dial(ctx, r.cfg.Port == PortShm)
		cancel()
		if err == nil {
			r.mu.Lock()
			if r.closed {
				r.mu.Unlock()
				l.close()
				return false
			}
			h.link.Store(l)
			h.links.Add(1)
			close(r.relinked)
			r.relinked = make(chan struct{})
			r.mu.Unlock()
			old.close()
			return true
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, redialMax)
	}
}

// RestartFabric stops the rack's fabric, as a crash or restart of
// `hinic fabric serve` would (every port connection drops, the frames in
// the switch are lost), starts a new one on the same sockets and returns
// once every host has dialled its port again. Fabric is then the new
// fabric; the old one's counters are gone, so it returns the old
// fabric's last status. RC traffic resumes through retransmission.
//
// A raw rack (its hosts' Conn would go stale) and an InfiniBand one (the
// new switch would need the subnet manager's sweep again) are refused.
// Not safe for concurrent use with itself or with readers of Fabric.
func (r *Rack) RestartFabric(ctx context.Context) (fabric.Status, error) {
	if r.cfg.Raw || r.cfg.LinkLayer == LinkIB {
		return fabric.Status{}, errors.New("rack: RestartFabric needs an Ethernet rack with engines")
	}
	r.mu.Lock()
	old := r.Fabric
	r.mu.Unlock()
	before := make([]uint64, len(r.Hosts))
	for i, h := range r.Hosts {
		before[i] = h.links.Load()
	}
	st := old.Status()
	if err := old.Close(); err != nil {
		return st, fmt.Errorf("rack: stop fabric: %w", err)
	}
	fab, err := r.newFabric()
	if err != nil {
		return st, err
	}
	r.mu.Lock()
	r.Fabric = fab
	r.mu.Unlock()
	for {
		r.mu.Lock()
		ch, n := r.relinked, 0
		for i, h := range r.Hosts {
			if h.links.Load() > before[i] {
				n++
			}
		}
		r.mu.Unlock()
		if n == len(r.Hosts) {
			return st, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return st, fmt.Errorf("rack: %d of %d hosts attached again: %w", n, len(r.Hosts), ctx.Err())
		}
	}
}
