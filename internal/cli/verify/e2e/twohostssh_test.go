package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/testutil"
	"github.com/PacketFive/hinic/internal/testutil/capture"
)

// sshdPort is the port of the test's sshd in host b's namespace.
const sshdPort = 2522

// startSSHD runs Debian's sshd in namespace ns, listening on addr:port,
// with a host key, root's authorized key and its config in dir, and
// writes the client's side there: a key and an ssh_config that trusts
// only that host key. It returns the ssh_config's path; the daemon is
// stopped when the test ends.
func startSSHD(t *testing.T, ns, addr, dir string) string {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if sshd, err = exec.LookPath("/usr/sbin/sshd"); err != nil {
			requireTool(t, "no sshd: apt-get install openssh-server (scripts/deps.sh)")
		}
	}
	for _, k := range []string{"host_key", "client_key"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", k, "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	files := map[string]string{
		"authorized_keys": read("client_key.pub") + "\n",
		"sshd_config": fmt.Sprintf(`ListenAddress %s:%d
HostKey %s/host_key
AuthorizedKeysFile %s/authorized_keys
PidFile %s/sshd.pid
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
`, addr, sshdPort, dir, dir, dir),
		"known_hosts": fmt.Sprintf("[%s]:%d %s\n", addr, sshdPort, read("host_key.pub")),
		"ssh_config": fmt.Sprintf(`Host %s
	IdentityFile %s/client_key
	IdentitiesOnly yes
	UserKnownHostsFile %s/known_hosts
	StrictHostKeyChecking yes
	ConnectTimeout 20
`, addr, dir, dir),
	}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// sshd's privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, sshd, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("sshd:\n%s", log.String())
		}
	})
	// It is up once a batch-mode login runs a command.
	cfg := filepath.Join(dir, "ssh_config")
	for try := 0; ; try++ {
		out, err := exec.Command("ip", "netns", "exec", ns, "ssh", "-F", cfg, "-o", "BatchMode=yes", "-p", fmt.Sprint(sshdPort), "root@"+addr, "echo ok").CombinedOutput()
		if err == nil && strings.TrimSpace(string(out)) == "ok" {
			return cfg
		}
		if try == 50 {
			t.Fatalf("ssh to the test's sshd: %v\n%s\nsshd: %s", err, out, log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runTwoHostSSH deploys two-hosts-netns.yaml with host b over SSH from
// a controller in host a's namespace, and checks it (TestTwoHostRack).
func runTwoHostSSH(t *testing.T, cases []string) {
	img, tshark, nsp, root := twoHostSetup(t, [2]string{"hn-ssh2h-a", "hn-ssh2h-b"}, "ssh", "ssh-keygen")
	bin := buildHinic(t, root)
	runDir, remoteDir, sshDir := testutil.ShortTempDir(t, "hn2h-"), testutil.ShortTempDir(t, "hn2r-"),
		testutil.ShortTempDir(t, "hn2s-")
	cfg := startSSHD(t, nsp.NS[1], nsp.Addr[1], sshDir)

	// The spec: host a is the controller's machine (no netns: hinic runs
	// in namespace a), host b the machine behind sshd.
	b, err := os.ReadFile(filepath.Join(root, "testdata", "racks", "two-hosts-netns.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	spec := strings.Replace(string(b), "    netns: hn-twohost-a\n", "", 1)
	spec = strings.Replace(spec, "    netns: hn-twohost-b\n", fmt.Sprintf("    ssh: root@%s:%d\n    hinic: %s\n    run-dir: %s\n",
		nsp.Addr[1], sshdPort, bin, remoteDir), 1)
	// Two TCG guests on a 2-core machine that other racks share boot
	// in minutes; a boot is not what this test measures.
	spec += "boot-timeout: 15m\n"
	specFile := filepath.Join(t.TempDir(), "rack.yaml")
	if err := os.WriteFile(specFile, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	// hinic as the controller: in namespace a, ssh through the test's
	// config.
	hinic := func(args ...string) ([]byte, error) {
		cmd := exec.Command("ip", append([]string{"netns", "exec", nsp.NS[0], bin}, args...)...)
		cmd.Env = append(os.Environ(), deploy.EnvSSH+"=ssh -F "+cfg)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		t.Logf("hinic %s:\n%s", strings.Join(args, " "), stderr.String())
		if err != nil {
			err = fmt.Errorf("hinic %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out, err
	}
	must := func(args ...string) []byte {
		t.Helper()
		out, err := hinic(args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	pcap := filepath.Join(t.TempDir(), "veth.pcap")
	stopCapture := capture.CaptureIn(t, tshark, nsp.NS[0], nsp.Veth[0], pcap)

	out, upErr := hinic("deploy", "rack", specFile, "--run-dir", runDir, "--image", img, "-o", "json")
	defer downSSHAndCheck(t, hinic, runDir, remoteDir)
	if upErr != nil {
		t.Fatal(upErr)
	}
	var st deploy.State
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("deploy rack's state: %v\n%s", err, out)
	}
	if len(st.Hosts) != 2 || len(st.Guests) != 2 || st.Hosts[1].RunDir != filepath.Join(remoteDir, "b") ||
		st.Guests[1].SSHAddr != "192.0.2.2:2371" || st.Guests[1].Netns != "" {
		t.Fatalf("state: hosts %+v, guests %+v", st.Hosts, st.Guests)
	}
	// Host b's part is where ssh made it, and nothing of it here.
	if _, err := deploy.ReadState(filepath.Join(remoteDir, "b")); err != nil {
		t.Errorf("host b's part: %v", err)
	}
	if _, err := os.Stat(filepath.Join(runDir, "b")); err == nil {
		t.Errorf("host b's part made %s here", filepath.Join(runDir, "b"))
	}

	// deploy status across the hosts, host b's part asked over ssh;
	// deploy exec on host b's guest, over the underlay.
	rs := checkTwoHostStatus(t, func() []byte { return must("deploy", "status", "--run-dir", runDir, "-o", "json") })
	if rs.Hosts[1].Part == nil || rs.Hosts[1].Part.Device != "running" || rs.Hosts[1].RunDir != filepath.Join(remoteDir, "b") {
		t.Errorf("status of host b: %+v", rs.Hosts[1])
	}
	checkExecAcross(t, must("deploy", "exec", "--run-dir", runDir, "vm-b", "--", execAcross(st.Guests[0].DataIP))...)

	// The gate across, from the controller: vm-a (host a) serves, vm-b
	// (host b) is the client.
	runGateCLI(t, hinic, runDir, cases)

	// Host b's device backend restarted from the controller (hinic
	// deploy restart device on b over SSH): vm-b gets a new function,
	// and RDMA crosses the tunnel again.
	must("deploy", "restart", "--run-dir", runDir, "--host", "b", "device")
	runGateCLI(t, hinic, runDir, []string{"ibv_rc_pingpong"})
	stopCapture()
	if n := capture.CheckVXLANCapture(t, tshark, pcap, 5700, [2]string{"10.57.0.1", "10.57.0.2"}); n == 0 {
		t.Error("no RDMA traffic in the tunnel on the veth")
	}
}

// downSSHAndCheck takes the rack down from the controller and checks
// that every guest is stopped and that no process of host b's part is
// left: none runs with its remote run directory on its command line.
func downSSHAndCheck(t *testing.T, hinic func(...string) ([]byte, error), runDir, remoteDir string) {
	t.Helper()
	if _, err := hinic("deploy", "down", "--run-dir", runDir); err != nil {
		t.Error(err)
	}
	out, err := hinic("deploy", "status", "--run-dir", runDir, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	rs := &deploy.RackStatus{}
	if err := json.Unmarshal(out, rs); err != nil {
		t.Fatal(err)
	}
	checkStopped(t, rs)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(remoteDir)) {
			t.Errorf("after down, %s: %q", filepath.Dir(p), bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
}
