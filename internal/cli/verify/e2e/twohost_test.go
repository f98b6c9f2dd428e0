package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/testutil"
	"github.com/PacketFive/hinic/internal/testutil/capture"
	"github.com/PacketFive/hinic/internal/verify"
)

// twoHost is one rack of the two-host tests.
type twoHost struct {
	spec  string   // in testdata/racks
	cases []string // the SSH gate's cases run across the hosts
	// check checks the capture of the veth between the hosts.
	check func(t *testing.T, tshark, pcap string) int
}

// TestTwoHostRack deploys testdata/racks/two-hosts-netns.yaml as two
// machines, the second reached over SSH: two network namespaces joined
// by a veth pair (192.0.2.1 and .2), each with its own fabric, device
// backend and HiNIC guest, a VXLAN link between their switches. The
// controller, hinic run in namespace a, is host a itself; host b is
// ssh: root@192.0.2.2:2522, a real sshd (Debian's openssh-server) in
// namespace b with its own host key and authorized key, reached with
// HINIC_SSH="ssh -F CONFIG". Host b's part lives in a remote run
// directory that is not the controller's RUN-DIR/b, so its files are
// the ones deploy made through ssh. The test checks deploy status and
// exec across the hosts, runs the whole RoCEv2 gate (every case of
// make e2e's HiNIC rack, pyverbs, UCX, libfabric and MPI included) from
// the guest on host b to the one on host a with verify e2e --rack, each
// case required to pass, restarts host b's device backend from the
// controller (deploy restart --host b device, run on b over SSH) and
// passes ibv_rc_pingpong again, has tshark dissect the capture of the veth (VXLAN,
// VNI 5700, RoCEv2 inside both ways, every inner ICRC valid), and takes
// the rack down with nothing of either part left running. It boots two
// QEMU guests under TCG and runs only with HINIC_TWOHOST_IMAGE, an image
// with the HiNIC guest packages (scripts/e2e.sh builds one), as root.
func TestTwoHostRack(t *testing.T) {
	runTwoHostSSH(t, twoHostCases())
}

// twoHostCases is what the two-host tests run of the gate: every case
// (nil), or the cases HINIC_TWOHOST_CASES names (blank-separated), for
// a shorter run while developing.
func twoHostCases() []string {
	return strings.Fields(os.Getenv("HINIC_TWOHOST_CASES"))
}

// TestTwoHostIBRack is TestTwoHostRack for native InfiniBand
// (two-hosts-ib-netns.yaml): the link is IB-over-UDP (UDP 4792, VNI
// 5701), OpenSM runs in the guest on host a and brings up host b's port
// across the tunnel; the whole InfiniBand gate (the management cases:
// ibstat, sminfo, ibnetdiscover across both switches, ibping; verbs,
// perftest, rdma_cm over IPoIB, pyverbs, UCX, libfabric, MPI) runs
// across with verify e2e --rack, each case required to pass, and every
// IB packet in the veth's datagrams has a valid VCRC and ICRC.
func TestTwoHostIBRack(t *testing.T) {
	runTwoHost(t, twoHost{spec: "two-hosts-ib-netns.yaml",
		cases: twoHostCases(),
		check: func(t *testing.T, tshark, pcap string) int {
			return capture.CheckIBUDPCapture(t, tshark, pcap, 5701, [2]string{"192.0.2.1", "192.0.2.2"})
		}})
}

// twoHostSetup skips the test without HINIC_TWOHOST_IMAGE, QEMU or
// tools, makes the two namespaces named ns joined by a veth with
// 192.0.2.1 and .2 and an MTU for the rack's mtu 9000 in VXLAN (9050
// bytes of underlay), and returns the image, tshark, the namespaces
// and the repository's root.
func twoHostSetup(t *testing.T, ns [2]string, tools ...string) (img, tshark string, nsp *testutil.NetnsPair, root string) {
	t.Helper()
	img = envImage(t, "HINIC_TWOHOST_IMAGE",
		"boots two QEMU guests for minutes; set HINIC_TWOHOST_IMAGE to an image with the HiNIC guest packages", "", "", tools...)
	tshark = testutil.Tshark(t)
	nsp = testutil.NewNetnsPairNamed(t, ns, [2]string{"192.0.2.1", "192.0.2.2"})
	for i := range 2 {
		if out, err := exec.Command("ip", "-n", nsp.NS[i], "link", "set", "dev", nsp.Veth[i], "mtu", "9100").CombinedOutput(); err != nil {
			t.Fatalf("veth mtu: %v\n%s", err, out)
		}
	}
	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	return img, tshark, nsp, root
}

