package verify

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
)

// scriptHost is a Host whose commands answer from a script: the SSH
// gate's own logic (pairing, parsing, reruns) under test, without guests.
type scriptHost struct {
	name string
	mu   sync.Mutex
	lat  []string // successive outputs of ib_send_lat
	runs int
	// devinfo is the output of ibv_devinfo.
	devinfo string
}

func (h *scriptHost) Name() string   { return h.name }
func (h *scriptHost) DataIP() string { return "10.42.0.1" }
func (h *scriptHost) Device() string { return "hicain_0" }
func (h *scriptHost) NIC() string    { return "hicain" }
func (h *scriptHost) Link() string   { return LinkEth }

func (h *scriptHost) Run(_ context.Context, cmd string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case strings.HasPrefix(cmd, "ss -Hltn"):
		// Always listening: the port is in the filter.
		return cmd, nil
	case strings.HasPrefix(cmd, "ibv_devinfo"):
		return h.devinfo, nil
	case strings.Contains(cmd, "ib_send_lat"):
		out := h.lat[min(h.runs, len(h.lat)-1)]
		h.runs++
		return out, nil
	}
	return "", nil
}

func TestSSHLatencyRerunsAfterClockCalibration(t *testing.T) {
	bad, err := os.ReadFile("testdata/hicain/ib_send_lat.calibration.server.txt")
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile("testdata/rxe/ib_send_lat.client.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		outs     []string
		wantRuns int
		wantErr  bool
	}{
		{"first run good", []string{string(good)}, 1, false},
		{"one failed calibration", []string{string(bad), string(good)}, 2, false},
		{"calibration keeps failing", []string{string(bad), string(bad), string(bad), string(good)}, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &scriptHost{name: "a", lat: []string{"server"}}
			cli := &scriptHost{name: "b", lat: tc.outs}
			g := &sshGate{srv: srv, cli: cli, o: DefaultSSHOptions(), gidSrv: 1, gidCli: 1}
			out, err := g.perf("ib_send_lat", "-n 1000", true)(context.Background())
			if cli.runs != tc.wantRuns {
				t.Errorf("client ran %d times, want %d", cli.runs, tc.wantRuns)
			}
			if tc.wantErr {
				if err == nil {
					t.Fatalf("no error after %d failed calibrations: %+v", cli.runs, out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.Figure != 2721.65 || out.Unit != "µs" {
				t.Errorf("outcome %+v", out)
			}
			if rerun := strings.Contains(out.Detail, "calibration"); rerun != (tc.wantRuns > 1) {
				t.Errorf("detail %q", out.Detail)
			}
		})
	}
}

func TestListeningChecks(t *testing.T) {
	// iproute2 6.1's `rdma res show cm_id` (rdma/res-cmid.c): one line
	// per CM ID.
	cm := "link rxe0/1 cm-idn 3 state LISTEN ps TCP pid 611 comm rping src-addr 10.42.0.1:18530 dst-addr 0.0.0.0:0\n" +
		"link rxe0/1 cm-idn 4 state CONNECT ps TCP pid 612 comm rping src-addr 10.42.0.1:18531 dst-addr 10.42.0.2:40000\n"
	if !cmListening.listen(cm, 18530) {
		t.Error("LISTEN on 18530 not seen")
	}
	for _, port := range []int{18531, 1853, 8530} {
		if cmListening.listen(cm, port) {
			t.Errorf("port %d seen as listening", port)
		}
	}
	if !tcpListening.listen("LISTEN 0 1 0.0.0.0:18515 0.0.0.0:*", 18515) || tcpListening.listen("", 18515) {
		t.Error("tcp check")
	}
}

func TestTimed(t *testing.T) {
	cmd := timed("rping -c -a 10.0.0.1 -p {port}")
	if !strings.HasPrefix(cmd, "sh -c '") || !strings.Contains(cmd, "rping -c -a 10.0.0.1 -p {port}; rc=$?") ||
		!strings.Contains(cmd, "$(date +%s%N)") {
		t.Errorf("timed: %s", cmd)
	}
	if s, err := elapsed("ping data: x\nHINIC-ELAPSED-NS 2500000000\n"); err != nil || s != 2.5 {
		t.Errorf("elapsed %v %v", s, err)
	}
	if _, err := elapsed("no time"); err == nil {
		t.Error("no error without a time")
	}
}

// TestDevinfoActiveMTU: the ibv_devinfo case reports each host's active
// MTU and, given the MTU the rack's netdev MTU should give, fails a host
// that shows another.
func TestDevinfoActiveMTU(t *testing.T) {
	mtu4096 := strings.Replace(devinfo, "active_mtu:\t\t1024 (3)", "active_mtu:\t\t4096 (5)", 1)
	for _, tc := range []struct {
		name         string
		srv, cli     string
		want         map[string]int
		wantErr      string
		wantInDetail string
	}{
		{"not checked", devinfo, devinfo, nil, "", "a: hicain_0 port 1 ACTIVE Ethernet, active MTU 1024"},
		{"both 4096", mtu4096, mtu4096, map[string]int{"a": 4096, "b": 4096}, "", "b: hicain_0 port 1 ACTIVE Ethernet, active MTU 4096"},
		{"client short", mtu4096, devinfo, map[string]int{"a": 4096, "b": 4096}, "b: port 1: active MTU 1024, want 4096", ""},
		{"server short", devinfo, mtu4096, map[string]int{"a": 4096}, "a: port 1: active MTU 1024, want 4096", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultSSHOptions()
			o.ActiveMTU = tc.want
			g := &sshGate{srv: &scriptHost{name: "a", devinfo: tc.srv}, cli: &scriptHost{name: "b", devinfo: tc.cli},
				o: o, gidSrv: -1, gidCli: -1, gid6Srv: -1, gid6Cli: -1}
			out, err := g.devinfo(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.Detail, tc.wantInDetail) {
				t.Errorf("detail %q, want %q in it", out.Detail, tc.wantInDetail)
			}
		})
	}
}
