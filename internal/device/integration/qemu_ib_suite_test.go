package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// perftests are the perftest benchmarks (Debian's perftest package)
// that the verbs suite of TestQEMUIB runs between the guests.
var perftests = []string{"ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_atomic_bw", "ib_send_lat"}

// cmTools are the librdmacm examples (Debian's rdmacm-utils) that the
// verbs suite runs last: connections made through rdma_cm and ib_cm.
var cmTools = []string{"rping", "ucmatose", "udaddy"}

// suiteRun is one framed tool run of a guest console: the text between
// "HICAIN-BEGIN name" and "HICAIN-END name rc=N".
type suiteRun struct {
	out string
	rc  int
}

var suiteEnd = regexp.MustCompile(`(?m)^HICAIN-END (\S+) rc=(\d+)\s*$`)

// suiteRuns returns the framed runs of a console by name. A run whose
// end marker is missing is absent.
func suiteRuns(con string) map[string]suiteRun {
	runs := map[string]suiteRun{}
	for _, m := range suiteEnd.FindAllStringSubmatchIndex(con, -1) {
		name := con[m[2]:m[3]]
		rc, _ := strconv.Atoi(con[m[4]:m[5]])
		begin := "HICAIN-BEGIN " + name + "\n"
		i := strings.LastIndex(con[:m[0]], begin)
		if i < 0 {
			continue
		}
		runs[name] = suiteRun{out: con[i+len(begin) : m[0]], rc: rc}
	}
	return runs
}

// withoutSuite is the console without the verbs suite's runs, whose
// tools print the same kind of lines as the pingpong runs around them.
func withoutSuite(con string) string {
	i := strings.Index(con, "HICAIN-BEGIN ")
	j := strings.Index(con, "HICAIN-SUITE-DONE")
	if i < 0 || j < i {
		return con
	}
	return con[:i] + con[j:]
}

