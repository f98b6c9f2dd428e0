package fabric_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/cli/clitest"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/fabric/serve"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/metrics/metricstest"
	"github.com/PacketFive/hinic/internal/proto"
)

// TestServeMetrics runs `fabric serve` with --metrics, sends a broadcast
// frame through it and reads the counters from /metrics with the
// Prometheus text parser: the ingress port's rx and flood counters and
// the egress port's per-class tx counters move.
func TestServeMetrics(t *testing.T) {
	isolate(t)
	dir := shortDir(t)
	ios, _, _, _ := cmdutil.Test()
	url := metricstest.Serve(t, func(ctx context.Context, ready func(string)) error {
		return serve.Run(ctx, &serve.Options{IO: ios, Logger: slog.New(slog.DiscardHandler),
			Fabric: fabric.Config{RunDir: dir, Ports: 2}, Metrics: "127.0.0.1:0", MetricsReady: ready})
	})
	ctx := context.Background()

	m := metricstest.Scrape(t, url)
	for _, name := range []string{"hinic_fabric_port_rx_frames_total", "hinic_fabric_port_class_tx_frames_total",
		"hinic_fabric_port_drops_total", "hinic_fabric_port_class_ecn_marked_total", "hinic_fabric_port_class_pfc_sent_total"} {
		if m.Type(name) != "COUNTER" {
			t.Errorf("%s: type %q, want COUNTER", name, m.Type(name))
		}
	}
	if v, ok := m.Value("hinic_fabric_port_up", "switch", "sw0", "port", "1"); !ok || v != 0 {
		t.Errorf("port 1 up = %v, %v before any peer", v, ok)
	}
	if _, ok := m.Value("go_goroutines"); !ok {
		t.Error("no Go runtime metrics")
	}

	hello := func(name string) *proto.HelloFields {
		return &proto.HelloFields{Version: 1, LinkLayer: proto.HelloLinkEthernet, Role: proto.HelloRoleNIC, Name: name}
	}
	c0, _, err := fabric.DialPort(ctx, filepath.Join(dir, "sw0-port1.sock"), hello("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Close()
	c1, _, err := fabric.DialPort(ctx, filepath.Join(dir, "sw0-port2.sock"), hello("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	// A flood skips ports that are down: wait until the switch has
	// both sessions up (DialPort returns before the switch marks them).
	clitest.WaitFor(t, "both ports up on /metrics", func() bool {
		m = metricstest.Scrape(t, url)
		v1, _ := m.Value("hinic_fabric_port_up", "switch", "sw0", "port", "1")
		v2, _ := m.Value("hinic_fabric_port_up", "switch", "sw0", "port", "2")
		return v1 == 1 && v2 == 1
	})
	// A broadcast of a local experimental EtherType: flooded to port 2
	// in class 0 (no VLAN tag, PCP 0).
	frame := make([]byte, 64)
	copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0x0a, 0x88, 0xb5})
	const n = 3
	for range n {
		if _, err := c0.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 2048)
	c1.SetReadDeadline(time.Now().Add(10 * time.Second))
	for range n {
		if _, err := c1.Read(buf); err != nil {
			t.Fatalf("port 2 got no frame: %v", err)
		}
	}

	clitest.WaitFor(t, "counters on /metrics", func() bool {
		m = metricstest.Scrape(t, url)
		v, _ := m.Value("hinic_fabric_port_class_tx_frames_total", "switch", "sw0", "port", "2", "class", "0")
		return v == n
	})
	for _, c := range []struct {
		name string
		kv   []string
		want float64
	}{
		{"hinic_fabric_port_up", []string{"port", "1"}, 1},
		{"hinic_fabric_port_rx_frames_total", []string{"port", "1"}, n},
		{"hinic_fabric_port_rx_bytes_total", []string{"port", "1"}, n * 64},
		{"hinic_fabric_port_floods_total", []string{"port", "1"}, n},
		{"hinic_fabric_port_tx_frames_total", []string{"port", "2"}, n},
		{"hinic_fabric_port_class_tx_bytes_total", []string{"port", "2", "class", "0"}, n * 64},
		{"hinic_fabric_port_class_tx_frames_total", []string{"port", "2", "class", "3"}, 0},
		{"hinic_fabric_port_drops_total", []string{"port", "1", "reason", "malformed"}, 0},
		{"hinic_fabric_fdb_entries", []string{"switch", "sw0"}, 1},
	} {
		if v, ok := m.Value(c.name, c.kv...); !ok || v != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.kv, v, ok, c.want)
		}
	}
}

// TestServeMetricsSetting: --metrics, HINIC_FABRIC_METRICS and the
// config file's fabric.metrics reach the run, in that order; an address
// that is not host:port is a usage error.
func TestServeMetricsSetting(t *testing.T) {
	for _, tc := range []struct {
		env, file string
		args      []string
		want      string
	}{
		{"", "", nil, ""},
		{"", "fabric:\n  metrics: 127.0.0.1:9001\n", nil, "127.0.0.1:9001"},
		{"127.0.0.1:9002", "fabric:\n  metrics: 127.0.0.1:9001\n", nil, "127.0.0.1:9002"},
		{"127.0.0.1:9002", "", []string{"--metrics", ":9003"}, ":9003"},
	} {
		isolate(t)
		t.Setenv("HINIC_FABRIC_METRICS", tc.env)
		if tc.file != "" {
			if err := os.WriteFile("hinic.yaml", []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ios, _, _, _ := cmdutil.Test()
		var got string
		cmd := serve.NewCmdServe(cmdutil.NewFactory(ios, cmdutil.BuildInfo{}), func(_ context.Context, o *serve.Options) error {
			got = o.Metrics
			return nil
		})
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		cmd.SetArgs(tc.args)
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("env %q, file %q, args %v: metrics %q, want %q", tc.env, tc.file, tc.args, got, tc.want)
		}
	}
	isolate(t)
	ios, _, _, _ := cmdutil.Test()
	err := serve.Run(context.Background(), &serve.Options{IO: ios, Logger: slog.New(slog.DiscardHandler),
		Fabric: fabric.Config{RunDir: shortDir(t), Ports: 1}, Metrics: "9464"})
	if err == nil || cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Errorf("--metrics 9464: %v, want a usage error", err)
	}
}