// runTwoHost deploys tc's spec in two namespaces and checks it.
func runTwoHost(t *testing.T, tc twoHost) {
	img, tshark, nsp, root := twoHostSetup(t, [2]string{"hn-twohost-a", "hn-twohost-b"})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	bin := buildHinic(t, root)

	r, err := deploy.ReadRack(filepath.Join(root, "testdata", "racks", tc.spec))
	if err != nil {
		t.Fatal(err)
	}
	r.Image = img
	runDir := testutil.ShortTempDir(t, "hn2h-") // short: socket paths stay under 108 bytes
	r.RunDir = runDir
	// Two TCG guests on a 2-core machine that other racks share boot
	// in minutes; a boot is not what this test measures.
	r.BootTimeout.Duration = 15 * time.Minute
	pcap := filepath.Join(t.TempDir(), "veth.pcap")
	stopCapture := capture.CaptureIn(t, tshark, nsp.NS[0], nsp.Veth[0], pcap)

	st, err := deploy.Up(ctx, r, deploy.UpOptions{Hinic: bin, Progress: t.Logf})
	defer downAndCheck(t, runDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Hosts) != 2 || len(st.Guests) != 2 {
		t.Fatalf("state: hosts %+v, guests %+v", st.Hosts, st.Guests)
	}

	checkTwoHostStatus(t, func() []byte { return runHinic(t, bin, "deploy", "status", "--run-dir", runDir, "-o", "json") })
	// deploy exec on the guest of host b, which pings host a's over
	// the tunnel.
	checkExecAcross(t, runHinic(t, bin, "deploy", "exec", "--run-dir", runDir, "vm-b", "--", execAcross(st.Guests[0].DataIP))...)

	// The gate across, from the controller: vm-a (host a) serves, vm-b
	// (host b) is the client.
	runGateCLI(t, func(args ...string) ([]byte, error) { return hinicOut(bin, args...) }, runDir, tc.cases)
	stopCapture()
	if n := tc.check(t, tshark, pcap); n == 0 {
		t.Error("no RDMA traffic in the tunnel on the veth")
	}
}

// checkTwoHostStatus checks deploy status -o json (what status prints)
// across the hosts: both fabrics and backends, both guests with an
// ACTIVE port, the VXLAN port of each switch up. A guest's port state
// is asked over SSH within 15 s, which a loaded host can miss
// ("absent"): up to three tries.
func checkTwoHostStatus(t *testing.T, status func() []byte) deploy.RackStatus {
	t.Helper()
	var rs deploy.RackStatus
	for try := 1; ; try++ {
		out := status()
		rs = deploy.RackStatus{}
		if err := json.Unmarshal(out, &rs); err != nil {
			t.Fatalf("status: %v\n%s", err, out)
		}
		if try == 3 || !slices.ContainsFunc(rs.Guests, func(g deploy.GuestStatus) bool { return g.PortState != "ACTIVE" }) {
			break
		}
		t.Logf("status, try %d: guests %+v", try, rs.Guests)
	}
	if rs.Fabric != "running" || rs.Device != "running" || len(rs.Hosts) != 2 {
		t.Errorf("status: fabric %s, device %s, %d hosts", rs.Fabric, rs.Device, len(rs.Hosts))
	}
	for _, g := range rs.Guests {
		if g.State != "running" || g.PortState != "ACTIVE" {
			t.Errorf("status: guest %+v", g)
		}
	}
	tunnels := 0
	if rs.Switches != nil {
		for _, s := range rs.Switches.Switches {
			for _, p := range s.Ports {
				if p.Tunnel != nil {
					tunnels++
					if p.Tunnel.Link != "up" {
						t.Errorf("switch %s port %d: tunnel %+v", s.Name, p.Num, p.Tunnel)
					}
				}
			}
		}
	}
	if tunnels != 2 {
		t.Errorf("status: %d tunnel ports, want one per host", tunnels)
	}
	return rs
}

// execAcross is the command deploy exec runs on the guest of host b:
// it pings host a's guest, at ip, over the tunnel.
func execAcross(ip string) string {
	return "hostname; ping -c 2 -W 5 " + ip + " >/dev/null && echo reached"
}

