package fabric_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/cli/clitest"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	clifabric "github.com/PacketFive/hinic/internal/cli/fabric"
	"github.com/PacketFive/hinic/internal/cli/fabric/serve"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/proto"
)

func isolate(t *testing.T) {
	clitest.Isolate(t, "HINIC_FABRIC_PORTS", "HINIC_FABRIC_RUN_DIR", "HINIC_FABRIC_PCAP")
}

func shortDir(t *testing.T) string { return clitest.ShortDir(t, "hfc") }

// TestServeAndStatus runs `fabric serve` until its context is cancelled
// and asks it for `fabric status` in both formats.
func TestServeAndStatus(t *testing.T) {
	isolate(t)
	base := runtime.NumGoroutine()
	dir := shortDir(t)
	ios, _, _, errOut := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
	stop := clitest.Serve(t, clifabric.NewCmdFabric(f), "serve", "--run-dir", dir, "--ports", "3")

	sock := filepath.Join(dir, "sw0-port1.sock")
	// The socket file appears at bind, before listen: only a connection
	// that succeeds says the fabric serves.
	clitest.WaitFor(t, "fabric serve", func() bool {
		c, err := net.Dial("unix", filepath.Join(dir, fabric.ControlSocketName))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	c, _, err := fabric.DialPort(context.Background(), sock, &proto.HelloFields{Version: 1, LinkLayer: proto.HelloLinkEthernet, Role: proto.HelloRoleNIC, Name: "host1/hicain0"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The switch answers the hello before it attaches the session: wait
	// until the port shows its peer.
	clitest.WaitFor(t, "port 1 up", func() bool {
		st, err := fabric.QueryStatus(context.Background(), dir)
		return err == nil && len(st.Switches) == 1 && st.Switches[0].Ports[0].Peer.Name == "host1/hicain0"
	})

	for _, format := range []string{"table", "json"} {
		ios2, _, out, _ := cmdutil.Test()
		f2 := cmdutil.NewFactory(ios2, cmdutil.BuildInfo{})
		f2.SetDefault(cmdutil.KeyOutput, format)
		st := clifabric.NewCmdFabric(f2)
		st.SetArgs([]string{"status", "--run-dir", dir})
		if err := st.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("status: %v", err)
		}
		if format == "json" {
			var got fabric.Status
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("json: %v\n%s", err, out)
			}
			if len(got.Switches) != 1 || got.Switches[0].Ports[0].Peer.Name != "host1/hicain0" {
				t.Errorf("status %+v", got)
			}
			continue
		}
		clitest.Contains(t, "table", out.String(), "Switch sw0", "PORT", "host1/hicain0", "up", "FDB (0 entries)")
	}

	if err := stop(); err != nil {
		t.Fatalf("serve returned %v", err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
	if !strings.Contains(errOut.String(), `msg="HiSwitch serving" switches=1 ports=3`) {
		t.Errorf("stderr: %s", errOut)
	}
	c.Close()
	deadline := time.Now().Add(15 * time.Second) // a bound on waiting, on a loaded machine
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines: %d, %d before\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

func TestStatusWithoutFabric(t *testing.T) {
	isolate(t)
	ios, _, _, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
	cmd := clifabric.NewCmdFabric(f)
	cmd.SetArgs([]string{"status", "--run-dir", shortDir(t)})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "hinic fabric serve --run-dir") {
		t.Fatalf("err = %v", err)
	}
}

// TestConfigFiles loads the example configs of testdata/fabric through
// viper as serve does, and checks that the fabric accepts them.
func TestConfigFiles(t *testing.T) {
	for _, name := range []string{"two-racks.yaml", "dial.yaml", "vxlan.yaml"} {
		path, _ := filepath.Abs(filepath.Join("..", "..", "..", "testdata", "fabric", name))
		t.Run(name, func(t *testing.T) {
			isolate(t)
			ios, _, _, _ := cmdutil.Test()
			f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
			var got fabric.Config
			cmd := serve.NewCmdServe(f, func(_ context.Context, o *serve.Options) error {
				got = o.Fabric
				return nil
			})
			cmd.PersistentFlags().String("config", "", "")
			f.BindFlag(cmdutil.KeyConfig, cmd.PersistentFlags().Lookup("config"))
			cmd.SetArgs([]string{"--config", path})
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if name == "vxlan.yaml" {
				p := got.Switches[0].Port[0]
				if p.Kind != fabric.KindVXLAN || p.VNI != 4242 || p.Remote != "192.0.2.2:4789" || p.Local != "192.0.2.1" {
					t.Errorf("vxlan port %+v", p)
				}
			}
			if name == "two-racks.yaml" {
				sw := got.Switches[0]
				if len(got.Switches) != 2 || sw.Aging != 300*time.Second || sw.PFC.XOFF != 128<<10 ||
					sw.Queues.Bytes != 1<<20 || sw.Port[0].Speed != 100e9 || sw.NodeGUID != 0x0248000000000100 ||
					sw.DSCPToTC["26"] != 3 || len(got.Links) != 1 || sw.Port[2].Faults.Seed != 42 || got.Ports != 10 {
					t.Errorf("config %+v", got)
				}
			}
			got.RunDir = shortDir(t)
			got.Links = nil // resolved separately below
			for i := range got.Switches {
				for j := range got.Switches[i].Port {
					got.Switches[i].Port[j].Dial = ""
				}
			}
			if _, err := fabric.New(got); err != nil {
				t.Errorf("fabric rejects %s: %v", name, err)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for name, tt := range map[string]struct{ yaml, want string }{
		"unknown key":    {"fabric:\n  switches:\n    - name: a\n      agin: 5s\n", "agin"},
		"bad size":       {"fabric:\n  switches:\n    - pfc: {xoff: lots}\n", "invalid size"},
		"bad port":       {"fabric:\n  switches:\n    - port: [{num: 99}]\n", "port num 99"},
		"bad link layer": {"fabric:\n  switches:\n    - port: [{num: 1, link: fddi}]\n", "fddi"},
	} {
		t.Run(name, func(t *testing.T) {
			isolate(t)
			if err := os.WriteFile("hinic.yaml", []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			ios, _, _, _ := cmdutil.Test()
			f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
			cmd := serve.NewCmdServe(f, func(_ context.Context, o *serve.Options) error {
				_, err := fabric.New(o.Fabric)
				if err != nil {
					return &cmdutil.UsageError{Err: err}
				}
				return nil
			})
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			cmd.SetArgs(nil)
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if cmdutil.ExitCode(err) != cmdutil.ExitUsage {
				t.Errorf("exit code %d", cmdutil.ExitCode(err))
			}
		})
	}
}

// TestServeFlagsReachOptions: --pcap-max and --pprof, from the flag and
// from the config file, reach the run, and a bad size is a usage error.
func TestServeFlagsReachOptions(t *testing.T) {
	for name, tt := range map[string]struct {
		yaml    string
		args    []string
		pcapMax fabric.ByteSize
		pprof   string
		err     string
	}{
		"defaults":  {args: nil, pcapMax: fabric.DefaultPcapMax},
		"flags":     {args: []string{"--pcap-max", "1MiB", "--pprof", "127.0.0.1:6061"}, pcapMax: 1 << 20, pprof: "127.0.0.1:6061"},
		"file":      {yaml: "fabric:\n  pcap-max: 2MiB\n  pprof: 127.0.0.1:6062\n", pcapMax: 2 << 20, pprof: "127.0.0.1:6062"},
		"flag wins": {yaml: "fabric:\n  pcap-max: 2MiB\n", args: []string{"--pcap-max", "3MiB"}, pcapMax: 3 << 20},
		"bad size":  {args: []string{"--pcap-max", "lots"}, err: "--pcap-max"},
	} {
		t.Run(name, func(t *testing.T) {
			isolate(t)
			if tt.yaml != "" {
				if err := os.WriteFile("hinic.yaml", []byte(tt.yaml), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ios, _, _, _ := cmdutil.Test()
			f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
			var got *serve.Options
			cmd := serve.NewCmdServe(f, func(_ context.Context, o *serve.Options) error {
				got = o
				return nil
			})
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || cmdutil.ExitCode(err) != cmdutil.ExitUsage {
					t.Fatalf("err = %v, want a usage error about %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Fabric.PcapMax != tt.pcapMax || got.Pprof != tt.pprof {
				t.Errorf("pcap-max %v pprof %q, want %v %q", got.Fabric.PcapMax, got.Pprof, tt.pcapMax, tt.pprof)
			}
		})
	}
}

// TestServePprof: a fabric serve with --pprof answers profile requests
// while it runs.
func TestServePprof(t *testing.T) {
	isolate(t)
	dir := shortDir(t)
	sock := filepath.Join(dir, "pprof.sock")
	ios, _, _, _ := cmdutil.Test()
	stop := clitest.Serve(t, clifabric.NewCmdFabric(cmdutil.NewFactory(ios, cmdutil.BuildInfo{})),
		"serve", "--run-dir", dir, "--ports", "1", "--pprof", sock)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(sock); err == nil {
			t.Error("pprof socket left behind")
		}
	}()
	clitest.WaitFor(t, "pprof socket", clitest.Accepts(sock))
	c := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Get("http://localhost/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "fabric") {
		t.Errorf("goroutine profile names no fabric goroutine: %.300q", body)
	}
}
