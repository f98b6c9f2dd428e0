package fabric_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/PacketFive/hinic/internal/cli/clitest"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	clifabric "github.com/PacketFive/hinic/internal/cli/fabric"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/proto"
)

// TestStatusVXLAN serves a fabric with a vxlan port whose remote is a
// UDP socket of the test, which sends one keepalive: `fabric status`
// shows the tunnel's link up, its addresses, VNI and counters, in the
// table and in json.
func TestStatusVXLAN(t *testing.T) {
	isolate(t)
	dir := shortDir(t)
	rc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	local := probe.LocalAddr().String()
	probe.Close()
	conf := filepath.Join(dir, "hinic.yaml")
	yaml := "fabric:\n  switches:\n    - name: tor1\n      ports: 2\n      port:\n        - {num: 2, kind: vxlan, vni: 77, local: " +
		strconv.Quote(local) + ", remote: " + strconv.Quote(rc.LocalAddr().String()) + "}\n"
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HINIC_CONFIG", conf)
	ios, _, _, _ := cmdutil.Test()
	stop := clitest.Serve(t, clifabric.NewCmdFabric(cmdutil.NewFactory(ios, cmdutil.BuildInfo{})), "serve", "--run-dir", dir)
	defer stop()
	clitest.WaitFor(t, "fabric serve", clitest.Accepts(filepath.Join(dir, fabric.ControlSocketName)))

	ka := make([]byte, proto.TunnelHeaderSize+proto.KeepaliveFrameSize)
	proto.PutVXLAN(ka, 77)
	proto.PutKeepaliveFrame(ka[proto.TunnelHeaderSize:], [6]byte{2, 0, 0, 0, 0, 9}, 1)
	laddr, _ := net.ResolveUDPAddr("udp4", local)
	if _, err := rc.WriteToUDP(ka, laddr); err != nil {
		t.Fatal(err)
	}
	clitest.WaitFor(t, "tunnel up", func() bool {
		st, err := fabric.QueryStatus(context.Background(), dir)
		return err == nil && st.Switches[0].Ports[1].State == "up"
	})
	for _, format := range []string{"table", "json"} {
		ios2, _, out, _ := cmdutil.Test()
		f2 := cmdutil.NewFactory(ios2, cmdutil.BuildInfo{})
		f2.SetDefault(cmdutil.KeyOutput, format)
		cmd := clifabric.NewCmdFabric(f2)
		cmd.SetArgs([]string{"status", "--run-dir", dir})
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("status: %v", err)
		}
		if format == "table" {
			clitest.Contains(t, "table", out.String(), "Tunnels", "ENCAP", "vxlan", local, rc.LocalAddr().String(), "77", "up")
			continue
		}
		var st fabric.Status
		if err := json.Unmarshal(out.Bytes(), &st); err != nil {
			t.Fatalf("json: %v\n%s", err, out)
		}
		tun := st.Switches[0].Ports[1].Tunnel
		if tun == nil || tun.Link != "up" || tun.VNI != 77 || tun.KeepalivesRx != 1 || tun.Remote != rc.LocalAddr().String() {
			t.Fatalf("tunnel %+v", tun)
		}
	}
}
