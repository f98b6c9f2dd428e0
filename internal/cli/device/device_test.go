package device_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/cli/clitest"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	clidevice "github.com/PacketFive/hinic/internal/cli/device"
	"github.com/PacketFive/hinic/internal/cli/device/serve"
	"github.com/PacketFive/hinic/internal/device"
	"github.com/PacketFive/hinic/internal/device/guestsim"
	"github.com/PacketFive/hinic/internal/fabric"
)

func isolate(t *testing.T) { clitest.Isolate(t, "HINIC_DEVICE_CONTROL", "HINIC_DEVICE_VNICS") }

func shortDir(t *testing.T) string { return clitest.ShortDir(t, "hdc") }

func TestParseVNIC(t *testing.T) {
	c, err := serve.ParseVNIC("socket=/s,ram=/r,ram-size=4G,machine=pc,port=/p,mac=02:00:00:00:00:01,ip=10.42.0.1,ip=10.42.0.9,node-guid=0x0200:00ff:fe00:0001,vectors=4,shm-size=2M,mtu=4096,name=a,mem-budget=64M,trust-pause=true")
	if err != nil {
		t.Fatal(err)
	}
	if c.Socket != "/s" || c.RAMPath != "/r" || c.RAMSize != 4<<30 || c.Machine != "pc" || c.FabricPort != "/p" ||
		c.MAC != [6]byte{2, 0, 0, 0, 0, 1} || len(c.IPv4) != 2 || c.NodeGUID != 0x020000fffe000001 ||
		c.Vectors != 4 || c.ShmSize != 2<<20 || c.MTU != 4096 || c.Name != "a" || c.MemBudget != 64<<20 || !c.TrustPause {
		t.Errorf("%+v", c)
	}
	for _, bad := range []string{
		"ram=/r,ram-size=1G,mac=02:00:00:00:00:01",
		"socket=/s,ram=/r,ram-size=1G",
		"socket=/s,ram=/r,ram-size=1X,mac=02:00:00:00:00:01",
		"socket=/s,ram=/r,ram-size=1G,mac=02:00:00:00:00:01,machine=virt",
		"socket=/s,ram=/r,ram-size=1G,mac=02:00:00:00:00:01,colour=blue",
		"socket=/s,ram=/r,ram-size=1G,mac=02:00:00:00:00:01,ip=::1",
		"socket=/s,ram=/r,ram-size=1G,mac=02:00:00:00:00:01,mem-budget=lots",
	} {
		if _, err := serve.ParseVNIC(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestParseVNICAllowIP: allow-ip= takes addresses and prefixes, IPv4
// and IPv6, repeated; an IPv4-mapped one is the IPv4 one; the errors
// name the key and what it wants.
func TestParseVNICAllowIP(t *testing.T) {
	const base = "socket=/s,ram=/r,ram-size=1G,mac=02:00:00:00:00:01,"
	c, err := serve.ParseVNIC(base + "allow-ip=10.42.0.1,allow-ip=fd00::/64,allow-ip=::ffff:10.42.0.9,allow-ip=10.1.2.3/8")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.42.0.1/32"), netip.MustParsePrefix("fd00::/64"),
		netip.MustParsePrefix("10.42.0.9/32"), netip.MustParsePrefix("10.0.0.0/8")}
	if !slices.Equal(c.AllowedIPs, want) {
		t.Errorf("allowed %v; want %v", c.AllowedIPs, want)
	}
	for _, bad := range []string{"allow-ip=", "allow-ip=10.42.0.300", "allow-ip=fe80::1%eth0", "allow-ip=10.0.0.0/33",
		"allow-ip=host.example"} {
		_, err := serve.ParseVNIC(base + bad)
		if err == nil || !errors.Is(err, device.ErrAllowedIP) || !strings.Contains(err.Error(), "allow-ip") {
			t.Errorf("%q: %v; want an allow-ip error", bad, err)
		}
	}
}

func TestHelpDocumentsFlags(t *testing.T) {
	isolate(t)
	clitest.Contains(t, "help", clitest.Output(t, clidevice.NewCmdDevice, "serve", "--help"),
		"--vnic", "--control", "--pprof", "socket=", "ram=", "ram-size=", "machine=", "port=", "mac=",
		"ip=", "node-guid=", "port-guid=", "link=", "vectors=", "shm-size=", "mtu=", "name=", "mem-budget=", "--mem-budget",
		"trust-pause=", "allow-ip=")
}

// TestMemBudgetSetting: a vNIC's budget is its mem-budget=, else
// --mem-budget (or device.mem_budget, HINIC_DEVICE_MEM_BUDGET), else 1G.
func TestMemBudgetSetting(t *testing.T) {
	const v = "socket=/s,ram=/r,ram-size=1G,mac=02:00:00:00:00:01"
	for _, tc := range []struct {
		env  string
		args []string
		want []uint64
	}{
		{"", []string{"--vnic", v}, []uint64{device.DefaultMemBudget}},
		{"", []string{"--mem-budget", "256M", "--vnic", v, "--vnic", v + ",mem-budget=2G"}, []uint64{256 << 20, 2 << 30}},
		{"512M", []string{"--vnic", v}, []uint64{512 << 20}},
		{"512M", []string{"--mem-budget", "128M", "--vnic", v}, []uint64{128 << 20}},
	} {
		isolate(t)
		t.Setenv("HINIC_DEVICE_MEM_BUDGET", tc.env)
		ios, _, _, _ := cmdutil.Test()
		f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
		var got []uint64
		cmd := serve.NewCmdServe(f, func(_ context.Context, o *serve.Options) error {
			for _, c := range o.VNICs {
				got = append(got, c.MemBudget)
			}
			return nil
		})
		cmd.SetArgs(tc.args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("env %q, %v: budgets %v, want %v", tc.env, tc.args, got, tc.want)
		}
	}
	ios, _, _, _ := cmdutil.Test()
	cmd := serve.NewCmdServe(cmdutil.NewFactory(ios, cmdutil.BuildInfo{}), func(context.Context, *serve.Options) error { return nil })
	cmd.SetArgs([]string{"--mem-budget", "0", "--vnic", v})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err == nil {
		t.Error("--mem-budget 0 accepted")
	}
}

func TestServeAndStatus(t *testing.T) {
	isolate(t)
	dir := shortDir(t)
	ctl := filepath.Join(dir, "device.sock")
	sock := filepath.Join(dir, "a.sock")
	ram := filepath.Join(dir, "a.ram")
	ios, _, _, _ := cmdutil.Test()
	clitest.Serve(t, clidevice.NewCmdDevice(cmdutil.NewFactory(ios, cmdutil.BuildInfo{})), "serve", "--control", ctl, "--vnic",
		"socket="+sock+",ram="+ram+",ram-size=16M,mac=02:00:00:00:00:0a,ip=10.42.0.10,name=vm-a")
	clitest.WaitFor(t, "control socket", clitest.Accepts(ctl))
	gctx, gcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer gcancel()
	g, err := guestsim.Connect(gctx, guestsim.Config{Socket: sock, RAMPath: ram, RAMSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Handshake(gctx); err != nil {
		t.Fatal(err)
	}
	if _, err := g.AllocPD(gctx); err != nil {
		t.Fatal(err)
	}

	run := func() string { return clitest.Output(t, clidevice.NewCmdDevice, "status", "--control", ctl) }
	clitest.Contains(t, "table", run(), "vm-a", "live", "peer 1")
	var st device.Status
	// --output lives on the root command; the environment reaches the
	// same setting.
	t.Setenv("HINIC_OUTPUT", "json")
	if err := json.Unmarshal([]byte(run()), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.VNICs) != 1 || st.VNICs[0].Objects.PDs != 1 || st.VNICs[0].Counters.AdminCmds == 0 {
		t.Errorf("json: %+v", st)
	}
}

// TestServePprof: --pprof reaches the run, and a non-loopback address is
// refused before any vNIC starts.
func TestServePprof(t *testing.T) {
	isolate(t)
	ios, _, _, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
	dir := shortDir(t)
	vnic := "socket=" + filepath.Join(dir, "a.sock") + ",ram=" + filepath.Join(dir, "a.ram") + ",ram-size=64M,mac=02:00:00:00:00:0a"
	var got string
	cmd := serve.NewCmdServe(f, func(_ context.Context, o *serve.Options) error {
		got = o.Pprof
		return nil
	})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetArgs([]string{"--vnic", vnic, "--pprof", "127.0.0.1:0"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got != "127.0.0.1:0" {
		t.Errorf("pprof %q", got)
	}

	cmd = serve.NewCmdServe(f, nil)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetArgs([]string{"--vnic", vnic, "--pprof", "0.0.0.0:6060"})
	err := cmd.Execute()
	if err == nil || cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("err = %v, want a usage error about loopback", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.sock")); err == nil {
		t.Error("the vNIC started although --pprof was refused")
	}
}

// TestAllowIPFromConfig: allow-ip= in a vNIC of hinic.yaml's
// device.vnics reaches the vNIC; a bad one fails with the key named.
func TestAllowIPFromConfig(t *testing.T) {
	for _, tc := range []struct {
		ip   string
		want []netip.Prefix
		err  string
	}{
		{"allow-ip=10.42.0.1,allow-ip=fd00::/64", []netip.Prefix{netip.MustParsePrefix("10.42.0.1/32"),
			netip.MustParsePrefix("fd00::/64")}, ""},
		{"allow-ip=10.42.0.256", nil, "allow-ip"},
	} {
		isolate(t)
		yaml := "device:\n  vnics:\n    - socket=/s,ram=/r,ram-size=1G,mac=02:00:00:00:00:01,ip=10.42.0.1," + tc.ip + "\n"
		if err := os.WriteFile("hinic.yaml", []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		ios, _, _, _ := cmdutil.Test()
		var got []netip.Prefix
		cmd := serve.NewCmdServe(cmdutil.NewFactory(ios, cmdutil.BuildInfo{}), func(_ context.Context, o *serve.Options) error {
			got = o.VNICs[0].AllowedIPs
			return nil
		})
		cmd.SetArgs(nil)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.Execute()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v; want an error naming %s", tc.ip, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.ip, got, err, tc.want)
		}
	}
}

// TestServeWithFabric: with --fabric the backend also serves the fabric
// section of the config file, and its vNIC's port on that switch comes
// up; without a fabric section --fabric is refused before anything
// starts.
func TestServeWithFabric(t *testing.T) {
	isolate(t)
	dir := shortDir(t)
	fabDir := filepath.Join(dir, "fab")
	conf := filepath.Join(dir, "fabric.yaml")
	yaml := "fabric:\n  run-dir: " + fabDir + "\n  switches:\n    - name: sw0\n      ports: 2\n"
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HINIC_CONFIG", conf)
	ctl := filepath.Join(dir, "device.sock")
	vnic := "socket=" + filepath.Join(dir, "a.sock") + ",ram=" + filepath.Join(dir, "a.ram") +
		",ram-size=16M,mac=02:00:00:00:00:0a,name=vm-a,port=" + filepath.Join(fabDir, "sw0-port1.sock")
	ios, _, _, _ := cmdutil.Test()
	clitest.Serve(t, clidevice.NewCmdDevice(cmdutil.NewFactory(ios, cmdutil.BuildInfo{})),
		"serve", "--fabric", "--control", ctl, "--vnic", vnic)
	clitest.WaitFor(t, "control socket", clitest.Accepts(ctl))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fst, err := fabric.QueryStatus(ctx, fabDir)
	if err != nil {
		t.Fatalf("the fabric in the backend: %v", err)
	}
	if len(fst.Switches) != 1 || fst.Switches[0].Name != "sw0" {
		t.Errorf("fabric status: %+v", fst)
	}
	dst, err := device.QueryStatus(ctx, ctl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dst.VNICs) != 1 || !dst.VNICs[0].LinkUp {
		t.Errorf("the vNIC's link to the in-process switch is not up: %+v", dst.VNICs)
	}

	// A config without a fabric section.
	other := filepath.Join(dir, "nofabric.yaml")
	if err := os.WriteFile(other, []byte("device:\n  mem_budget: 1G\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HINIC_CONFIG", other)
	cmd := serve.NewCmdServe(cmdutil.NewFactory(ios, cmdutil.BuildInfo{}), nil)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	b := filepath.Join(dir, "b.sock")
	cmd.SetArgs([]string{"--fabric", "--vnic",
		"socket=" + b + ",ram=" + filepath.Join(dir, "b.ram") + ",ram-size=16M,mac=02:00:00:00:00:0b"})
	err = cmd.Execute()
	if err == nil || cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "fabric section") {
		t.Fatalf("err = %v, want a usage error about the missing fabric section", err)
	}
	if _, err := os.Stat(b); err == nil {
		t.Error("the vNIC started although --fabric was refused")
	}
}
