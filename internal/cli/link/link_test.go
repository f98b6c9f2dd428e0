package link_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/clitest"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	clilink "github.com/PacketFive/hinic/internal/cli/link"
	"github.com/PacketFive/hinic/internal/cli/link/serve"
	"github.com/PacketFive/hinic/internal/cli/proto/decode"
	"github.com/PacketFive/hinic/internal/hilink"
	"github.com/PacketFive/hinic/internal/hilink/wire"
)

func isolate(t *testing.T) {
	clitest.Isolate(t, "HINIC_LINK_RUN_DIR", "HINIC_LINK_PORTS", "HINIC_LINK_CREDITS", "HINIC_LINK_MAX_FRAME",
		"HINIC_LINK_IO_BATCH", "HINIC_LINK_PCAP", "HINIC_LINK_PCAP_MAX", "HINIC_LINK_PPROF")
}

func TestHelp(t *testing.T) {
	isolate(t)
	clitest.Contains(t, "help", clitest.Output(t, clilink.NewCmdLink, "serve", "--help"),
		"--ports", "--credits", "--max-frame", "--io-batch", "--pcap", "--pcap-max", "--pprof", "--run-dir", "hilink-port<N>.sock", "hilink.sock")
	clitest.Contains(t, "help", clitest.Output(t, clilink.NewCmdLink, "status", "--help"), "--run-dir", "credit stalls")
}

// serveOpts runs `link serve args` with a runF that keeps the options.
func serveOpts(t *testing.T, args ...string) (*serve.Options, error) {
	t.Helper()
	ios, _, _, _ := cmdutil.Test()
	var got *serve.Options
	cmd := serve.NewCmdServe(cmdutil.NewFactory(ios, cmdutil.BuildInfo{}), func(_ context.Context, o *serve.Options) error {
		got = o
		return nil
	})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetArgs(args)
	return got, cmd.Execute()
}

// TestSettings: flag, then HINIC_LINK_*, then the config file, then the
// default.
func TestSettings(t *testing.T) {
	isolate(t)
	if err := os.WriteFile("hinic.yaml", []byte("link:\n  ports: 4\n  credits: 9\n  max-frame: 9000\n  run-dir: /tmp/x\n  pcap-max: 2MiB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HINIC_LINK_CREDITS", "10")
	t.Setenv("HINIC_LINK_PCAP", "/tmp/p")
	o, err := serveOpts(t, "--ports", "6")
	if err != nil {
		t.Fatal(err)
	}
	want := hilink.Config{RunDir: "/tmp/x", Ports: 6, Credits: 10, MaxFrame: 9000, IOBatch: hilink.DefaultIOBatch,
		Pcap: "/tmp/p", PcapMax: 2 << 20}
	if o.Switch != want {
		t.Errorf("config %+v\nwant   %+v", o.Switch, want)
	}
	if _, err := serveOpts(t, "--pcap-max", "lots"); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Errorf("--pcap-max lots: %v", err)
	}
	if err := os.WriteFile("hinic.yaml", []byte("link:\n  credit: 9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := serveOpts(t); cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "credit") {
		t.Errorf("unknown key: %v", err)
	}
}

func TestBadSettingIsUsageError(t *testing.T) {
	isolate(t)
	ios, _, _, _ := cmdutil.Test()
	err := serve.Run(context.Background(), &serve.Options{IO: ios, Switch: hilink.Config{RunDir: "/tmp/x", Credits: 1 << 20}})
	if cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Errorf("credits 1M: %v", err)
	}
}

