package fabric_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/cli/clitest"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	clifabric "github.com/PacketFive/hinic/internal/cli/fabric"
	"github.com/PacketFive/hinic/internal/deploy"
	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/proto"
)

// TestServeEthernetISL runs `fabric serve` on the fabric config deploy
// rack writes for testdata/racks/two-racks-roce.yaml and passes frames
// between the two guests' ports, one on each switch, across the
// Ethernet inter-switch link, both ways.
func TestServeEthernetISL(t *testing.T) {
	spec, err := filepath.Abs("../../../testdata/racks/two-racks-roce.yaml")
	if err != nil {
		t.Fatal(err)
	}
	isolate(t)
	r, err := deploy.ReadRack(spec)
	if err != nil {
		t.Fatal(err)
	}
	r.RunDir = shortDir(t)
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	// The fabric config carries the rack's metrics address; port 0
	// (which a spec may not give) picks a free one.
	r.Metrics = "127.0.0.1:0"
	conf := filepath.Join(r.RunDir, "fabric.yaml")
	if err := os.WriteFile(conf, deploy.FabricConfig(r), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HINIC_CONFIG", conf) // as deploy rack's --config
	ios, _, _, errOut := cmdutil.Test()
	stop := clitest.Serve(t, clifabric.NewCmdFabric(cmdutil.NewFactory(ios, cmdutil.BuildInfo{})), "serve")
	fabDir := filepath.Join(r.RunDir, deploy.DirFabric)
	clitest.WaitFor(t, "fabric serve", clitest.Accepts(filepath.Join(fabDir, fabric.ControlSocketName)))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func(g deploy.Guest) *portConn {
		c, _, err := fabric.DialPort(ctx, deploy.PortSocket(r, g.Switch, g.Port),
			&proto.HelloFields{Version: 1, LinkLayer: proto.HelloLinkEthernet, Role: proto.HelloRoleNIC, Name: g.Name + "/hicain0"})
		if err != nil {
			t.Fatalf("%s: %v", g.Name, err)
		}
		t.Cleanup(func() { c.Close() })
		return &portConn{t: t, c: c}
	}
	a, b := dial(r.Guests[0]), dial(r.Guests[1])
	// A flood skips ports that are down: wait until both switches have
	// their guest's session up (DialPort returns before they mark it).
	clitest.WaitFor(t, "the guests' ports up", func() bool {
		st, err := fabric.QueryStatus(ctx, fabDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, sw := range st.Switches {
			if sw.Ports[0].State != "up" || sw.Ports[9].State != "up" {
				return false
			}
		}
		return true
	})
	macA := []byte{0x52, 0x54, 0, 0x47, 0, 1}
	macB := []byte{0x52, 0x54, 0, 0x47, 0, 2}
	frame := func(dst, src []byte, n byte) []byte {
		f := make([]byte, 60)
		copy(f, dst)
		copy(f[6:], src)
		f[12], f[13], f[14] = 0x88, 0xb5, n
		return f
	}
	bcast := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	a.send(frame(bcast, macA, 1)) // flooded to sw1 over the link; sw0 and sw1 learn vm-a
	b.expect(frame(bcast, macA, 1))
	b.send(frame(macA, macB, 2)) // known unicast back
	a.expect(frame(macA, macB, 2))
	a.send(frame(macB, macA, 3)) // and forth, both learnt now
	b.expect(frame(macB, macA, 3))

	// The sender counts a frame once its write returns, which may be
	// after the peer has read it.
	var st *fabric.Status
	clitest.WaitFor(t, "the link's counters", func() bool {
		if st, err = fabric.QueryStatus(ctx, fabDir); err != nil {
			t.Fatal(err)
		}
		for _, sw := range st.Switches {
			if p := sw.Ports[9]; p.TxFrames == 0 || p.RxFrames == 0 {
				return false
			}
		}
		return true
	})
	for _, sw := range st.Switches {
		p := sw.Ports[9]
		if p.Num != 10 || p.Kind != "link" || p.State != "up" || p.Link != fabric.LinkEthernet || p.TotalDrops() != 0 {
			t.Errorf("%s port 10: %+v", sw.Name, p)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), `msg="metrics serving" url=http://127.0.0.1:`) {
		t.Errorf("the fabric did not take the rack's metrics address:\n%s", errOut)
	}
}

type portConn struct {
	t interface {
		Helper()
		Fatalf(string, ...any)
	}
	c interface {
		Write([]byte) (int, error)
		Read([]byte) (int, error)
		SetReadDeadline(time.Time) error
	}
}

func (p *portConn) send(f []byte) {
	p.t.Helper()
	if _, err := p.c.Write(f); err != nil {
		p.t.Fatalf("send: %v", err)
	}
}

func (p *portConn) expect(want []byte) {
	p.t.Helper()
	buf := make([]byte, 2048)
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := p.c.Read(buf)
	if err != nil || !bytes.Equal(buf[:n], want) {
		p.t.Fatalf("got % x (%v), want % x", buf[:n], err, want)
	}
}