// artifactDirs are where the suite's outputs go: a directory of the test
// and, when HINIC_ARTIFACTS is set, a copy under it.
func artifactDirs(t *testing.T) []string {
	t.Helper()
	dirs := []string{filepath.Join(t.TempDir(), "artifacts")}
	if root := os.Getenv("HINIC_ARTIFACTS"); root != "" {
		dirs = append(dirs, filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_")))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dirs
}

// perftestBW is the result line of a perftest bandwidth run:
// "#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]".
var perftestBW = regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$`)

// perftestLat is the result line of ib_send_lat: "#bytes #iterations
// t_min t_max t_typical t_avg t_stdev 99% 99.9%" (usec). t_stdev may be
// -nan: perftest takes the square root of a variance that rounding made
// negative (seen with a 60 ms outlier among 6 ms samples on a loaded
// host; verify.ParseLat skips it too).
var perftestLat = regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+|-?nan)\s+([0-9.]+)\s+([0-9.]+)\s*$`)

// checkVerbsSuite checks the verbs suite of TestQEMUIB from the guest
// consoles, saves each run's output as an artifact and logs the
// headline figures. Every tool must have exited 0 on both guests and
// printed the lines that prove its traffic.
func checkVerbsSuite(t *testing.T, c1, c2 string) {
	runs := [2]map[string]suiteRun{suiteRuns(c1), suiteRuns(c2)}
	dirs := artifactDirs(t)
	for _, d := range dirs {
		for i, con := range []string{c1, c2} {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("console-guest%d.txt", i+1)), []byte(con), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for g, rs := range runs {
			for name, r := range rs {
				f := filepath.Join(d, fmt.Sprintf("%s-guest%d.txt", name, g+1))
				if err := os.WriteFile(f, []byte(r.out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		t.Logf("verbs suite outputs in %s", d)
	}

	get := runGetter(runs)
	peerGID := [2]string{"::ffff:10.42.0.2", "::ffff:10.42.0.1"}
	// pingpong checks an ibv_*_pingpong run on both guests: the peer's
	// GID once per QP, and the traffic both sides count.
	pingpong := func(t *testing.T, name string, qps int, bytes, iters int) {
		for g := range 2 {
			out := get(t, g, name)
			// With -c, ibv_rc_pingpong reports a received buffer
			// that differs from what the peer sent, and exits 0.
			if regexp.MustCompile(`(?i)invalid data`).MatchString(out) {
				t.Errorf("guest %d: %s received corrupted data:\n%s", g+1, name, out)
			}
			re := `remote address: .*GID ` + regexp.QuoteMeta(peerGID[g])
			if n := len(regexp.MustCompile(re).FindAllString(out, -1)); n != qps {
				t.Errorf("guest %d: %s printed %d remote addresses with GID %s, want %d", g+1, name, n,
					peerGID[g], qps)
			}
			m := regexp.MustCompile(fmt.Sprintf(`(?m)^%d bytes in [0-9.]+ seconds = ([0-9.]+) Mbit/sec`, bytes)).
				FindStringSubmatch(out)
			if m == nil || !regexp.MustCompile(fmt.Sprintf(`(?m)^%d iters in [0-9.]+ seconds`, iters)).MatchString(out) {
				t.Errorf("guest %d: %s did not report %d bytes in %d iterations:\n%s", g+1, name, bytes, iters, out)
				continue
			}
			t.Logf("guest %d: %s: %d bytes in %d iterations, %s Mbit/s", g+1, name, bytes, iters, m[1])
		}
	}
	t.Run("rc_pingpong_reverse", func(t *testing.T) {
		// Guest 2 serves, 200 x 4096 bytes each way.
		pingpong(t, "rc-rev", 1, 2*200*4096, 200)
	})
	t.Run("rc_pingpong_inline", func(t *testing.T) {
		// 200 x 64 bytes each way, sent inline and checked (-c).
		pingpong(t, "rc-inline", 1, 2*200*64, 200)
	})
	t.Run("ud_pingpong", func(t *testing.T) {
		// Datagrams through address handles: 200 x 512 bytes each way.
		pingpong(t, "ud", 1, 2*200*512, 200)
	})
	t.Run("srq_pingpong", func(t *testing.T) {
		// 16 RC QPs (the default) on one SRQ, 100 x 4096 bytes.
		pingpong(t, "srq", 16, 2*100*4096, 100)
	})

	measured := 0
	for _, name := range []string{"send_bw", "write_bw", "read_bw", "atomic_bw"} {
		t.Run("ib_"+name, func(t *testing.T) {
			server := get(t, 0, name)
			client, m := perftestBWClient(t, runs, name)
			for g, out := range []string{server, client} {
				if !regexp.MustCompile(`(?m)^\s*remote address: LID`).MatchString(out) ||
					!regexp.MustCompile(`GID: [0-9:]*255:255:10:42:00:0`+strconv.Itoa(2-g)).MatchString(out) {
					t.Errorf("guest %d: ib_%s did not print the peer's RoCE v2 GID:\n%s", g+1, name, out)
				}
			}
			// The client reports the figures (send_bw's server too).
			if m == nil {
				return
			}
			if m[2] != "100" {
				t.Errorf("ib_%s ran %s iterations, want 100", name, m[2])
			}
			// perftest prints MB/s with two decimals: 8-byte atomics
			// below 1,250 op/s print 0.00, so the message rate (six
			// decimals) is what shows that data moved.
			avg, _ := strconv.ParseFloat(m[4], 64)
			if mpps, _ := strconv.ParseFloat(m[5], 64); avg <= 0 && mpps <= 0 {
				t.Errorf("ib_%s average bandwidth %s MB/s, %s Mpps", name, m[4], m[5])
			}
			measured++
			t.Logf("ib_%s: %s bytes x %s: BW peak %s MB/s, average %s MB/s, %s Mpps", name, m[1], m[2], m[3],
				m[4], m[5])
		})
	}
	if measured == 0 {
		t.Error("no ib_*_bw run measured a bandwidth")
	}
	t.Run("ib_send_lat", func(t *testing.T) { checkSendLat(t, get, "") })
	checkCMRuns(t, get)
}

// perftestBWClient checks guest 2's run of perftest bandwidth benchmark
// name (the client, under connectbw) and returns its output and its last
// result row. A client whose clock calibration failed after the transfer
// (calibrationFailed) prints no row and, when its server exited 0 and
// served no more, exits non-zero: that is logged and row is nil. Any
// other non-zero exit, or no row without that message, is an error.
func perftestBWClient(t testing.TB, runs [2]map[string]suiteRun, name string) (out string, row []string) {
	t.Helper()
	r, ok := runs[1][name]
	if !ok {
		t.Fatalf("guest 2: no complete %s run", name)
	}
	rows := perftestBW.FindAllStringSubmatch(r.out, -1)
	switch {
	case rows != nil && r.rc == 0:
		// A retried run holds every attempt: the last row is the run
		// that exited.
		return r.out, rows[len(rows)-1]
	case rows == nil && calibrationFailed(r.out):
		t.Logf("ib_%s: perftest's clock calibration failed on the client (no figures, exit %d)", name, r.rc)
	case rows == nil:
		t.Errorf("ib_%s client printed no result line (exit %d):\n%s", name, r.rc, r.out)
	default:
		t.Errorf("guest 2: %s exited %d:\n%s", name, r.rc, r.out)
	}
	return r.out, nil
}

// runGetter returns a function that gives guest g's (0 or 1) run of
// name from runs, which must have exited 0.
func runGetter(runs [2]map[string]suiteRun) func(t *testing.T, g int, name string) string {
	return func(t *testing.T, g int, name string) string {
		t.Helper()
		r, ok := runs[g][name]
		if !ok {
			t.Fatalf("guest %d: no complete %s run", g+1, name)
		}
		if r.rc != 0 {
			t.Errorf("guest %d: %s exited %d:\n%s", g+1, name, r.rc, r.out)
		}
		return r.out
	}
}

// checkCMRuns checks the librdmacm runs of a guest suite, server on
// guest 1: the connection manager's MADs on QP1 through address handles
// made in atomic context, then RC (rping, 10 validated pings; ucmatose)
// or UD (udaddy) traffic. Each must exit 0 on both guests.
func checkCMRuns(t *testing.T, get func(t *testing.T, g int, name string) string) {
	t.Run("rping", func(t *testing.T) {
		get(t, 0, "rping")
		out := get(t, 1, "rping")
		if n := len(regexp.MustCompile(`(?m)^ping data: `).FindAllString(out, -1)); n != 10 {
			t.Errorf("rping client printed %d \"ping data:\" lines, want 10:\n%s", n, out)
		}
	})
	for _, name := range []string{"ucmatose", "udaddy"} {
		t.Run(name, func(t *testing.T) {
			for g := range 2 {
				if out := get(t, g, name); !regexp.MustCompile(`(?m)^return status 0\s*$`).MatchString(out) {
					t.Errorf("guest %d: %s did not print \"return status 0\":\n%s", g+1, name, out)
				}
			}
		})
	}
}

// checkSendLat checks the two ib_send_lat runs of a guest suite
// (send_lat and send_lat2, 2 bytes x 100, server on guest 1); get returns
// guest g's (0 or 1) output of a run, which must have exited 0. perftest
// times with the cycle counter, calibrated against the clock at start-up;
// on a TCG vCPU the calibration fails now and then ("Correlation
// coefficient r^2: ... < 0.9") and that side prints infinite figures
// although the exchange completed. So every run must complete its 100
// iterations on both sides, a side without figures must show perftest's
// calibration message, and at least one side of one run must measure.
// how qualifies the logged figures (e.g. " by LID").
func checkSendLat(t *testing.T, get func(t *testing.T, g int, name string) string, how string) {
	calib := regexp.MustCompile(`(?m)^\s*2\s+100\s+inf\s`)
	measured := 0
	for _, name := range []string{"send_lat", "send_lat2"} {
		for g := range 2 {
			out := get(t, g, name)
			m := perftestLat.FindStringSubmatch(out)
			if m == nil {
				if !calibrationFailed(out) || !calib.MatchString(out) {
					t.Errorf("guest %d: %s printed no result line:\n%s", g+1, name, out)
				} else {
					t.Logf("guest %d: %s: 100 iterations, perftest's clock calibration failed (no figures)", g+1, name)
				}
				continue
			}
			if m[2] != "100" {
				t.Errorf("guest %d: %s ran %s iterations, want 100", g+1, name, m[2])
			}
			if avg, _ := strconv.ParseFloat(m[6], 64); avg <= 0 {
				t.Errorf("guest %d: %s average latency %s usec", g+1, name, m[6])
			}
			measured++
			t.Logf("guest %d: %s%s: %s bytes x %s: t_min %s, t_typical %s, t_avg %s, 99%% %s usec", g+1, name, how,
				m[1], m[2], m[3], m[5], m[6], m[8])
		}
	}
	if measured == 0 {
		t.Error("no side of either ib_send_lat run measured a latency")
	}
}

// TestPerftestLatLine: the result line parses with a -nan t_stdev, as
// perftest 4.5 printed it in a TestQEMUIB run on a loaded host.
func TestPerftestLatLine(t *testing.T) {
	const line = " 2       100          201.93         60777.25      5969.09  \t       6774.04     \t-nan   \t\t60777.25 \t\t60777.25\n"
	m := perftestLat.FindStringSubmatch(line)
	if m == nil || m[2] != "100" || m[6] != "6774.04" || m[7] != "-nan" {
		t.Fatalf("%q: %q", line, m)
	}
	if perftestLat.MatchString(" 2       100          201.93         60777.25      5969.09  \t       -nan     \t-nan   \t\t60777.25 \t\t60777.25\n") {
		t.Error("a line without an average parsed")
	}
}
