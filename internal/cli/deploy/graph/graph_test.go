package graph_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/cli"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/deploy/graph"
	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/fabric"
)

const racks = "../../../../testdata/racks/"

func runCLI(t *testing.T, args ...string) (code int, out, errOut string) {
	t.Helper()
	ios, _, o, e := cmdutil.Test()
	code = cli.Run(context.Background(), append([]string{"deploy", "graph"}, args...), ios)
	return code, o.String(), e.String()
}

func TestArgs(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
	var got *graph.Options
	cmd := graph.NewCmdGraph(f, func(o *graph.Options) error { got = o; return nil })
	cmd.SetArgs([]string{"x.yaml", "--view", "logical", "--format", "dot", "--out", "g.dot"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Spec != "x.yaml" || got.View != "logical" || got.Format != "dot" || !got.FormatSet || got.Out != "g.dot" || got.RunDir != "" {
		t.Errorf("options %+v", got)
	}
	cmd = graph.NewCmdGraph(f, func(o *graph.Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--rack", "ib"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.RunDir != deploy.DefaultRunDir("ib") || got.View != "front" || got.Format != "svg" || got.FormatSet {
		t.Errorf("options %+v", got)
	}
	for _, args := range [][]string{{"--view", "side"}, {"--format", "png"}, {"x.yaml", "--run-dir", "/tmp/x"}} {
		cmd := graph.NewCmdGraph(f, func(*graph.Options) error { return nil })
		cmd.SetArgs(args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

// TestFormats draws a spec in each view and format through the CLI.
func TestFormats(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{racks + "two-ib.yaml"}, []string{`<svg xmlns="http://www.w3.org/2000/svg"`, `id="link-sw0-10"`, "rack ib sw1"}},
		{[]string{racks + "two-hicain-gpu.yaml", "--view", "logical"}, []string{"logical view", `id="node-gpu_vm-b_3"`}},
		{[]string{racks + "two-racks-gpu.yaml", "--view", "flows"}, []string{"animateMotion", "prefers-reduced-motion", "RoCEv2 SEND: vm-a"}},
		{[]string{racks + "two-ib.yaml", "--view", "logical", "--format", "mermaid"}, []string{"flowchart TB", `sw_sw0 ===|"sw0:10 - sw1:10"| sw_sw1`}},
		{[]string{racks + "two-ib.yaml", "--view", "logical", "--format", "dot"}, []string{`graph "ib" {`, `"sw:sw0" -- "sw:sw1"`}},
		{[]string{racks + "two-ib.yaml", "--format", "text"}, []string{"rack ib sw0", "inter-TOR sw0:10 <-> sw1:10"}},
		{[]string{"--format", "text"}, []string{"rack rack0", "vm-a", "vm-b"}},
	} {
		code, out, errOut := runCLI(t, tt.args...)
		if code != 0 {
			t.Errorf("%q: exit %d: %s", tt.args, code, errOut)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%q: output lacks %q", tt.args, w)
			}
		}
		if strings.HasPrefix(out, "<svg") {
			if err := xml.NewDecoder(strings.NewReader(out)).Decode(new(any)); err != nil {
				t.Errorf("%q: not XML: %v", tt.args, err)
			}
		}
	}
}

// TestJSON: --format json, or -o json, prints the model.
func TestJSON(t *testing.T) {
	for _, args := range [][]string{{"--format", "json"}, {"-o", "json"}} {
		code, out, errOut := runCLI(t, append([]string{racks + "two-ib.yaml", "--view", "logical"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var doc struct {
			View  string `json:"view"`
			Racks []struct {
				Switch string `json:"switch"`
			} `json:"racks"`
			InterTOR []any `json:"inter_tor"`
			Logical  struct {
				Nodes []any `json:"nodes"`
			} `json:"logical"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if doc.View != "logical" || len(doc.Racks) != 2 || doc.Racks[1].Switch != "sw1" || len(doc.InterTOR) != 1 || len(doc.Logical.Nodes) != 6 {
			t.Errorf("doc %+v", doc)
		}
	}
}

func TestOutFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rack.svg")
	code, out, errOut := runCLI(t, racks+"two-hicain.yaml", "--out", path)
	if code != 0 || out != "" {
		t.Fatalf("exit %d, stdout %q: %s", code, out, errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("<svg")) {
		t.Errorf("%s: %v %.40q", path, err, b)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{racks + "two-ib.yaml", "--format", "mermaid"}, // mermaid draws the logical view only
		{racks + "two-ib.yaml", "--view", "flows", "--format", "text"},
		{"/nonexistent.yaml"},
	} {
		if code, _, errOut := runCLI(t, args...); code != int(cmdutil.ExitUsage) {
			t.Errorf("%q: exit %d, want %d: %s", args, code, cmdutil.ExitUsage, errOut)
		}
	}
}

// TestRunDir draws a deployed rack whose processes are gone: everything
// stopped, from the state file.
func TestRunDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rack")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r := deploy.Rack{Name: "gone", RunDir: dir, Guests: []deploy.Guest{{Name: "vm-a", NIC: deploy.NICHicain}, {Name: "vm-b"}}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	st := deploy.State{Rack: r, Down: true, Guests: []deploy.GuestState{{Name: "vm-a", Dir: filepath.Join(dir, "vm-a")}, {Name: "vm-b", Dir: filepath.Join(dir, "vm-b")}}}
	b, _ := json.Marshal(&st)
	if err := os.WriteFile(filepath.Join(dir, deploy.FileState), b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "--run-dir", dir, "--format", "text")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, w := range []string{"rack gone", "fabric stopped", "device backend stopped", "vm-a", "stopped"} {
		if !strings.Contains(out, w) {
			t.Errorf("lacks %q:\n%s", w, out)
		}
	}
	if code, _, _ := runCLI(t, "--run-dir", t.TempDir()); code == 0 {
		t.Error("an empty run directory drew something")
	}
}

func TestServeArgs(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
	var got *graph.Options
	cmd := graph.NewCmdGraph(f, func(o *graph.Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--run-dir", "/tmp/x", "--serve", "127.0.0.1:8080", "--interval", "250ms"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Serve != "127.0.0.1:8080" || got.Interval != 250*time.Millisecond || got.RunDir != "/tmp/x" {
		t.Errorf("options %+v", got)
	}
	for _, args := range [][]string{
		{"x.yaml", "--serve", "127.0.0.1:8080"}, // a spec has no counters
		{"--serve", "127.0.0.1:8080"},           // nor the default rack
		{"--rack", "r", "--serve", "8080"},
		{"--rack", "r", "--serve", "127.0.0.1:8080", "--interval", "0s"},
	} {
		cmd := graph.NewCmdGraph(f, func(*graph.Options) error { return nil })
		cmd.SetArgs(args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

// TestServe runs the live page of a deployed rack through the CLI: the
// page, and events from the rack's fabric. Its processes are gone, so
// the first event says the fabric does not answer; then a fabric starts
// in this process on the rack's run directory and the events carry its
// ports.
func TestServe(t *testing.T) {
	dir, err := os.MkdirTemp("", "hinic-graph-") // short: UNIX socket paths
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r := deploy.Rack{Name: "gone", RunDir: dir}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(&deploy.State{Rack: r, Down: true})
	if err := os.WriteFile(filepath.Join(dir, deploy.FileState), b, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ios, _, _, _ := cmdutil.Test()
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"deploy", "graph", "--run-dir", dir, "--serve", addr, "--interval", "50ms"}, ios)
	}()
	var page []byte
	for i := 0; ; i++ {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			page, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			break
		}
		if i == 100 {
			t.Fatalf("the page never answered: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !bytes.Contains(page, []byte("rack gone")) || !bytes.Contains(page, []byte(`id="port-sw0-1"`)) {
		t.Errorf("page:\n%.300s", page)
	}
	resp, err := http.Get("http://" + addr + "/events")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	next := func() string {
		t.Helper()
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("event stream: %v", err)
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				return v
			}
		}
	}
	if ev := next(); !strings.Contains(ev, `"error":`) || !strings.Contains(ev, "fabric") {
		t.Errorf("event %q, want the fabric's error", ev)
	}
	fab, err := fabric.New(fabric.Config{RunDir: filepath.Join(dir, deploy.DirFabric), Switches: []fabric.SwitchConfig{{Name: "sw0", Ports: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fab.Start(); err != nil {
		t.Fatal(err)
	}
	defer fab.Close()
	for i := 0; ; i++ {
		var ev struct {
			Error string `json:"error"`
			Ports []struct {
				ID string `json:"id"`
			} `json:"ports"`
		}
		if err := json.Unmarshal([]byte(next()), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Error == "" && len(ev.Ports) == 4 && ev.Ports[3].ID == "sw0-4" {
			break
		}
		if i == 100 {
			t.Fatalf("no event with the fabric's ports: %+v", ev)
		}
	}
	resp.Body.Close()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop with its context")
	}
}