// checkExecAcross checks execAcross's output on vm-b.
func checkExecAcross(t *testing.T, out ...byte) {
	t.Helper()
	if got := string(out); !strings.Contains(got, "vm-b") || !strings.Contains(got, "reached") {
		t.Errorf("deploy exec vm-b: %q", got)
	}
}

// runGateCases runs the named cases of the SSH gate with the rack's
// first guest as server and its second as client, metered, and checks
// that each passes and that the CPU meter found each of procs.
func runGateCases(ctx context.Context, t *testing.T, st *deploy.State, names, procs []string) {
	t.Helper()
	hosts := connectGuests(ctx, t, st)
	o := verify.DefaultSSHOptions()
	o.Save = t.TempDir()
	o.Timeout = 10 * time.Minute
	o.ActiveMTU = map[string]int{}
	for _, g := range st.Rack.Guests {
		o.ActiveMTU[g.Name] = deploy.ActiveMTU(&st.Rack, g)
	}
	var cases []verify.Case
	for _, c := range verify.SSHCases(hosts[0], hosts[1], o) {
		if slices.Contains(names, c.Name) {
			cases = append(cases, c)
		}
	}
	if len(cases) != len(names) {
		t.Fatalf("the gate has %d of the cases %v", len(cases), names)
	}
	rep := verify.RunMetered(ctx, "rack:"+st.Rack.Name, cases, t.Logf, st.CPUSeconds)
	for _, c := range rep.Cases {
		t.Logf("%-16s %-6s %s  %s; CPU %v", c.Case, c.Result, verify.FormatFigure(c.Figure, c.Unit), c.Detail, c.CPU)
		if c.Result != verify.Pass {
			t.Errorf("case %s: %s", c.Case, c.Result)
		}
		for _, p := range procs {
			if _, ok := c.CPU[p]; !ok {
				t.Errorf("case %s: no CPU for %s in %v", c.Case, p, c.CPU)
			}
		}
	}
}

// runGateCLI runs the gate across a two-host rack with hinic (a
// controller's): verify e2e --rack RUN-DIR with a --case for each of
// cases, or the whole gate when cases is empty. Every case it runs must
// pass, each metered on both hosts' backends and both QEMUs.
func runGateCLI(t *testing.T, hinic func(...string) ([]byte, error), runDir string, cases []string) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "gate.json")
	args := []string{"verify", "e2e", "--rack", runDir, "--json", report, "--case-timeout", "10m"}
	for _, c := range cases {
		args = append(args, "--case", c)
	}
	_, gateErr := hinic(args...)
	var rep verify.Report
	if b, err := os.ReadFile(report); err != nil {
		t.Fatalf("gate: %v (%v)", err, gateErr)
	} else if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("gate report: %v", err)
	}
	var ran []string
	for _, c := range rep.Cases {
		t.Logf("%-20s %-6s %s  %s; CPU %v", c.Case, c.Result, verify.FormatFigure(c.Figure, c.Unit), c.Detail, c.CPU)
		ran = append(ran, c.Case)
		if c.Result != verify.Pass {
			t.Errorf("case %s: %s: %s", c.Case, c.Result, c.Detail)
		}
		for _, p := range []string{"backend@a", "backend@b", "qemu:vm-a", "qemu:vm-b"} {
			if _, ok := c.CPU[p]; !ok {
				t.Errorf("case %s: no CPU for %s in %v", c.Case, p, c.CPU)
			}
		}
	}
	switch {
	case gateErr != nil:
		t.Errorf("gate: %v", gateErr)
	case len(cases) > 0 && len(ran) != len(cases):
		t.Errorf("gate: ran %v of %v", ran, cases)
	case len(cases) == 0 && !slices.Contains(ran, "pyverbs"):
		t.Errorf("gate: ran %v, not the whole gate", ran)
	}
	t.Logf("gate across the hosts: %d cases", len(ran))
}

// hinicOut runs the hinic binary and returns its standard output, or an
// error with its standard error.
func hinicOut(bin string, args ...string) ([]byte, error) {
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("hinic %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, err
}

// runHinic runs the hinic binary and returns its standard output; a
// failure fails the test with its standard error.
func runHinic(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	out, err := hinicOut(bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
