package gpu_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/cli/clitest"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	cligpu "github.com/PacketFive/hinic/internal/cli/gpu"
	"github.com/PacketFive/hinic/internal/cli/gpu/serve"
	"github.com/PacketFive/hinic/internal/gpu"
	"github.com/PacketFive/hinic/internal/gpu/gpusim"
	"github.com/PacketFive/hinic/internal/hilink"
)

func isolate(t *testing.T) { clitest.Isolate(t, "HINIC_GPU_CONTROL", "HINIC_GPU_GPUS") }

func shortDir(t *testing.T) string { return clitest.ShortDir(t, "hgc") }

func TestParseGPU(t *testing.T) {
	c, err := serve.ParseGPU("socket=/s,ram=/r,ram-size=4G,machine=pc,id=3,name=g3,mem=/m,mem-size=2G,vectors=8," +
		"mem-budget=1G,max-contexts=9,max-allocs=99,max-inflight=77,max-streams=5,max-events=6,max-sge=7," +
		"ctx-mem-budget=512M,ctx-max-allocs=11,hilink=/run/hl/hilink-port3.sock,link-name=vm-a/gpu3,max-peer-ops=9")
	if err != nil {
		t.Fatal(err)
	}
	want := gpu.GPUConfig{ID: 3, Name: "g3", Socket: "/s", RAMPath: "/r", RAMSize: 4 << 30, Machine: "pc", MemPath: "/m",
		MemSize: 2 << 30, Vectors: 8, MemBudget: 1 << 30, MaxContexts: 9, MaxAllocs: 99, MaxInflight: 77,
		MaxStreams: 5, MaxEvents: 6, MaxSGE: 7, CtxMemBudget: 512 << 20, CtxMaxAllocs: 11,
		HiLink: "/run/hl/hilink-port3.sock", LinkName: "vm-a/gpu3", MaxPeerOps: 9}
	if c != want {
		t.Errorf("%+v\nwant %+v", c, want)
	}
	for _, bad := range []string{
		"ram=/r,ram-size=1G",
		"socket=/s,ram-size=1G",
		"socket=/s,ram=/r",
		"socket=/s,ram=/r,ram-size=1G,id=8",
		"socket=/s,ram=/r,ram-size=1G,id=-1",
		"socket=/s,ram=/r,ram-size=1G,machine=virt",
		"socket=/s,ram=/r,ram-size=1G,mem-size=lots",
		"socket=/s,ram=/r,ram-size=1G,max-streams=0",
		"socket=/s,ram=/r,ram-size=1G,colour=blue",
		"socket=/s,ram=/r,ram-size=1G,id",
	} {
		if _, err := serve.ParseGPU(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestHelpDocumentsKeys(t *testing.T) {
	isolate(t)
	clitest.Contains(t, "help", clitest.Output(t, cligpu.NewCmdGPU, "serve", "--help"),
		"--gpu", "--control", "--pprof", "socket=", "ram=", "ram-size=", "machine=", "id=", "name=",
		"mem=", "mem-size=", "vectors=", "mem-budget=", "max-contexts=", "max-allocs=", "max-inflight=", "max-streams=",
		"max-events=", "max-sge=", "ctx-mem-budget=", "ctx-max-allocs=", "hilink=", "link-name=", "max-peer-ops=")
}

func TestServeNeedsAGPU(t *testing.T) {
	isolate(t)
	ios, _, _, _ := cmdutil.Test()
	cmd := serve.NewCmdServe(cmdutil.NewFactory(ios, cmdutil.BuildInfo{}), func(context.Context, *serve.Options) error { return nil })
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetArgs(nil)
	if err := cmd.Execute(); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Errorf("no --gpu: %v", err)
	}
	cmd.SetArgs([]string{"--gpu", "socket=/s"})
	if err := cmd.Execute(); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Errorf("bad --gpu: %v", err)
	}
}

func TestServeAndStatus(t *testing.T) {
	isolate(t)
	dir := shortDir(t)
	ctl := filepath.Join(dir, "gpu.sock")
	ram := filepath.Join(dir, "a.ram")
	sock0, sock1 := filepath.Join(dir, "g0.sock"), filepath.Join(dir, "g1.sock")
	// GPU 0 has a HiLink port.
	sw, err := hilink.New(hilink.Config{RunDir: filepath.Join(dir, "hl"), Ports: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sw.Close() })
	ios, _, _, _ := cmdutil.Test()
	clitest.Serve(t, cligpu.NewCmdGPU(cmdutil.NewFactory(ios, cmdutil.BuildInfo{})), "serve", "--control", ctl,
		"--gpu", "socket="+sock0+",ram="+ram+",ram-size=16M,mem-size=8M,name=gpu-a,hilink="+hilink.PortPath(sw.Config().RunDir, 0),
		"--gpu", "socket="+sock1+",ram="+ram+",ram-size=16M,mem-size=4M,id=1,mem="+filepath.Join(dir, "g1.mem"))
	clitest.WaitFor(t, "control socket", clitest.Accepts(ctl))
	if fi, err := os.Stat(filepath.Join(dir, "g1.mem")); err != nil || fi.Size() != 4<<20 {
		t.Errorf("device memory file: %v", err)
	}
	gctx, gcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer gcancel()
	g, err := gpusim.Connect(gctx, gpusim.Config{Socket: sock0, RAMPath: ram, RAMSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Handshake(gctx); err != nil {
		t.Fatal(err)
	}
	c, err := g.CtxCreate(gctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.MemAlloc(gctx, c, 1<<20, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Do(gctx, gpu.Cmd{Opcode: 200, CtxID: c}); err != nil {
		t.Fatal(err)
	}

	run := func() string { return clitest.Output(t, cligpu.NewCmdGPU, "status", "--control", ctl) }
	clitest.Contains(t, "table", run(), "gpu-a", "live", "peer 1", "1.0 MiB / 8.0 MiB", "HiGPU", "waiting", "0 B / 4.0 MiB",
		"HILINK", "port 0 up: 0 ops, 0 B out, 0 B served")
	var st gpu.Status
	t.Setenv("HINIC_OUTPUT", "json")
	if err := json.Unmarshal([]byte(run()), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.GPUs) != 2 {
		t.Fatalf("json: %+v", st)
	}
	a := st.GPUs[0]
	if a.Name != "gpu-a" || a.State != "live" || a.MemUsed != 1<<20 || a.MemSize != 8<<20 || a.Contexts != 1 ||
		a.Allocs != 1 || a.Counters.Commands != 3 || a.Counters.Errors != 1 || a.VABase != gpu.VABase(0) {
		t.Errorf("json GPU 0: %+v", a)
	}
	if a.Link == nil || !a.Link.Up || a.Link.SwitchPort != 0 {
		t.Errorf("json GPU 0 link: %+v", a.Link)
	}
	if b := st.GPUs[1]; b.ID != 1 || b.Guest || b.State != "waiting" || b.VABase != gpu.VABase(1) || b.Link != nil {
		t.Errorf("json GPU 1: %+v", b)
	}
}

func TestStatusWithoutBackend(t *testing.T) {
	isolate(t)
	ios, _, _, _ := cmdutil.Test()
	c := cligpu.NewCmdGPU(cmdutil.NewFactory(ios, cmdutil.BuildInfo{}))
	c.SilenceErrors, c.SilenceUsage = true, true
	c.SetArgs([]string{"status", "--control", filepath.Join(shortDir(t), "none.sock")})
	if err := c.Execute(); err == nil || !strings.Contains(err.Error(), "hinic gpu serve") {
		t.Errorf("err = %v, want a hint to start the backend", err)
	}
}