func TestServeAndStatus(t *testing.T) {
	isolate(t)
	top := clitest.ShortDir(t, "hlc")
	dir, pcap := filepath.Join(top, "run"), filepath.Join(top, "pcap")
	ctl := filepath.Join(dir, hilink.ControlSocketName)
	ios, _, _, _ := cmdutil.Test()
	stop := clitest.Serve(t, clilink.NewCmdLink(cmdutil.NewFactory(ios, cmdutil.BuildInfo{})), "serve",
		"--run-dir", dir, "--ports", "2", "--credits", "16", "--pcap", pcap)
	clitest.WaitFor(t, "control socket", clitest.Accepts(ctl))
	// The run directory is 0770 less the umask: never open to others.
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm()&0o007 != 0 {
		t.Errorf("run dir %s: %v (%v)", dir, fi.Mode(), err)
	}
	if fi, err := os.Stat(hilink.PortPath(dir, 1)); err != nil || fi.Mode() != 0o660|os.ModeSocket {
		t.Errorf("port socket: %v (%v)", fi.Mode(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := hilink.Dial(ctx, hilink.EndpointConfig{Path: hilink.PortPath(dir, 1), GPUs: []uint16{3, 4}, Credits: 8, Name: "vm-a/gpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// One frame to a GPU nobody has: a drop to show.
	if err := a.Send(ctx, wire.Append(nil, &wire.Fields{Type: wire.TypeWrite, SrcGPU: 3, DstGPU: 9}, []byte("x"))); err != nil {
		t.Fatal(err)
	}
	run := func() string { return clitest.Output(t, clilink.NewCmdLink, "status", "--run-dir", dir) }
	clitest.WaitFor(t, "the drop counted", func() bool { return strings.Contains(run(), "no-route 1") })
	table := run()
	clitest.Contains(t, "table", table, "PORT", "CREDITS", "STALLS", "vm-a/gpu", "3,4", "8/8", "down")
	t.Setenv("HINIC_OUTPUT", "json")
	var st hilink.Status
	if err := json.Unmarshal([]byte(run()), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Ports) != 2 || st.Credits != 16 || st.Ports[0].State != "down" {
		t.Fatalf("json: %+v", st)
	}
	if p := st.Ports[1]; p.State != "up" || p.Peer != "vm-a/gpu" || len(p.GPUs) != 2 || p.Counters.RxFrames != 1 ||
		p.Counters.Drops["no-route"] != 1 || p.Counters.Sessions != 1 {
		t.Errorf("json port 1: %+v", p)
	}
	a.Close()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{ctl, hilink.PortPath(dir, 0)} {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s left after serve stopped", path)
		}
	}
	// The message port 1 received is in its capture, and `hinic proto
	// decode` reads it as HiLink; anything after it is the credit the
	// switch returned for it. (HINIC_OUTPUT is still json.)
	decoded := clitest.Output(t, func(f *cmdutil.Factory) *cobra.Command { return decode.NewCmdDecode(f, nil) },
		filepath.Join(pcap, "hilink-port1.pcap"))
	var rows []decode.Record
	for _, l := range strings.Split(strings.TrimSpace(decoded), "\n") {
		var r decode.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%v: %s", err, decoded)
		}
		rows = append(rows, r)
	}
	if h := rows[0].HiLink; h == nil || rows[0].Link != "hilink" || rows[0].Error != "" || h.Type != "write" ||
		h.SrcGPU != 3 || h.DstGPU != 9 || *rows[0].PayloadLen != 1 {
		t.Errorf("capture, first message: %s", decoded)
	}
	for _, r := range rows[1:] {
		if r.HiLink == nil || r.HiLink.Type != "credit" || r.Error != "" {
			t.Errorf("capture, message %d: %+v", r.Frame, r)
		}
	}
}

func TestStatusWithoutSwitch(t *testing.T) {
	isolate(t)
	ios, _, _, _ := cmdutil.Test()
	c := clilink.NewCmdLink(cmdutil.NewFactory(ios, cmdutil.BuildInfo{}))
	c.SilenceErrors, c.SilenceUsage = true, true
	c.SetArgs([]string{"status", "--run-dir", clitest.ShortDir(t, "hlc")})
	if err := c.Execute(); err == nil || !strings.Contains(err.Error(), "hinic link serve") {
		t.Errorf("err = %v, want a hint to start the switch", err)
	}
}
