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
}

func (h *scriptHost) Name() string   { return h.name }
func (h *scriptHost) DataIP() string { return "10.42.0.1" }
func (h *scriptHost) Device() string { return "hicain_0" }
func (h *scriptHost) NIC() string    { return "hicain" }

func (h *scriptHost) Run(_ context.Context, cmd string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case strings.HasPrefix(cmd, "ss -Hltn"):
		// Always listening: the port is in the filter.
		return cmd, nil
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
