package deploy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/deploy/rack"
	"github.com/PacketFive/hinic/internal/cli/deploy/restart"
	"github.com/PacketFive/hinic/internal/cli/deploy/shared"
	"github.com/PacketFive/hinic/internal/cli/deploy/status"
	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/device"
)

func TestRackArgs(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
	var got *rack.Options
	cmd := rack.NewCmdRack(f, func(o *rack.Options) error { got = o; return nil })
	cmd.SetArgs([]string{"../../../testdata/racks/two-rxe.yaml", "--pcap", "--run-dir", "/tmp/x"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	r, err := shared.LoadRack(got.Spec, got.Name, got.RunDir, got.Image, got.Pcap)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "rxe" || r.RunDir != "/tmp/x" || !r.Pcap || len(r.Guests) != 2 {
		t.Errorf("rack %+v", r)
	}
	if _, err := shared.LoadRack("/nonexistent.yaml", "", "", "", false); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Errorf("missing spec: %v", err)
	}
}

func TestRestartArgs(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
	var got *restart.Options
	cmd := restart.NewCmdRestart(f, func(o *restart.Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--run-dir", "/tmp/x", "--kill", "fabric"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.RunDir != "/tmp/x" || !got.Kill || got.Component != "fabric" {
		t.Errorf("options %+v", got)
	}
	for _, args := range [][]string{{}, {"gpu"}, {"fabric", "fabric"}} {
		cmd := restart.NewCmdRestart(f, func(*restart.Options) error { return nil })
		cmd.SetArgs(args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
	cmd = restart.NewCmdRestart(f, func(o *restart.Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--run-dir", "/tmp/y", "device"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.RunDir != "/tmp/y" || got.Kill || got.Component != "device" {
		t.Errorf("options %+v", got)
	}
	// Without a rack there is no backend to restart either.
	cmd = restart.NewCmdRestart(f, nil)
	cmd.SetArgs([]string{"--run-dir", t.TempDir(), "device"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "deploy a rack first") {
		t.Errorf("restart device without a rack: %v", err)
	}
	// Without a rack there is nothing to restart.
	cmd = restart.NewCmdRestart(f, nil)
	cmd.SetArgs([]string{"--run-dir", t.TempDir(), "fabric"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "deploy a rack first") {
		t.Errorf("err %v", err)
	}
}

func TestStatusWithoutRack(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
	cmd := status.NewCmdStatus(f, nil)
	cmd.SetArgs([]string{"--run-dir", t.TempDir()})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "deploy a rack first") {
		t.Errorf("err %v", err)
	}
}

// spec returns a completed rack spec.
func spec(t *testing.T, r deploy.Rack) *deploy.Rack {
	t.Helper()
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	return &r
}

func TestFrontView(t *testing.T) {
	var b bytes.Buffer
	r := spec(t, deploy.Rack{Name: "rxe"})
	if err := status.FrontView(&b, r, &deploy.RackStatus{Name: "rxe", Fabric: "stopped", Guests: []deploy.GuestStatus{
		{Name: "vm-a", State: "running", DataIP: "10.42.0.1", RDMADev: "rxe0", PortState: "ACTIVE", SSH: "127.0.0.1:2222"},
		{Name: "vm-b", State: "crashed", DataIP: "10.42.0.2", SSH: "127.0.0.1:2223"},
	}}, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"rack rxe", "1OU ○ sw0", "fabric stopped", "2OU ● vm-a", "rxe0 ACTIVE", "2OU ✗ vm-b", "crashed", "power shelf"} {
		if !strings.Contains(out, want) {
			t.Errorf("front view lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "device backend") {
		t.Errorf("front view of an rxe rack shows a device backend:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		if len([]rune(l)) != len([]rune(lines[0])) {
			t.Errorf("ragged line %q", l)
		}
	}
}

func TestFrontViewHicain(t *testing.T) {
	var b bytes.Buffer
	r := spec(t, deploy.Rack{Name: "hicain", Guests: []deploy.Guest{{Name: "vm-a", NIC: deploy.NICHicain}}})
	if err := status.FrontView(&b, r, &deploy.RackStatus{Name: "hicain", Fabric: "running", Device: "running",
		VNICs: make([]device.VNICStatus, 2), Guests: []deploy.GuestStatus{
			{Name: "vm-a", State: "running", DataIP: "10.43.0.1", RDMADev: "hicain_0", PortState: "ACTIVE", SSH: "127.0.0.1:2232"},
		}}, true); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"rack hicain", "device backend running, 2 vNIC(s)", "hicain_0 ACTIVE"} {
		if !strings.Contains(out, want) {
			t.Errorf("front view lacks %q:\n%s", want, out)
		}
	}
	// In colour: the LEDs are styled, and the lines still line up.
	if !strings.Contains(out, "\x1b[") {
		t.Errorf("coloured front view has no styles:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		if lipgloss.Width(l) != lipgloss.Width(lines[0]) {
			t.Errorf("ragged line %q", l)
		}
	}
}
