package verify

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// rpingHost answers the rping case's commands with recorded outputs:
// the CM listener is always there, the server prints srv and ends with
// srvErr, the client prints cli and ends with cliErr.
type rpingHost struct {
	scriptHost
	srv, cli       string
	srvErr, cliErr error
}

func (h *rpingHost) Run(ctx context.Context, cmd string) (string, error) {
	switch {
	case strings.HasPrefix(cmd, "rdma res show cm_id"):
		// The gate's first port (sshGate.port 18500, plus one).
		return "link hicain_0/1 cm-idn 3 state LISTEN ps TCP pid 611 comm rping src-addr 10.42.0.1:18501 dst-addr 0.0.0.0:0\n", nil
	case strings.Contains(cmd, "rping -s"):
		return h.srv, h.srvErr
	case strings.Contains(cmd, "rping -c"):
		return h.cli, h.cliErr
	}
	return h.scriptHost.Run(ctx, cmd)
}

// TestRPingExitRace: a client that verified every ping and then failed
// only in rping's exit race (recorded on a HiNIC rack) passes, with the
// race named; any other failure still fails the case.
func TestRPingExitRace(t *testing.T) {
	cli := readFixture(t, "testdata/hicain/rping.exitrace.client.txt")
	srv := readFixture(t, "testdata/hicain/rping.exitrace.server.txt")
	exit255 := errors.New("Process exited with status 255")
	fewer := strings.Replace(cli, "ping data: rdma-ping-42:", "lost: ", 1)
	for _, tc := range []struct {
		name           string
		cli            string
		cliErr, srvErr error
		want           string // "" for a pass
	}{
		{"exit race", cli, exit255, nil, ""},
		{"server failed too", cli, exit255, errors.New("Process exited with status 1"), "client: Process exited with status 255"},
		{"a ping missing", fewer, exit255, nil, "client: Process exited with status 255"},
		{"another error", strings.ReplaceAll(cli, "rdma_get_cm_event: Bad file descriptor", "cq completion failed status 5"),
			exit255, nil, "client: Process exited with status 255"},
		{"clean run", strings.ReplaceAll(cli, "rdma_get_cm_event: Bad file descriptor\n", ""), nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &rpingHost{scriptHost: scriptHost{name: "vm-a"}, srv: srv, srvErr: tc.srvErr}
			c := &rpingHost{scriptHost: scriptHost{name: "vm-b"}, cli: tc.cli, cliErr: tc.cliErr}
			g := &sshGate{srv: s, cli: c, o: SSHOptions{Timeout: 10 * time.Second}, port: 18500}
			out, err := g.rping(100)(context.Background())
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rping: %v", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("rping: %v, want an error starting %q", err, tc.want)
			case tc.want == "":
				race := strings.Contains(out.Detail, rpingRaceNote)
				if race != (tc.cliErr != nil) || out.Unit != "pings/s" || out.Figure <= 0 {
					t.Errorf("outcome %+v", out)
				}
			}
		})
	}
}
