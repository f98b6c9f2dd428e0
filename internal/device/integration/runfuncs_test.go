package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestConnectBW runs the guests' connectbw on the host against a fake
// perftest client that plays a script of attempts: "refused" (no server
// yet or any more), "calib" (the transfer ran, then perftest's clock
// calibration failed, exit 1), "fail" (connected, failed otherwise,
// exit 2) and "ok". It checks the status connectbw ends with and how
// many attempts it made.
func TestConnectBW(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   []string // attempt i plays script[min(i, len-1)]
		rc       int
		attempts int
	}{
		// The server exited 0 after the client's calibration failed:
		// ten more tries find nothing, and the client ends then.
		{"server gone", []string{"refused", "calib", "refused"}, 1, 12},
		// The server failed too and serves again: the client runs again.
		{"server back", []string{"calib", "refused", "refused", "ok"}, 0, 4},
		{"first try", []string{"ok"}, 0, 1},
		// Without a calibration failure, connect's 30 tries.
		{"never", []string{"refused"}, 1, 30},
		{"other failure", []string{"fail"}, 2, 30},
		// A later failure of another kind does not count as no server.
		{"calib then fail", []string{"calib", "fail"}, 2, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, "script")
			if err := os.WriteFile(script, []byte(strings.Join(tc.script, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			fake := filepath.Join(dir, "ib_send_bw")
			// $1 is the address connectbw appends.
			if err := os.WriteFile(fake, []byte(`#!/bin/sh
[ "$1" = 10.43.0.1 ] || { echo "peer $1"; exit 9; }
n=$(cat `+dir+`/n 2>/dev/null || echo 0)
echo $((n + 1)) > `+dir+`/n
last=$(wc -l < `+script+`)
i=$((n + 1)); [ $i -gt $last ] && i=$last
case $(sed -n "${i}p" `+script+`) in
refused) echo "Couldn't connect to $1:18602" >&2; exit 1;;
calib) echo " remote address: LID 0x01"; echo "Correlation coefficient r^2: 0.85 < 0.9"; echo "Can't produce a report"; exit 1;;
fail) echo " remote address: LID 0x01"; echo "Failed to complete run_iter" >&2; exit 2;;
ok) echo " 65536 100 1.00 1.00 0.000016"; exit 0;;
esac
`), 0o755); err != nil {
				t.Fatal(err)
			}
			// The guests' /tmp is the test's directory; sleep does not
			// wait.
			sh := strings.ReplaceAll(guestRunFuncs, "/tmp/", dir+"/") +
				"sleep() { :; }\ntmo=10 peer=10.43.0.1\nconnectbw bw " + fake + "\n"
			out, err := exec.Command("sh", "-c", sh).CombinedOutput()
			if err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			runs := suiteRuns(string(out))
			r, ok := runs["bw"]
			if !ok {
				t.Fatalf("no framed run:\n%s", out)
			}
			if r.rc != tc.rc {
				t.Errorf("rc %d, want %d:\n%s", r.rc, tc.rc, r.out)
			}
			n, err := os.ReadFile(filepath.Join(dir, "n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(n)); got != strconv.Itoa(tc.attempts) {
				t.Errorf("%s attempts, want %d:\n%s", got, tc.attempts, out)
			}
		})
	}
}

// TestPerftestBWClient: a client run without figures passes only when
// perftest's calibration failed; a non-zero exit with figures does not.
func TestPerftestBWClient(t *testing.T) {
	const row = " 65536      100          1.00               0.90               0.000014\n"
	const calib = " remote address: LID 0x01\nCorrelation coefficient r^2: 0.85 < 0.9\nCan't produce a report\n"
	for _, tc := range []struct {
		name    string
		r       suiteRun
		row     bool
		failure bool
	}{
		{"figures", suiteRun{out: row}, true, false},
		{"retried", suiteRun{out: calib + row}, true, false},
		{"calibration, server gone", suiteRun{out: calib + "Couldn't connect to 10.43.0.1:18602\n", rc: 1}, false, false},
		{"no row", suiteRun{out: " remote address: LID 0x01\n", rc: 0}, false, true},
		{"no row, failed", suiteRun{out: "Couldn't connect to 10.43.0.1:18602\n", rc: 1}, false, true},
		{"row, failed", suiteRun{out: row, rc: 1}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &recordTB{TB: t}
			var m []string
			done := make(chan struct{})
			go func() { // Fatalf ends the goroutine
				defer close(done)
				_, m = perftestBWClient(rt, [2]map[string]suiteRun{nil, {"send_bw": tc.r}}, "send_bw")
			}()
			<-done
			if (m != nil) != tc.row || rt.failed != tc.failure {
				t.Errorf("row %v, failed %v; want %v, %v", m != nil, rt.failed, tc.row, tc.failure)
			}
		})
	}
}

// recordTB records whether a check failed instead of failing the test.
type recordTB struct {
	testing.TB
	failed bool
}

func (r *recordTB) Helper()               {}
func (r *recordTB) Logf(string, ...any)   {}
func (r *recordTB) Errorf(string, ...any) { r.failed = true }
func (r *recordTB) Fatalf(string, ...any) { r.failed = true; runtime.Goexit() }
