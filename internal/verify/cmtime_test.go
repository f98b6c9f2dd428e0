package verify

import (
	"context"
	"errors"
	"math"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// cmtimeRuns reads a saved client output of the cmtime case (five runs
// in TCG guests, -c 1 with -b) and splits it into runs.
func cmtimeRuns(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, r := range strings.SplitAfter(string(b), "destroy      :") {
		if i := strings.IndexByte(r, '\n'); i >= 0 && len(runs) > 0 {
			runs[len(runs)-1] += r[:i+1]
			r = r[i+1:]
		}
		if strings.TrimSpace(r) != "" {
			runs = append(runs, r)
		}
	}
	return runs
}

func TestParseCMTime(t *testing.T) {
	b, err := os.ReadFile("testdata/hicain/cmtime.client.txt")
	if err != nil {
		t.Fatal(err)
	}
	runs, err := ParseCMTime(string(b))
	if err != nil || len(runs) != 5 {
		t.Fatalf("%d runs, %v", len(runs), err)
	}
	if s := runs[0]["connect"]; s != (CMTimeStep{TotalMs: 61.58, MaxMs: 60.51, MinUs: 60513, UsPerConn: 61582}) {
		t.Errorf("connect %+v", s)
	}
	if runs[4]["connect"].UsPerConn != 87280 || runs[0]["bind addr"].UsPerConn == 0 {
		t.Errorf("runs %+v", runs)
	}
	one := cmtimeRuns(t, "testdata/rxe/cmtime.client.txt")[0]
	// Without -b cmtime leaves out "bind addr"; any other step missing
	// is a broken table.
	noBind := regexp.MustCompile(`(?m)^bind addr .*\n`).ReplaceAllString(one, "")
	if r, err := ParseCMTime(noBind); err != nil || len(r) != 1 {
		t.Errorf("no bind addr: %v", err)
	}
	if _, err := ParseCMTime(strings.Replace(one, "connect      :", "connected    :", 1)); err == nil || !strings.Contains(err.Error(), `no "connect" step`) {
		t.Errorf("no connect step: %v", err)
	}
	if _, err := ParseCMTime(regexp.MustCompile(`(?m)^(connect +:.*) [0-9.]+$`).ReplaceAllString(one, "$1 -nan")); err == nil {
		t.Error("a NaN figure was accepted")
	}
	if _, err := ParseCMTime(strings.Replace(one, "destroy      :", "connect      :", 1)); err == nil {
		t.Error("a step given twice was accepted")
	}
	if _, err := ParseCMTime("connecting\nfailure rconnecting: Connection refused\n"); !errors.Is(err, ErrNoResult) {
		t.Errorf("no table: %v", err)
	}
}

// cmtimeHost plays cmtime on a guest: its server listens until pkill
// stops it; its client answers with the next saved run.
type cmtimeHost struct {
	mu       sync.Mutex
	ports    []string // the ports servers listened on
	stop     chan struct{}
	runs     []string
	clients  int
	stops    int
	server   string // the server's output
	listenOK bool
}

func (h *cmtimeHost) Name() string   { return "vm" }
func (h *cmtimeHost) DataIP() string { return "10.42.0.1" }
func (h *cmtimeHost) Device() string { return "hicain_0" }
func (h *cmtimeHost) NIC() string    { return "hicain" }
func (h *cmtimeHost) Link() string   { return LinkEth }

func (h *cmtimeHost) Run(ctx context.Context, cmd string) (string, error) {
	h.mu.Lock()
	switch {
	case strings.Contains(cmd, "cmtime -b"):
		port := cmd[strings.LastIndex(cmd, " ")+1:]
		h.ports = append(h.ports, port)
		stop := make(chan struct{})
		h.stop, h.listenOK = stop, true
		out := h.server
		h.mu.Unlock()
		select {
		case <-stop:
		case <-ctx.Done():
		}
		return out, nil
	case strings.HasPrefix(cmd, "rdma res show cm_id"):
		defer h.mu.Unlock()
		if !h.listenOK {
			return "", nil
		}
		return "link hicain_0/1 cm-idn 3 state LISTEN ps TCP pid 611 comm cmtime src-addr 10.42.0.1:" + h.ports[len(h.ports)-1] + " dst-addr 0.0.0.0:0\n", nil
	case strings.HasPrefix(cmd, "pkill -x cmtime"):
		defer h.mu.Unlock()
		h.stops++
		if h.stop != nil {
			close(h.stop)
			h.stop, h.listenOK = nil, false
		}
		return "", nil
	case strings.Contains(cmd, "cmtime -s"):
		defer h.mu.Unlock()
		out := h.runs[min(h.clients, len(h.runs)-1)]
		h.clients++
		return out, nil
	}
	h.mu.Unlock()
	return "", nil
}

// TestCMTimeCase: the cmtime case gives each run a server of its own on
// a port of its own, stops it after the client, and reports the median
// connect time; a run whose connection was rejected (cmtime still exits
// 0: a second client of one server) fails the case with cmtime's line.
func TestCMTimeCase(t *testing.T) {
	srv := &cmtimeHost{}
	cli := &cmtimeHost{runs: cmtimeRuns(t, "testdata/hicain/cmtime.client.txt")}
	if len(cli.runs) != 5 {
		t.Fatalf("%d saved runs", len(cli.runs))
	}
	g := &sshGate{srv: srv, cli: cli, o: DefaultSSHOptions(), port: 18515}
	out, err := g.cmtime(CMTimeRuns)(context.Background())
	// The saved connects: 61582, 57995, 53122, 64510, 87280 µs.
	if err != nil || out.Figure != 61582 || out.Unit != "µs" || !strings.Contains(out.Detail, "median of 5 runs") {
		t.Fatalf("%+v, %v", out, err)
	}
	if len(srv.ports) != 5 || srv.stops != 5 || srv.ports[0] == srv.ports[1] || cli.clients != 5 {
		t.Errorf("servers on %v, %d stopped, %d clients", srv.ports, srv.stops, cli.clients)
	}

	rejected := cmtimeRuns(t, "testdata/hicain/cmtime.reused-server.client.txt")
	srv = &cmtimeHost{}
	cli = &cmtimeHost{runs: rejected}
	g = &sshGate{srv: srv, cli: cli, o: DefaultSSHOptions(), port: 18515}
	if _, err := g.cmtime(CMTimeRuns)(context.Background()); err == nil || !strings.Contains(err.Error(), "event: RDMA_CM_EVENT_REJECTED, error: 28") {
		t.Fatalf("rejected second run: %v", err)
	}
	if cli.clients != 2 || srv.stops != 2 {
		t.Errorf("%d clients, %d servers stopped after the rejection", cli.clients, srv.stops)
	}
	b, err := os.ReadFile("testdata/hicain/cmtime.reused-server.server.txt")
	if err != nil {
		t.Fatal(err)
	}
	srv = &cmtimeHost{server: string(b)}
	cli = &cmtimeHost{runs: cmtimeRuns(t, "testdata/hicain/cmtime.client.txt")}
	g = &sshGate{srv: srv, cli: cli, o: DefaultSSHOptions(), port: 18515}
	if _, err := g.cmtime(CMTimeRuns)(context.Background()); err == nil || !strings.Contains(err.Error(), "failure creating qp") {
		t.Fatalf("server failure: %v", err)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// FuzzParseCMTime: cmtime's output comes from a guest; any text parses
// without a panic, and every table it accepts has the steps up to
// "destroy" with finite, non-negative figures.
func FuzzParseCMTime(f *testing.F) {
	for _, file := range []string{"testdata/hicain/cmtime.client.txt", "testdata/rxe/cmtime.client.txt", "testdata/hicain/cmtime.reused-server.client.txt"} {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("step              total ms     max ms     min us  us / conn\nconnect      :  1e400 0 0 0\n")
	f.Fuzz(func(t *testing.T, out string) {
		runs, err := ParseCMTime(out)
		if err != nil {
			return
		}
		for _, r := range runs {
			if _, ok := r["connect"]; !ok {
				t.Fatalf("a table without connect: %+v", r)
			}
			for name, s := range r {
				for _, v := range []float64{s.TotalMs, s.MaxMs, s.MinUs, s.UsPerConn} {
					if v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
						t.Fatalf("%s: %+v", name, s)
					}
				}
			}
		}
	})
}
