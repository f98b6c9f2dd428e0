package fabric

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/PacketFive/hinic/internal/proto"
)

// BenchConfig configures Bench.
type BenchConfig struct {
	// Sizes are the frame sizes to measure; default 64, 1500, 4200.
	Sizes []int
	// Duration is how long traffic is offered per measurement; default 2 s.
	Duration time.Duration
	// IOBatch is the switch's recvmmsg/sendmmsg batch; 1 disables
	// batching. Default DefaultIOBatch.
	IOBatch int
	// SocketBuffer is the buffer size of every socket, relay's and
	// switch's alike. Default DefaultSocketBuffer.
	SocketBuffer ByteSize
	// Progress, if set, is called before each measurement.
	Progress func(what string)
}

// BenchRun is one measurement.
type BenchRun struct {
	Frames  uint64  `json:"frames"`  // frames delivered
	Seconds float64 `json:"seconds"` // from the first send to the last delivery
	FPS     float64 `json:"frames_per_second"`
	Gbps    float64 `json:"gbit_per_second"`
	Lost    uint64  `json:"lost"`  // sent but never delivered
	Drops   uint64  `json:"drops"` // drops counted by the switch
}

// BenchResult compares the switch with the raw relay for one size.
type BenchResult struct {
	Size   int      `json:"size"`
	Batch  int      `json:"batch"`
	Relay  BenchRun `json:"relay"`
	Switch BenchRun `json:"switch"`
	// Ratio is the switch's frames per second over the relay's.
	Ratio float64 `json:"ratio"`
}

// ErrBenchLoss means the lossless class lost frames during a benchmark.
var ErrBenchLoss = errors.New("fabric: bench: frames lost on the lossless class")

// Bench measures forwarding between two ports of a switch against a raw
// relay (two socket pairs joined by a loop that only copies), with the
// same generator and sink, for each frame size. Traffic is priority
// tagged PCP 3, the lossless class: any loss is an error (ErrBenchLoss)
// returned with the results.
func Bench(ctx context.Context, cfg BenchConfig) ([]BenchResult, error) {
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = []int{64, 1500, 4200}
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 2 * time.Second
	}
	if cfg.IOBatch <= 0 {
		cfg.IOBatch = DefaultIOBatch
	}
	if cfg.SocketBuffer <= 0 {
		cfg.SocketBuffer = DefaultSocketBuffer
	}
	progress := cfg.Progress
	if progress == nil {
		progress = func(string) {}
	}
	var results []BenchResult
	var lossErr error
	for _, size := range cfg.Sizes {
		if size < 60 || size > 9000 {
			return results, fmt.Errorf("fabric: bench: size %d: must be 60 to 9000", size)
		}
		progress(fmt.Sprintf("raw relay, %d-byte frames", size))
		relay, err := benchRelay(ctx, size, cfg)
		if err != nil {
			return results, err
		}
		progress(fmt.Sprintf("switch, %d-byte frames", size))
		swr, err := benchSwitch(ctx, size, cfg)
		if err != nil {
			return results, err
		}
		r := BenchResult{Size: size, Batch: cfg.IOBatch, Relay: relay, Switch: swr}
		if relay.FPS > 0 {
			r.Ratio = swr.FPS / relay.FPS
		}
		results = append(results, r)
		if swr.Lost > 0 || swr.Drops > 0 {
			lossErr = fmt.Errorf("%w: %d-byte frames: %d lost, %d dropped", ErrBenchLoss, size, swr.Lost, swr.Drops)
		}
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
	}
	return results, lossErr
}

var benchSrc, benchDst = [6]byte{0x02, 0xBE, 0, 0, 0, 1}, [6]byte{0x02, 0xBE, 0, 0, 0, 2}

func benchFrame(size int) []byte {
	b := make([]byte, size)
	proto.Ethernet(b).Encode(&proto.EthernetFields{Dst: benchDst, Src: benchSrc, VLAN: true, PCP: 3, EtherType: 0x88B5})
	for i := 18; i < size; i++ {
		b[i] = byte(i)
	}
	return b
}

