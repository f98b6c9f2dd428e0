package device_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/cli/clitest"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/device/serve"
	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/metrics/metricstest"
)

// TestServeMetrics runs `device serve` with a metrics endpoint, drives
// the vNIC with the guest simulator and reads /metrics with the
// Prometheus text parser: doorbells, admin commands and the guest's
// objects and QPs show up.
func TestServeMetrics(t *testing.T) {
	isolate(t)
	dir := shortDir(t)
	sock, ram := filepath.Join(dir, "a.sock"), filepath.Join(dir, "a.ram")
	vnic, err := serve.ParseVNIC("socket=" + sock + ",ram=" + ram + ",ram-size=16M,mac=02:00:00:00:00:0a,name=vm-a")
	if err != nil {
		t.Fatal(err)
	}
	vnic.MemBudget = 64 << 20
	ios, _, _, _ := cmdutil.Test()
	url := metricstest.Serve(t, func(ctx context.Context, ready func(string)) error {
		return serve.Run(ctx, &serve.Options{IO: ios, Logger: slog.New(slog.DiscardHandler),
			Control: filepath.Join(dir, "device.sock"), VNICs: []device.VNICConfig{vnic},
			Metrics: "127.0.0.1:0", MetricsReady: ready})
	})
	m := metricstest.Scrape(t, url)
	if v, ok := m.Value("hinic_vnic_guest_connected", "vnic", "vm-a"); !ok || v != 0 {
		t.Errorf("guest_connected = %v, %v before the guest", v, ok)
	}
	for _, name := range []string{"hinic_vnic_doorbells_total", "hinic_vnic_retransmits_total", "hinic_vnic_rnr_naks_received_total",
		"hinic_vnic_cq_overflows_total", "hinic_vnic_interrupts_total"} {
		if m.Type(name) != "COUNTER" {
			t.Errorf("%s: type %q, want COUNTER", name, m.Type(name))
		}
	}
	bells, _ := m.Value("hinic_vnic_doorbells_total", "vnic", "vm-a")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := guestsim.Connect(ctx, guestsim.Config{Socket: sock, RAMPath: ram, RAMSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Handshake(ctx); err != nil {
		t.Fatal(err)
	}
	pd, err := g.AllocPD(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cq, err := g.CreateCQ(ctx, 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.CreateQP(ctx, guestsim.QPConfig{PD: pd, SendCQ: cq, RecvCQ: cq}); err != nil {
		t.Fatal(err)
	}

	clitest.WaitFor(t, "the QP on /metrics", func() bool {
		m = metricstest.Scrape(t, url)
		v, _ := m.Value("hinic_vnic_qps", "vnic", "vm-a", "state", "RESET")
		return v == 1
	})
	for _, c := range []struct {
		name string
		kv   []string
		want float64
	}{
		{"hinic_vnic_guest_connected", nil, 1},
		{"hinic_vnic_objects", []string{"type", "pd"}, 1},
		{"hinic_vnic_objects", []string{"type", "cq"}, 1},
		{"hinic_vnic_objects", []string{"type", "qp"}, 1},
		{"hinic_vnic_qps", []string{"state", "RTS"}, 0},
		{"hinic_vnic_sessions_total", nil, 1},
		{"hinic_vnic_retransmits_total", nil, 0},
	} {
		kv := append([]string{"vnic", "vm-a"}, c.kv...)
		if v, ok := m.Value(c.name, kv...); !ok || v != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, kv, v, ok, c.want)
		}
	}
	if v, _ := m.Value("hinic_vnic_doorbells_total", "vnic", "vm-a"); v <= bells {
		t.Errorf("doorbells %v, %v before the guest's commands", v, bells)
	}
	if v, _ := m.Value("hinic_vnic_admin_commands_total", "vnic", "vm-a"); v < 3 {
		t.Errorf("admin commands %v, want at least 3", v)
	}
}

// TestServeMetricsWithFabric: with --fabric the one endpoint of the
// device backend has the switches' metrics beside the vNICs'.
func TestServeMetricsWithFabric(t *testing.T) {
	isolate(t)
	dir := shortDir(t)
	fabDir := filepath.Join(dir, "fab")
	vnic, err := serve.ParseVNIC("socket=" + filepath.Join(dir, "a.sock") + ",ram=" + filepath.Join(dir, "a.ram") +
		",ram-size=16M,mac=02:00:00:00:00:0a,name=vm-a,port=" + filepath.Join(fabDir, "sw0-port1.sock"))
	if err != nil {
		t.Fatal(err)
	}
	vnic.MemBudget = 64 << 20
	ios, _, _, _ := cmdutil.Test()
	url := metricstest.Serve(t, func(ctx context.Context, ready func(string)) error {
		return serve.Run(ctx, &serve.Options{IO: ios, Logger: slog.New(slog.DiscardHandler),
			Control: filepath.Join(dir, "device.sock"), VNICs: []device.VNICConfig{vnic},
			Fabric: &fabric.Config{RunDir: fabDir, Ports: 2}, Metrics: "127.0.0.1:0", MetricsReady: ready})
	})
	var m metricstest.Families
	clitest.WaitFor(t, "the vNIC's port up on /metrics", func() bool {
		m = metricstest.Scrape(t, url)
		v, _ := m.Value("hinic_fabric_port_up", "switch", "sw0", "port", "1")
		return v == 1
	})
	if v, ok := m.Value("hinic_vnic_link_up", "vnic", "vm-a"); !ok || v != 1 {
		t.Errorf("hinic_vnic_link_up = %v (found %v), want 1", v, ok)
	}
}
