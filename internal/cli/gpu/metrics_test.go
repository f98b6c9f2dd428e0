package gpu_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/gpu/serve"
	"github.com/PacketFive/hinic/internal/gpu"
	"github.com/PacketFive/hinic/internal/gpu/gpusim"
	"github.com/PacketFive/hinic/internal/metrics/metricstest"
)

// TestServeMetrics runs `gpu serve` with a metrics endpoint, drives the
// GPU with the simulator and reads /metrics with the Prometheus text
// parser.
func TestServeMetrics(t *testing.T) {
	isolate(t)
	dir := shortDir(t)
	sock, ram := filepath.Join(dir, "g0.sock"), filepath.Join(dir, "a.ram")
	g0, err := serve.ParseGPU("socket=" + sock + ",ram=" + ram + ",ram-size=16M,mem-size=8M")
	if err != nil {
		t.Fatal(err)
	}
	ios, _, _, _ := cmdutil.Test()
	url := metricstest.Serve(t, func(ctx context.Context, ready func(string)) error {
		return serve.Run(ctx, &serve.Options{IO: ios, Logger: slog.New(slog.DiscardHandler),
			Control: filepath.Join(dir, "gpu.sock"), GPUs: []gpu.GPUConfig{g0}, Metrics: "127.0.0.1:0", MetricsReady: ready})
	})
	m := metricstest.Scrape(t, url)
	if v, ok := m.Value("hinic_gpu_memory_bytes", "gpu", "0"); !ok || v != 8<<20 {
		t.Errorf("memory_bytes = %v, %v", v, ok)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := gpusim.Connect(ctx, gpusim.Config{Socket: sock, RAMPath: ram, RAMSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Handshake(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := g.CtxCreate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.MemAlloc(ctx, c, 1<<20, 0); err != nil {
		t.Fatal(err)
	}
	m = metricstest.Scrape(t, url)
	for _, c := range []struct {
		name string
		want float64
	}{
		{"hinic_gpu_guest_connected", 1},
		{"hinic_gpu_contexts", 1},
		{"hinic_gpu_allocations", 1},
		{"hinic_gpu_memory_used_bytes", 1 << 20},
		{"hinic_gpu_commands_total", 2},
		{"hinic_gpu_command_errors_total", 0},
	} {
		if v, ok := m.Value(c.name, "gpu", "0"); !ok || v != c.want {
			t.Errorf("%s = %v (found %v), want %v", c.name, v, ok, c.want)
		}
	}
	if v, _ := m.Value("hinic_gpu_doorbells_total", "gpu", "0"); v == 0 {
		t.Error("no doorbell counted")
	}
	if v, ok := m.Value("hinic_gpu_copy_bytes_total", "gpu", "0", "direction", "h2d"); !ok || v != 0 {
		t.Errorf("h2d bytes = %v, %v", v, ok)
	}
}