// offer runs the generator (writes to tx for d) and the sink (reads from
// rx until it has what was sent) and measures.
func offer(ctx context.Context, tx, rx *net.UnixConn, size int, d time.Duration) BenchRun {
	frame := benchFrame(size)
	var sent atomic.Uint64
	var genDone atomic.Bool
	recvd := make(chan uint64, 1)
	start := time.Now()
	var end time.Time
	go func() { // sink
		buf := make([]byte, 1<<16)
		var n uint64
		for {
			if genDone.Load() && n >= sent.Load() {
				break
			}
			rx.SetReadDeadline(time.Now().Add(time.Second))
			k, err := rx.Read(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && !genDone.Load() {
					continue
				}
				break // timed out after the generator stopped: the rest is lost
			}
			if k == size {
				n++
				end = time.Now()
			}
		}
		recvd <- n
	}()
	deadline := start.Add(d)
	tx.SetWriteDeadline(deadline)
	for ctx.Err() == nil {
		if _, err := tx.Write(frame); err != nil {
			break
		}
		if sent.Add(1)%64 == 0 && time.Now().After(deadline) {
			break
		}
	}
	genDone.Store(true)
	n := <-recvd
	r := BenchRun{Frames: n, Lost: sent.Load() - n}
	if !end.IsZero() {
		r.Seconds = end.Sub(start).Seconds()
	}
	if r.Seconds > 0 {
		r.FPS = float64(n) / r.Seconds
		r.Gbps = r.FPS * float64(size) * 8 / 1e9
	}
	return r
}

// benchRelay measures the ceiling: generator -> pair -> copy loop ->
// pair -> sink.
func benchRelay(ctx context.Context, size int, cfg BenchConfig) (BenchRun, error) {
	g, r0, err := socketPair()
	if err != nil {
		return BenchRun{}, err
	}
	r1, s, err := socketPair()
	if err != nil {
		g.Close()
		r0.Close()
		return BenchRun{}, err
	}
	for _, c := range []*net.UnixConn{g, r0, r1, s} {
		setSocketBuffers(c, int(cfg.SocketBuffer))
		defer c.Close()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the relay: read one, write one
		defer wg.Done()
		buf := make([]byte, 1<<16)
		for {
			n, err := r0.Read(buf)
			if err != nil {
				return
			}
			if _, err := r1.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	run := offer(ctx, g, s, size, cfg.Duration)
	r0.Close()
	r1.Close()
	wg.Wait()
	return run, nil
}

// benchSwitch measures a two-port switch fed and drained by NIC peers.
func benchSwitch(ctx context.Context, size int, cfg BenchConfig) (BenchRun, error) {
	dir, err := os.MkdirTemp("", "hinic-bench")
	if err != nil {
		return BenchRun{}, err
	}
	defer os.RemoveAll(dir)
	f, err := New(Config{RunDir: dir, Ports: 2, IOBatch: cfg.IOBatch, SocketBuffer: cfg.SocketBuffer})
	if err != nil {
		return BenchRun{}, err
	}
	if err := f.Start(); err != nil {
		return BenchRun{}, err
	}
	defer f.Close()
	sw := f.Switches()[0]
	dial := func(num int, mac [6]byte) (*net.UnixConn, error) {
		c, _, err := DialPort(ctx, sw.SocketPath(num), &proto.HelloFields{
			Version: proto.HelloVersion, LinkLayer: proto.HelloLinkEthernet, Role: proto.HelloRoleNIC,
			MaxFrame: uint16(max(size, 1500)), MAC: mac, PortNum: 1, Name: fmt.Sprintf("bench/%d", num),
		})
		if err == nil {
			setSocketBuffers(c, int(cfg.SocketBuffer))
		}
		return c, err
	}
	gen, err := dial(1, benchSrc)
	if err != nil {
		return BenchRun{}, err
	}
	defer gen.Close()
	sink, err := dial(2, benchDst)
	if err != nil {
		return BenchRun{}, err
	}
	defer sink.Close()
	// The sink announces itself so that traffic to it is unicast, and
	// the generator takes what the switch sends it (that frame, PFC).
	hi := make([]byte, 60)
	proto.Ethernet(hi).Encode(&proto.EthernetFields{Dst: [6]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, Src: benchDst, EtherType: 0x88B5})
	if _, err := sink.Write(hi); err != nil {
		return BenchRun{}, err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(io.Discard, gen)
	}()
	for deadline := time.Now().Add(2 * time.Second); sw.ports[1].ctr.rxFrames.Load() == 0 || !sw.ports[0].isUp(); {
		if time.Now().After(deadline) {
			return BenchRun{}, errors.New("fabric: bench: switch did not come up")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	run := offer(ctx, gen, sink, size, cfg.Duration)
	for _, p := range sw.ports {
		for r := range numDropReasons {
			run.Drops += p.ctr.drops[r].Load()
		}
	}
	gen.Close()
	wg.Wait()
	return run, nil
}
