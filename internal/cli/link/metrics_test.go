package link_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/cli/clitest"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/link/serve"
	"github.com/PacketFive/hinic/internal/hilink"
	"github.com/PacketFive/hinic/internal/hilink/wire"
	"github.com/PacketFive/hinic/internal/metrics/metricstest"
)

// TestServeMetrics runs `link serve` with a metrics endpoint, sends a
// frame to a GPU nobody has and reads the drop from /metrics with the
// Prometheus text parser.
func TestServeMetrics(t *testing.T) {
	isolate(t)
	dir := filepath.Join(clitest.ShortDir(t, "hlm"), "run")
	ios, _, _, _ := cmdutil.Test()
	url := metricstest.Serve(t, func(ctx context.Context, ready func(string)) error {
		return serve.Run(ctx, &serve.Options{IO: ios, Logger: slog.New(slog.DiscardHandler),
			Switch:  hilink.Config{RunDir: dir, Ports: 2, Credits: 16, MaxFrame: hilink.DefaultMaxFrame, IOBatch: 1},
			Metrics: "127.0.0.1:0", MetricsReady: ready})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := hilink.Dial(ctx, hilink.EndpointConfig{Path: hilink.PortPath(dir, 1), GPUs: []uint16{3}, Credits: 8, Name: "vm-a/gpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Send(ctx, wire.Append(nil, &wire.Fields{Type: wire.TypeWrite, SrcGPU: 3, DstGPU: 9}, []byte("x"))); err != nil {
		t.Fatal(err)
	}
	var m metricstest.Families
	clitest.WaitFor(t, "the drop on /metrics", func() bool {
		m = metricstest.Scrape(t, url)
		v, _ := m.Value("hinic_link_port_drops_total", "port", "1", "reason", "no-route")
		return v == 1
	})
	for _, c := range []struct {
		name string
		port string
		want float64
	}{
		{"hinic_link_port_up", "1", 1},
		{"hinic_link_port_up", "0", 0},
		{"hinic_link_port_rx_frames_total", "1", 1},
		{"hinic_link_port_sessions_total", "1", 1},
		{"hinic_link_port_tx_frames_total", "0", 0},
	} {
		if v, ok := m.Value(c.name, "port", c.port); !ok || v != c.want {
			t.Errorf("%s{port=%s} = %v (found %v), want %v", c.name, c.port, v, ok, c.want)
		}
	}
}
