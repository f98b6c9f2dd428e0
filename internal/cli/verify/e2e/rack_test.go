package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/image"
	"github.com/PacketFive/hinic/internal/verify"
)

// requireTool skips the test when a tool it runs is missing, unless
// HINIC_REQUIRE_TOOLS=1 (CI), where a missing tool is a failure.
func requireTool(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("HINIC_REQUIRE_TOOLS") == "1" {
		t.Fatal(msg + "; HINIC_REQUIRE_TOOLS=1 makes this a failure")
	}
	t.Skip(msg)
}

// envImage is the guest image that the variable env names, for a test
// that boots QEMU guests: without it the test is skipped with why (what
// it boots, and what image env must name), and when rootWhy is not empty and
// the test does not run as root, with rootWhy. A manifest that cannot
// be read skips it too. A missing tool, QEMU's or one of tools, skips
// it, or fails it under HINIC_REQUIRE_TOOLS=1, with hint after the
// tools' names.
func envImage(t *testing.T, env, why, rootWhy, hint string, tools ...string) string {
	t.Helper()
	img := os.Getenv(env)
	if img == "" {
		t.Skip(why)
	}
	if rootWhy != "" && os.Geteuid() != 0 {
		t.Skip(rootWhy)
	}
	if _, err := image.ReadManifest(img); err != nil {
		t.Skipf("%s: %v", env, err)
	}
	if m := image.MissingTools(append([]string{"qemu-system-x86_64", "qemu-img"}, tools...)...); len(m) > 0 {
		requireTool(t, image.ErrMissingTools(m).Error()+hint)
	}
	return img
}

// buildHinic builds the hinic binary of the module at root into the
// test's temporary directory.
func buildHinic(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hinic")
	build := exec.Command("go", "build", "-o", bin, "./cmd/hinic")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// connectGuests opens SSH to every guest of a deployed rack, closed when
// the test ends, as the gate's hosts.
func connectGuests(ctx context.Context, t *testing.T, st *deploy.State) []verify.Host {
	t.Helper()
	var hosts []verify.Host
	for i := range st.Guests {
		c, err := st.Connect(ctx, &st.Guests[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		hosts = append(hosts, &host{g: &st.Guests[i], c: c})
	}
	return hosts
}

// downAndCheck takes the rack in runDir down and checks that its status
// then shows nothing running.
func downAndCheck(t *testing.T, runDir string) {
	t.Helper()
	if err := deploy.Down(runDir, t.Logf); err != nil {
		t.Error(err)
	}
	rs, err := deploy.Status(context.Background(), runDir)
	if err != nil {
		t.Fatal(err)
	}
	checkStopped(t, rs)
}

// checkStopped checks a rack's status after down: the fabric, the
// device backend and every guest stopped.
func checkStopped(t *testing.T, rs *deploy.RackStatus) {
	t.Helper()
	if rs.Fabric != "stopped" || (rs.Device != "" && rs.Device != "stopped") {
		t.Errorf("after down: fabric %s, device backend %s", rs.Fabric, rs.Device)
	}
	for _, g := range rs.Guests {
		if g.State != "stopped" {
			t.Errorf("guest %s %s after down", g.Name, g.State)
		}
	}
}

// TestSoftRoCERackE2E is `make e2e` as a Go test: the guest image (built
// once, then cached in .cache/images/hinic-guest), two Soft-RoCE guests on
// HiSwitch, the SSH gate with the capture check, and the rack torn down
// with nothing left running. It takes about 3 minutes with a cached image
// and 10 without, so it runs only with HINIC_E2E=1.
func TestSoftRoCERackE2E(t *testing.T) {
	if os.Getenv("HINIC_E2E") != "1" {
		t.Skip("boots two QEMU guests for minutes; set HINIC_E2E=1 (make e2e runs the same steps)")
	}
	if m := image.MissingTools(); len(m) > 0 {
		requireTool(t, image.ErrMissingTools(m).Error())
	}
	if os.Geteuid() != 0 {
		requireTool(t, "building the guest image needs root")
	}
	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	bin := buildHinic(t, root)

	mirrors, err := image.HostMirrors("/", "bookworm")
	if err != nil {
		t.Fatal(err)
	}
	kernel, err := image.ResolveKernel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	imgDir := filepath.Join(root, ".cache", "images", "hinic-guest")
	spec := image.Spec{Name: "hinic-guest", Suite: "bookworm", Mirrors: mirrors, Kernel: kernel,
		Packages: image.BasePackages, Size: "3G"}
	res, err := image.Build(ctx, spec, image.BuildOptions{Dir: imgDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Manifest.Verify(imgDir, true); err != nil {
		t.Fatal(err)
	}
	t.Logf("image: %s, kernel %s, cached %v", imgDir, res.Manifest.KernelRelease, res.Cached)

	runDir, err := os.MkdirTemp("", "hinic-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(runDir)
	r := &deploy.Rack{Name: "gotest", RunDir: runDir, Image: imgDir, Pcap: true, SSHPortBase: 2322}
	st, err := deploy.Up(ctx, r, deploy.UpOptions{Hinic: bin, Progress: t.Logf})
	defer downAndCheck(t, runDir)
	if err != nil {
		t.Fatal(err)
	}

	hosts := connectGuests(ctx, t, st)
	o := verify.DefaultSSHOptions()
	o.Save = t.TempDir()
	cases := verify.SSHCases(hosts[0], hosts[1], o)
	cases = append(cases, verify.Case{Name: CaseCaptureICRC, Run: func(ctx context.Context) (verify.Outcome, error) {
		return checkCaptures(ctx, &Options{Hinic: bin, IO: &cmdutil.IOStreams{}}, filepath.Join(runDir, deploy.DirPcap))
	}})
	rep := verify.RunMetered(ctx, "rack:gotest", cases, t.Logf, st.CPUSeconds)
	for _, c := range rep.Cases {
		t.Logf("%-18s %-11s %s  %s; CPU %v, %.3g s/GiB", c.Case, c.Result, verify.FormatFigure(c.Figure, c.Unit), c.Detail, c.CPU, c.CPUPerGiB)
		if c.Result != verify.Pass {
			t.Errorf("case %s: %s", c.Case, c.Result)
		}
		// Every case is metered, split into the fabric and each QEMU;
		// a case that moved data has its CPU per GiB.
		for _, p := range []string{"fabric", "qemu:" + st.Guests[0].Name, "qemu:" + st.Guests[1].Name} {
			if _, ok := c.CPU[p]; !ok {
				t.Errorf("case %s: no CPU for %s in %v", c.Case, p, c.CPU)
			}
		}
		if c.Unit == "MiB/s" && (c.Bytes <= 0 || c.CPUPerGiB <= 0) {
			t.Errorf("case %s: moved %d B, %v s/GiB", c.Case, c.Bytes, c.CPUPerGiB)
		}
	}

	// A guest that dies is reported as crashed; the rest keeps running.
	victim := st.Guests[1]
	if p, err := os.FindProcess(victim.PID); err == nil {
		_ = p.Kill()
	}
	time.Sleep(2 * time.Second)
	rs, err := deploy.Status(ctx, runDir)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Guests[1].State != "crashed" || rs.Guests[0].State != "running" || rs.Guests[0].PortState != "ACTIVE" || rs.Fabric != "running" {
		t.Errorf("after killing %s: fabric %s, guests %+v", victim.Name, rs.Fabric, rs.Guests)
	}
}
