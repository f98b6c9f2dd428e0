package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/cli"
	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/gpu"
)

// asHinic makes the test binary the hinic binary of the GPU backend it
// spawns: with HINIC_DEPLOY_TEST_AS_HINIC=1 it runs the command line.
const asHinic = "HINIC_DEPLOY_TEST_AS_HINIC"

func TestMain(m *testing.M) {
	if os.Getenv(asHinic) == "1" {
		os.Exit(cli.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestGPUBackendServes starts the rack's real `hinic link serve` and
// `hinic gpu serve` as deploy does (no QEMU): every GPU of the spec is
// served on its socket and the guest's RAM file and has its port up on
// the rack's HiLink switch, deploy's status lines them up, a second
// start keeps both, a changed spec restarts the backend, a HiLink switch
// started afresh (by a changed spec, then by deploy restart hilink)
// keeps it while its GPU ports dial the new switch, and down ends them.
func TestGPUBackendServes(t *testing.T) {
	t.Setenv(asHinic, "1")
	dir, err := os.MkdirTemp("", "hr-gpu-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r := deploy.Rack{RunDir: dir, Guests: []deploy.Guest{
		{Name: "vm-a", NIC: deploy.NICHicain, Memory: 64, GPUs: deploy.GPUs{Count: 2, Memory: 32}},
		{Name: "vm-b", Memory: 64, GPUs: deploy.GPUs{Count: 1, IDs: []int{3}, Memory: 32}},
	}}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	st := &deploy.State{Rack: r}
	ctx := context.Background()
	p := func(f string, a ...any) { t.Logf(f, a...) }
	hlFresh, err := deploy.StartHiLinks(ctx, st, os.Args[0], p)
	t.Cleanup(func() { deploy.Down(dir, nil) })
	if err != nil || !hlFresh || !deploy.HiLinkAlive(st, "hl-sw0") {
		b, _ := os.ReadFile(filepath.Join(dir, "hilink-hl-sw0.log"))
		t.Fatalf("HiLink switch: fresh %v, %v\n%s", hlFresh, err, b)
	}
	fresh, err := deploy.StartGPU(ctx, st, os.Args[0], p)
	t.Cleanup(func() { deploy.StopGPU(st) })
	if err != nil || !fresh || st.GPUPID == 0 {
		b, _ := os.ReadFile(filepath.Join(dir, deploy.FileGPULog))
		t.Fatalf("start: fresh %v, pid %d, %v\n%s", fresh, st.GPUPID, err, b)
	}
	if !deploy.GPUAlive(st) {
		t.Fatal("the backend's pid is not its process")
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	s, err := gpu.QueryStatus(qctx, deploy.GPUControl(&st.Rack))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	infos := deploy.GPUInfos(&st.Rack, &s, "running")
	if len(infos) != 3 {
		t.Fatalf("GPUs %+v", infos)
	}
	for _, gi := range infos {
		if gi.State != "waiting" {
			t.Errorf("GPU %+v: want waiting for QEMU", gi)
		}
	}
	for _, x := range s.GPUs {
		if x.ID == 3 && (x.MemSize != 32<<20 || x.RAMPath != deploy.GuestRAM(&st.Rack, st.Rack.Guests[1])) {
			t.Errorf("gpu_id 3: %+v", x)
		}
	}
	for _, g := range st.Rack.Guests {
		if fi, err := os.Stat(deploy.GuestRAM(&st.Rack, g)); err != nil || fi.Size() != int64(g.Memory)<<20 {
			t.Errorf("%s: RAM file %v, %v", g.Name, fi, err)
		}
	}
	// Each GPU up on its own HiLink port, under its name.
	hl := deploy.HiLinkInfos(ctx, st)
	if len(hl) != 1 || hl[0].State != "running" || hl[0].Rack != "sw0" || len(hl[0].Ports) != 8 {
		t.Fatalf("HiLink %+v", hl)
	}
	for i, want := range []struct {
		peer string
		id   int
	}{{"vm-a/gpu0", 0}, {"vm-a/gpu1", 1}, {"vm-b/gpu3", 3}} {
		if port := hl[0].Ports[i]; port.State != "up" || port.Peer != want.peer || len(port.GPUs) != 1 || port.GPUs[0] != want.id {
			t.Errorf("HiLink port %d: %+v, want %s with gpu_id %d", i, port, want.peer, want.id)
		}
	}
	if port := hl[0].Ports[3]; port.State != "down" {
		t.Errorf("HiLink port 3: %+v", port)
	}
	if _, ok := deploy.CPUMetered(st)["hilink:hl-sw0"]; !ok {
		t.Errorf("the CPU meter has no HiLink switch: %v", deploy.CPUMetered(st))
	}
	if _, ok := deploy.CPUMetered(st)["gpu"]; !ok {
		t.Errorf("the CPU meter has no gpu: %v", deploy.CPUMetered(st))
	}

	// A QEMU holds GPU 0 of vm-a (here a bare ivshmem client): a new
	// QEMU of vm-a must wait until the backend has let it go.
	a := st.Rack.Guests[0]
	if err := deploy.GPUsFree(ctx, &st.Rack, a, time.Second); err != nil {
		t.Fatalf("free GPUs: %v", err)
	}
	c, err := net.Dial("unix", deploy.GPUSocket(&st.Rack, a, 0))
	if err != nil {
		t.Fatal(err)
	}
	// The backend takes the connection on its own time.
	for start := time.Now(); ; {
		s, err := gpu.QueryStatus(ctx, deploy.GPUControl(&st.Rack))
		if err == nil && len(s.GPUs) > 0 && s.GPUs[0].Guest {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the backend did not take the client: %+v, %v", s, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := deploy.GPUsFree(ctx, &st.Rack, a, 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), "gpu_id 0 is ready") {
		t.Errorf("a held GPU: %v", err)
	}
	if err := deploy.GPUsFree(ctx, &st.Rack, st.Rack.Guests[1], time.Second); err != nil {
		t.Errorf("another guest's GPUs: %v", err)
	}
	c.Close()
	if err := deploy.GPUsFree(ctx, &st.Rack, a, 5*time.Second); err != nil {
		t.Errorf("after the client left: %v", err)
	}

	// The same spec: kept.
	pid := st.GPUPID
	if fresh, err := deploy.StartGPU(ctx, st, os.Args[0], p); err != nil || fresh || st.GPUPID != pid {
		t.Fatalf("second start: fresh %v, pid %d (was %d), %v", fresh, st.GPUPID, pid, err)
	}
	if fresh, err := deploy.StartHiLinks(ctx, st, os.Args[0], p); err != nil || fresh {
		t.Fatalf("second HiLink start: fresh %v, %v", fresh, err)
	}
	// Another GPU: restarted.
	st.Rack.Guests[1].GPUs = deploy.GPUs{Count: 2, IDs: []int{3, 4}, Memory: 32}
	if err := st.Rack.Defaults(); err != nil {
		t.Fatal(err)
	}
	if fresh, err := deploy.StartGPU(ctx, st, os.Args[0], p); err != nil || !fresh || st.GPUPID == pid {
		t.Fatalf("changed spec: fresh %v, pid %d (was %d), %v", fresh, st.GPUPID, pid, err)
	}
	// A HiLink switch with more ports: it restarts; the backend stays,
	// and each of its four GPU ports dials the new switch.
	st.Rack.Switches[0].HiLink.Ports = 6
	hlPID, pid := st.HiLinkPIDs["hl-sw0"], st.GPUPID
	before := deploy.GPURelinks(ctx, st)
	if len(before) != 4 {
		t.Fatalf("GPU ports before the switch restarted: %v", before)
	}
	if fresh, err := deploy.StartHiLinks(ctx, st, os.Args[0], p); err != nil || !fresh || st.HiLinkPIDs["hl-sw0"] == hlPID {
		t.Fatalf("changed HiLink switch: fresh %v, pid %d (was %d), %v", fresh, st.HiLinkPIDs["hl-sw0"], hlPID, err)
	}
	if fresh, err := deploy.StartGPU(ctx, st, os.Args[0], p); err != nil || fresh || st.GPUPID != pid {
		t.Fatalf("after the HiLink switch restarted: fresh %v, pid %d (was %d), %v", fresh, st.GPUPID, pid, err)
	}
	if n, err := deploy.WaitGPULinks(ctx, st, before, 30*time.Second); err != nil || n != 4 {
		t.Fatalf("GPU ports after the HiLink switch restarted: %d dialled again, %v", n, err)
	}
	// deploy restart hilink, killed as a crash would: the same again.
	if err := writeState(dir, st); err != nil {
		t.Fatal(err)
	}
	hlPID = st.HiLinkPIDs["hl-sw0"]
	st, err = deploy.RestartHiLink(ctx, dir, deploy.RestartOptions{Hinic: os.Args[0], Kill: true, Progress: p})
	if err != nil || st.HiLinkPIDs["hl-sw0"] == hlPID || st.GPUPID != pid || !deploy.GPUAlive(st) {
		t.Fatalf("restart hilink: switch pid %d (was %d), backend pid %d (was %d), %v", st.HiLinkPIDs["hl-sw0"], hlPID, st.GPUPID, pid, err)
	}
	gs, err := gpu.QueryStatus(ctx, deploy.GPUControl(&st.Rack))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range gs.GPUs {
		if x.Link == nil || !x.Link.Up || x.Link.Relinks != 2 {
			t.Errorf("GPU %d after two switch restarts: link %+v", x.ID, x.Link)
		}
	}
	// deploy down, from the state on disk: the backend stops and the
	// guests' RAM files go.
	if err := writeState(dir, st); err != nil {
		t.Fatal(err)
	}
	if err := deploy.Down(dir, p); err != nil || deploy.GPUAlive(st) || deploy.HiLinkAlive(st, "hl-sw0") {
		t.Fatalf("down: %v (backend alive %v, HiLink switch alive %v)", err, deploy.GPUAlive(st), deploy.HiLinkAlive(st, "hl-sw0"))
	}
	for _, g := range st.Rack.Guests {
		if _, err := os.Stat(deploy.GuestRAM(&st.Rack, g)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: RAM file after down: %v", g.Name, err)
		}
	}
}

// writeState saves st as the rack's state in dir, as deploy rack would.
func writeState(dir string, st *deploy.State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, deploy.FileState), b, 0o600)
}
