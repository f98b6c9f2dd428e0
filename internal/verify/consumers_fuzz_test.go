package verify

import "testing"

// FuzzParseConsumers feeds one guest output to every parser of the
// consumer cases: a guest is untrusted, so none may panic, and what each
// accepts must be self-consistent.
func FuzzParseConsumers(f *testing.F) {
	for _, p := range []string{"testdata/mpi/pingpong.txt", "testdata/mpi/allreduce.txt"} {
		f.Add(readFixture(f, p))
	}
	f.Add("#      Transport: rc_verbs\n#         Device: rxe0:1\n")
	f.Add("iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr\n 200,615.000,16168.836,15491.245,3.87,4.03,62,65\n")
	f.Add("provider: verbs\n    fabric: IB-0xfe80000000000000\n    domain: rxe0\n    type: FI_EP_MSG\n")
	f.Add("bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n64k     10      =10      1.2m        0.01s     97.31     673.47       0.00\n")
	f.Fuzz(func(t *testing.T, out string) {
		if ts, err := ParseUCXInfo(out); err == nil && len(ts) == 0 {
			t.Fatal("ucx_info accepted with no transport")
		}
		if p, err := ParseUCXPerf(out); err == nil && p.Iters <= 0 {
			t.Fatalf("ucx_perftest accepted with %d iterations", p.Iters)
		}
		if fs, err := ParseFiInfo(out); err == nil && len(fs) == 0 {
			t.Fatal("fi_info accepted with no entry")
		}
		if rows, err := ParseFiPingpong(out); err == nil && len(rows) == 0 {
			t.Fatal("fi_pingpong accepted with no row")
		}
		if p, err := ParseMPIPingPong(out); err == nil && len(p.Rows) == 0 {
			t.Fatal("MPI ping-pong accepted with no row")
		}
		if a, err := ParseMPIAllreduce(out); err == nil && len(a.Rows) == 0 {
			t.Fatal("MPI allreduce accepted with no row")
		}
		_ = ucxError(out)
	})
}
