package gpu_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/gpu"
	"github.com/PacketFive/hinic/internal/gpu/gpusim"
)

const (
	testRAM = 64 << 20
	testMem = 16 << 20
)

// rig is a backend with one GPU and a simulated guest on it.
type rig struct {
	t   *testing.T
	srv *gpu.Server
	g   *gpusim.Guest
	cfg gpu.GPUConfig
	ctx context.Context
	dir string
}

func shortDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "hgpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// newRig starts a backend with the GPU config adjusted by mod and
// connects a guest (no handshake yet).
func newRig(t testing.TB, mod func(*gpu.GPUConfig), sim func(*gpusim.Config)) *rig {
	t.Helper()
	dir := shortDir(t)
	cfg := gpu.GPUConfig{ID: 2, Name: "HiGPU-test", Socket: filepath.Join(dir, "gpu.sock"),
		RAMPath: filepath.Join(dir, "ram"), RAMSize: testRAM, Machine: "q35",
		MemPath: filepath.Join(dir, "devmem"), MemSize: testMem}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := gpu.Start(context.Background(), gpu.Config{GPUs: []gpu.GPUConfig{cfg}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	sc := gpusim.Config{Socket: cfg.Socket, RAMPath: cfg.RAMPath, RAMSize: cfg.RAMSize}
	if sim != nil {
		sim(&sc)
	}
	g, err := gpusim.Connect(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	r := &rig{srv: srv, g: g, cfg: srv.GPUs()[0].Config(), ctx: ctx, dir: dir}
	if tt, ok := t.(*testing.T); ok {
		r.t = tt
	}
	return r
}

// liveRig is newRig after a good handshake.
func liveRig(t testing.TB, mod func(*gpu.GPUConfig), sim func(*gpusim.Config)) *rig {
	t.Helper()
	r := newRig(t, mod, sim)
	if err := r.g.Handshake(r.ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// status returns the completion status of err (OK for nil).
func status(t testing.TB, err error) uint16 {
	t.Helper()
	var st gpusim.Status
	if errors.As(err, &st) {
		return uint16(st)
	}
	if err != nil {
		t.Fatal(err)
	}
	return gpu.StOK
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// gpusimRings builds gpusim.Rings in tests.
type gpusimRings gpusim.Rings

func (r gpusimRings) rings() gpusim.Rings { return gpusim.Rings(r) }
