package gpu_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/gpu"
	"github.com/PacketFive/hinic/internal/gpu/gpusim"
	"github.com/PacketFive/hinic/internal/hilink"
	"github.com/PacketFive/hinic/internal/hilink/wire"
)

// peerRig is a HiLink switch and two GPU backends (two guests), GPU 1
// on port 0 and GPU 4 on port 1, each with a simulated guest; port 2 is
// free for a test's own endpoint.
type peerRig struct {
	sw   *hilink.Switch
	srv  [2]*gpu.Server
	g    [2]*gpusim.Guest
	ids  [2]uint16
	ctxs [2]uint16
	ctx  context.Context
}

func newPeerRig(t *testing.T, mod func(i int, c *gpu.GPUConfig)) *peerRig {
	t.Helper()
	return newPeerRigTB(t, mod)
}

func newPeerRigTB(t testing.TB, mod func(i int, c *gpu.GPUConfig)) *peerRig {
	t.Helper()
	dir := shortDir(t)
	sw := startSwitch(t, hilink.Config{RunDir: filepath.Join(dir, "hl"), Ports: 3, Credits: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	r := &peerRig{sw: sw, ids: [2]uint16{1, 4}, ctx: ctx}
	for i := range 2 {
		cfg := gpu.GPUConfig{ID: int(r.ids[i]), Socket: filepath.Join(dir, fmt.Sprintf("gpu%d.sock", i)),
			RAMPath: filepath.Join(dir, fmt.Sprintf("ram%d", i)), RAMSize: testRAM, MemSize: testMem,
			HiLink: hilink.PortPath(sw.Config().RunDir, i), LinkName: fmt.Sprintf("vm%d/gpu", i)}
		if mod != nil {
			mod(i, &cfg)
		}
		srv, err := gpu.Start(ctx, gpu.Config{GPUs: []gpu.GPUConfig{cfg}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		g, err := gpusim.Connect(ctx, gpusim.Config{Socket: cfg.Socket, RAMPath: cfg.RAMPath, RAMSize: cfg.RAMSize})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		if err := g.Handshake(ctx); err != nil {
			t.Fatal(err)
		}
		r.srv[i], r.g[i] = srv, g
		r.ctxs[i] = must[uint16](t)(g.CtxCreate(ctx))
	}
	return r
}

// startSwitch starts a HiLink switch that closes with the test.
func startSwitch(t testing.TB, cfg hilink.Config) *hilink.Switch {
	t.Helper()
	sw, err := hilink.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sw.Close() })
	return sw
}

// fill allocates n bytes on GPU i, fills them with random bytes of seed
// and returns the device address and the bytes.
func (r *peerRig) fill(t *testing.T, i int, n uint64, seed uint64) (uint64, []byte) {
	t.Helper()
	g := r.g[i]
	dev := must[uint64](t)(g.MemAlloc(r.ctx, r.ctxs[i], n, 0))
	data := make([]byte, n)
	rnd := rand.New(rand.NewPCG(seed, n))
	for k := range data {
		data[k] = byte(rnd.Uint32())
	}
	host := must[uint64](t)(g.Alloc(n, 64))
	copy(g.Mem(host, n), data)
	if err := g.Copy(r.ctx, gpu.OpCopyH2D, r.ctxs[i], dev, host, n, 0); err != nil {
		t.Fatal(err)
	}
	return dev, data
}

// read returns n bytes of GPU i's memory at dev.
func (r *peerRig) read(t *testing.T, i int, dev, n uint64) []byte {
	t.Helper()
	g := r.g[i]
	host := must[uint64](t)(g.Alloc(n, 64))
	if err := g.Copy(r.ctx, gpu.OpCopyD2H, r.ctxs[i], host, dev, n, 0); err != nil {
		t.Fatal(err)
	}
	return g.Mem(host, n)
}

// peerCopy runs COPY_PEER on GPU i and returns its status.
func (r *peerRig) peerCopy(t *testing.T, i int, dst, src, n uint64) uint16 {
	t.Helper()
	return status(t, r.g[i].Copy(r.ctx, gpu.OpCopyPeer, r.ctxs[i], dst, src, n, 0))
}

func (r *peerRig) enable(t testing.TB, i int) {
	t.Helper()
	if err := r.g[i].PeerAccess(r.ctx, r.ctxs[i], r.ids[1-i], true); err != nil {
		t.Fatal(err)
	}
}

// TestPeerCopies: writes and reads between two guests' GPUs over a real
// switch, of one frame and of many, every byte compared; the device
// says it has a HiLink port.
func TestPeerCopies(t *testing.T) {
	r := newPeerRig(t, nil)
	for i := range 2 {
		h := r.g[i].Header()
		if h.HiLinkPort != 1 || h.Caps&gpu.CapPeer == 0 {
			t.Fatalf("GPU %d: hilink_ports %d, caps %#x", i, h.HiLinkPort, h.Caps)
		}
	}
	r.enable(t, 0)
	r.enable(t, 1)
	for _, n := range []uint64{1, 4096, 65536, 65537, 1<<20 + 13} {
		t.Run(fmt.Sprintf("size=%d", n), func(t *testing.T) {
			a, da := r.fill(t, 0, n, 1)
			b, _ := r.fill(t, 1, n, 2)
			// Push: GPU 1 (rig 0) writes its buffer into GPU 4's.
			if st := r.peerCopy(t, 0, b, a, n); st != gpu.StOK {
				t.Fatalf("push: status %d", st)
			}
			if !bytes.Equal(r.read(t, 1, b, n), da) {
				t.Fatal("push: the peer's memory differs")
			}
			// Pull: GPU 1 reads back into a, after a fresh pattern on b.
			b2, db2 := r.fill(t, 1, n, 3)
			if st := r.peerCopy(t, 0, a, b2, n); st != gpu.StOK {
				t.Fatalf("pull: status %d", st)
			}
			if !bytes.Equal(r.read(t, 0, a, n), db2) {
				t.Fatal("pull: the local memory differs")
			}
			for i, d := range [][2]uint64{{0, a}, {1, b}, {1, b2}} {
				if err := r.g[d[0]].MemFree(r.ctx, r.ctxs[d[0]], d[1]); err != nil {
					t.Fatal(i, err)
				}
			}
		})
	}
	t.Run("concurrent streams", func(t *testing.T) {
		// Four streams of each GPU copy to the other at once.
		const n = 200_000
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 2 {
			for s := range 4 {
				src, data := r.fill(t, i, n, uint64(10*i+s))
				dst := must[uint64](t)(r.g[1-i].MemAlloc(r.ctx, r.ctxs[1-i], n, 0))
				wg.Add(1)
				go func() {
					defer wg.Done()
					cpl, err := r.g[i].Do(r.ctx, gpu.NewCmd(gpu.OpCopyPeer, r.ctxs[i], uint16(s), 0,
						gpu.ArgsCopy{Dst: dst, Src: src, Len: n}))
					if err == nil && cpl.Status != gpu.StOK {
						err = fmt.Errorf("status %d", cpl.Status)
					}
					if err == nil {
						host := must[uint64](t)(r.g[1-i].Alloc(n, 64))
						err = r.g[1-i].Copy(r.ctx, gpu.OpCopyD2H, r.ctxs[1-i], host, dst, n, 0)
						if err == nil && !bytes.Equal(r.g[1-i].Mem(host, n), data) {
							err = fmt.Errorf("GPU %d stream %d: data differs", i, s)
						}
					}
					if err != nil {
						errs <- err
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// TestPeerErrors: every way a peer copy or an enable fails, with its
// status, and nothing outside an allocation is touched.
func TestPeerErrors(t *testing.T) {
	r := newPeerRig(t, nil)
	const n = 8192
	a, _ := r.fill(t, 0, n, 1)
	b, db := r.fill(t, 1, n, 2)
	c := r.ctxs[0]
	g := r.g[0]
	pa := func(peer uint16, on bool) uint16 { return status(t, g.PeerAccess(r.ctx, c, peer, on)) }

	if st := r.peerCopy(t, 0, b, a, n); st != gpu.StEPERM {
		t.Errorf("no access enabled here: status %d", st)
	}
	r.enable(t, 0)
	if st := r.peerCopy(t, 0, b, a, n); st != gpu.StEPERM {
		t.Errorf("no access enabled at the peer: status %d", st)
	}
	r.enable(t, 1)
	for _, tc := range []struct {
		name     string
		dst, src uint64
		len      uint64
		want     uint16
	}{
		{"past the remote end", b + n - 10, a, 100, gpu.StEACCES},
		{"remote not allocated", b + 4*n, a, 100, gpu.StEACCES},
		{"remote in two GPUs", gpu.VABase(5) - 10, a, 100, gpu.StEACCES},
		{"remote read past the end", a, b + 1, n, gpu.StEACCES},
		{"local past the end", b, a + 1, n, gpu.StEACCES},
		{"both local", a, a + 100, 10, gpu.StEINVAL},
		{"neither local", b, b + 100, 10, gpu.StEACCES},
		{"no GPU", a, 7, 10, gpu.StEACCES},
		{"a GPU past the last", a, gpu.VABase(gpu.MaxGPUs), 10, gpu.StEACCES},
		{"a GPU not enabled", gpu.VABase(6), a, 10, gpu.StEPERM},
		{"length 0", b, a, 0, gpu.StEINVAL},
		{"longer than the wire's 32 bits", b, a, 1 << 32, gpu.StEINVAL},
	} {
		if st := r.peerCopy(t, 0, tc.dst, tc.src, tc.len); st != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, st, tc.want)
		}
	}
	if !bytes.Equal(r.read(t, 1, b, n), db) {
		t.Error("a refused write changed the peer's memory")
	}
	for _, tc := range []struct {
		peer uint16
		on   bool
		want uint16
	}{
		{r.ids[1], true, gpu.StEEXIST}, {r.ids[0], true, gpu.StEINVAL}, {gpu.MaxGPUs, true, gpu.StEINVAL},
		{6, false, gpu.StENOENT}, {6, true, gpu.StOK}, {6, false, gpu.StOK},
	} {
		if st := pa(tc.peer, tc.on); st != tc.want {
			t.Errorf("peer access %d %v: status %d, want %d", tc.peer, tc.on, st, tc.want)
		}
	}
	// A freed remote buffer is a bad remote pointer.
	if err := r.g[1].MemFree(r.ctx, r.ctxs[1], b); err != nil {
		t.Fatal(err)
	}
	if st := r.peerCopy(t, 0, b, a, n); st != gpu.StEACCES {
		t.Errorf("freed remote: status %d", st)
	}
	b = must[uint64](t)(r.g[1].MemAlloc(r.ctx, r.ctxs[1], n, 0))
	// The peer's context that enabled us goes: no access.
	if err := r.g[1].CtxDestroy(r.ctx, r.ctxs[1]); err != nil {
		t.Fatal(err)
	}
	if st := r.peerCopy(t, 0, b, a, n); st != gpu.StEPERM {
		t.Errorf("peer context destroyed: status %d", st)
	}
	// The peer's guest goes: unreachable, then its backend goes: the
	// switch answers unreachable.
	r.g[1].Close()
	waitGPU(t, r.srv[1], func(s gpu.GPUStatus) bool { return !s.Guest })
	if st := r.peerCopy(t, 0, b, a, n); st != gpu.StEHOSTUNREACH {
		t.Errorf("peer guest gone: status %d", st)
	}
	r.srv[1].Close()
	for _, tc := range [][2]uint64{{b, a}, {a, b}} {
		if st := r.peerCopy(t, 0, tc[0], tc[1], n); st != gpu.StEHOSTUNREACH {
			t.Errorf("peer backend gone: status %d", st)
		}
	}
	// Disabling works after the peer left; then it is no access again.
	if st := pa(r.ids[1], false); st != gpu.StOK {
		t.Errorf("disable: status %d", st)
	}
	if st := r.peerCopy(t, 0, b, a, n); st != gpu.StEPERM {
		t.Errorf("disabled: status %d", st)
	}
}

// TestPeerBudget: with a budget of one peer operation, copies of many
// streams still all complete, one at a time.
func TestPeerBudget(t *testing.T) {
	r := newPeerRig(t, func(_ int, c *gpu.GPUConfig) { c.MaxPeerOps = 1 })
	r.enable(t, 0)
	r.enable(t, 1)
	const n = 100_000
	src, data := r.fill(t, 0, n, 5)
	var dsts []uint64
	var cmds []gpu.Cmd
	for s := range 6 {
		d := must[uint64](t)(r.g[1].MemAlloc(r.ctx, r.ctxs[1], n, 0))
		dsts = append(dsts, d)
		cmds = append(cmds, gpu.NewCmd(gpu.OpCopyPeer, r.ctxs[0], uint16(s), r.g[0].Tag(), gpu.ArgsCopy{Dst: d, Src: src, Len: n}))
	}
	if err := r.g[0].Post(r.ctx, cmds...); err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		cpl, err := r.g[0].Wait(r.ctx, c.Tag)
		if err != nil || cpl.Status != gpu.StOK {
			t.Fatalf("copy %d: %v, status %d", c.Tag, err, cpl.Status)
		}
	}
	for _, d := range dsts {
		if !bytes.Equal(r.read(t, 1, d, n), data) {
			t.Fatal("data differs")
		}
	}
	if got := r.srv[0].Status().GPUs[0].Link.MaxInflight; got != 1 {
		t.Errorf("peer operations in flight at most %d, want 1", got)
	}
}

// TestPeerWithoutLink: a GPU without a HiLink port refuses peer
// commands.
func TestPeerWithoutLink(t *testing.T) {
	r := liveRig(t, nil, nil)
	c := must[uint16](t)(r.g.CtxCreate(r.ctx))
	if st := status(t, r.g.PeerAccess(r.ctx, c, 1, true)); st != gpu.StEOPNOTSUPP {
		t.Errorf("peer access: status %d", st)
	}
	d := must[uint64](t)(r.g.MemAlloc(r.ctx, c, 4096, 0))
	if st := status(t, r.g.Copy(r.ctx, gpu.OpCopyPeer, c, gpu.VABase(1), d, 10, 0)); st != gpu.StEOPNOTSUPP {
		t.Errorf("copy: status %d", st)
	}
	if h := r.g.Header(); h.HiLinkPort != 0 || h.Caps&gpu.CapPeer != 0 {
		t.Errorf("hilink_ports %d, caps %#x", h.HiLinkPort, h.Caps)
	}
}

func waitGPU(t *testing.T, srv *gpu.Server, cond func(gpu.GPUStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond(srv.Status().GPUs[0]) {
		if time.Now().After(deadline) {
			t.Fatalf("GPU status %+v", srv.Status().GPUs[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// FuzzPeerFrames sends what another GPU's port may send to a GPU over a
// real switch: writes, read requests and stray responses with any tag,
// flags, length and address (around an allocation the guest opened to
// that GPU, or anywhere). The backend must answer every request once with a
// response that parses, never write device memory outside the
// allocation (the memory file is read back), and keep serving its guest
// and its peers.
func FuzzPeerFrames(f *testing.F) {
	seed := func(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
	// frame: type, flags|status, tag (1), address selector (2, wild 8 if
	// flags bit 0x10), payload length (2), payload.
	fr := func(typ, flags byte, sel uint16, n uint16) []byte {
		b := []byte{typ, flags, 7, byte(sel >> 8), byte(sel), byte(n >> 8), byte(n)}
		return append(b, bytes.Repeat([]byte{0xA5}, int(n))...)
	}
	f.Add(seed(fr(3, 0x80, 512, 100), fr(5, 0, 600, 64)))
	f.Add(seed(fr(3, 0, 0, 16), fr(3, 0x80, 16, 16), fr(5, 0, 8000, 4000)))
	f.Add(seed(fr(4, 0, 512, 0), fr(6, 0x80, 512, 8), fr(3, 0x80, 9000, 10)))
	f.Add(seed(fr(3, 0x90, 512, 1), fr(5, 0x10, 512, 1)))

	const n = 8192
	// GPU 1 (rig 0) under test, with its memory in a file; the frames
	// come from GPU 6 on the switch's third port.
	var memPath string
	r := newPeerRigTB(f, func(i int, c *gpu.GPUConfig) {
		if i == 0 {
			c.MemSize, c.MemPath = 1<<20, filepath.Join(filepath.Dir(c.Socket), "devmem")
			memPath = c.MemPath
		}
	})
	ctx, g, c, srv := r.ctx, r.g[0], r.ctxs[0], r.srv[0]
	if err := g.PeerAccess(ctx, c, 6, true); err != nil {
		f.Fatal(err)
	}
	base := must[uint64](f)(g.MemAlloc(ctx, c, n, 0))
	ep, err := hilink.Dial(ctx, hilink.EndpointConfig{Path: hilink.PortPath(r.sw.Config().RunDir, 2), GPUs: []uint16{6}, Credits: 4})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ep.Close() })
	var tag uint32

	f.Fuzz(func(t *testing.T, data []byte) {
		// Not the rig's context: a fuzzing run outlives its two minutes.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// At most 200 frames: the target queues 256 answers for a
		// requester, and this one reads its answers only at the end.
		requests := 0
		for frames := 0; len(data) >= 7 && frames < 200; frames++ {
			typ := wire.Type(3 + data[0]%4)
			flags, sel, plen := data[1], uint16(data[3])<<8|uint16(data[4]), int(data[5])<<8|int(data[6])
			data = data[7:]
			addr := base - 512 + uint64(sel)
			if flags&0x10 != 0 && len(data) >= 8 {
				addr = uint64(data[0])<<56 | uint64(data[1])<<48 | uint64(data[2])<<40 | uint64(data[3])<<32 |
					uint64(data[4])<<24 | uint64(data[5])<<16 | uint64(data[6])<<8 | uint64(data[7])
				data = data[8:]
			}
			fl := wire.Fields{Type: typ, Status: flags & 0xF, SrcGPU: 6, DstGPU: 1, Tag: tag, Address: addr}
			tag++
			var payload []byte
			switch typ {
			case wire.TypeWrite, wire.TypeReadResp:
				if len(data) == 0 {
					continue // a write or read data frame carries at least one octet
				}
				plen = max(1, min(plen, len(data), 60000))
				payload, data = data[:plen], data[plen:]
				if flags&0x80 != 0 {
					fl.Flags = wire.FlagLast
				}
				if typ == wire.TypeWrite {
					fl.Status = 0
				}
			case wire.TypeReadReq:
				fl.Length, fl.Status = uint32(max(1, plen)), 0
			default:
				fl.Length = uint32(plen)
			}
			if (typ == wire.TypeWrite && fl.Flags != 0) || typ == wire.TypeReadReq {
				requests++ // each ends an operation: one answer
			}
			if err := ep.Send(ctx, wire.Append(nil, &fl, payload)); err != nil {
				t.Fatal(err)
			}
		}
		// A last read of the whole allocation: its answer comes after
		// every other one.
		final := tag
		tag++
		if err := ep.Send(ctx, wire.Append(nil, &wire.Fields{Type: wire.TypeReadReq, SrcGPU: 6, DstGPU: 1,
			Tag: final, Length: n, Address: base}, nil)); err != nil {
			t.Fatal(err)
		}
		answers := 0
		for done := false; !done; {
			m, err := ep.Recv(ctx)
			if err != nil {
				t.Fatal(err)
			}
			h, err := wire.Parse(m)
			if err != nil || (h.Type() != wire.TypeWriteResp && h.Type() != wire.TypeReadResp) || h.SrcGPU() != 1 || h.DstGPU() != 6 {
				t.Fatalf("answer %x: %v", m, err)
			}
			switch {
			case h.Tag() == final && h.Last():
				if h.Status() != wire.StatusOK {
					t.Fatalf("the read of the allocation: status %d", h.Status())
				}
				done = true
			case h.Type() == wire.TypeWriteResp || h.Last():
				answers++
			}
		}
		if answers != requests {
			t.Fatalf("%d answers to %d requests", answers, requests)
		}
		mem, err := os.ReadFile(memPath)
		if err != nil {
			t.Fatal(err)
		}
		off := base - gpu.VABase(1)
		for i, b := range mem {
			if b != 0 && (uint64(i) < off || uint64(i) >= off+n) {
				t.Fatalf("device memory written outside the allocation, at offset %d", i)
			}
		}
		if st := srv.Status().GPUs[0]; st.State != "live" || !st.Link.Up {
			t.Fatalf("GPU %+v", st)
		}
	})
}

// TestPeerSwitchRestart: when the HiLink switch goes away, both GPUs'
// links show down and a peer copy fails with EHOSTUNREACH; a switch
// started again on the same run directory is dialled again by both
// (relinks 1), and copies each way move every byte as before.
func TestPeerSwitchRestart(t *testing.T) {
	r := newPeerRig(t, nil)
	r.enable(t, 0)
	r.enable(t, 1)
	const n = 100_000
	copyBoth := func(seed uint64) {
		t.Helper()
		for i := range 2 {
			src, data := r.fill(t, i, n, seed+uint64(i))
			dst := must[uint64](t)(r.g[1-i].MemAlloc(r.ctx, r.ctxs[1-i], n, 0))
			if st := r.peerCopy(t, i, dst, src, n); st != gpu.StOK {
				t.Fatalf("GPU %d to %d: status %d", i, 1-i, st)
			}
			if !bytes.Equal(r.read(t, 1-i, dst, n), data) {
				t.Fatalf("GPU %d to %d: the peer's memory differs", i, 1-i)
			}
		}
	}
	copyBoth(1)
	cfg := r.sw.Config()
	if err := r.sw.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		waitGPU(t, r.srv[i], func(s gpu.GPUStatus) bool { return s.Link != nil && !s.Link.Up })
	}
	src, _ := r.fill(t, 0, n, 5)
	dst := must[uint64](t)(r.g[1].MemAlloc(r.ctx, r.ctxs[1], n, 0))
	if st := r.peerCopy(t, 0, dst, src, n); st != gpu.StEHOSTUNREACH {
		t.Fatalf("copy with the switch gone: status %d, want EHOSTUNREACH", st)
	}
	r.sw = startSwitch(t, cfg)
	for i := range 2 {
		waitGPU(t, r.srv[i], func(s gpu.GPUStatus) bool { return s.Link != nil && s.Link.Up && s.Link.Relinks == 1 })
	}
	copyBoth(7)
}
