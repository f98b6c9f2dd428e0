package verify

import (
	"os"
	"strings"
	"testing"
)

func readFixture(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseMPIPingPong(t *testing.T) {
	out := readFixture(t, "testdata/mpi/pingpong.txt")
	p, err := ParseMPIPingPong(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rows) != 11 || p.Rows[0].Bytes != 1 || p.Rows[10].Bytes != 1<<20 || p.Rows[10].Iters != 10 || p.Rows[10].BWMiBs != 73.534 {
		t.Errorf("rows %+v", p.Rows)
	}
	for name, bad := range map[string]string{
		"empty":     "",
		"truncated": strings.Replace(out, "pingpong ok\n", "", 1),
		"mismatch":  strings.Replace(out, "pingpong ok", "pingpong MISMATCH rank 1: 4-byte message 3 from rank 0, byte 2 is 0x00, want 0x17", 1),
		"no rows":   "pingpong ok\n",
	} {
		if _, err := ParseMPIPingPong(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseMPIAllreduce(t *testing.T) {
	out := readFixture(t, "testdata/mpi/allreduce.txt")
	a, err := ParseMPIAllreduce(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Rows) != 9 || a.Rows[8].Count != 65536 || a.Rows[8].Bytes != 524288 || a.Rows[8].BusBWMiBs != 251.707 {
		t.Errorf("rows %+v", a.Rows)
	}
	for name, bad := range map[string]string{
		"empty":     "",
		"truncated": strings.Replace(out, "allreduce ok\n", "", 1),
		"failed":    strings.Replace(out, "allreduce ok", "allreduce FAILED: 3 wrong elements", 1),
		"mismatch":  "allreduce MISMATCH rank 1: count 4 iter 0 element 2 is 7, want 9\n" + out,
	} {
		if _, err := ParseMPIAllreduce(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestCommonPrefix(t *testing.T) {
	for _, tt := range []struct{ a, b, want string }{
		{"10.43.0.1", "10.43.0.2", "10.43.0.0/30"},
		{"10.42.0.1", "10.42.0.200", "10.42.0.0/24"},
		{"10.0.0.1", "10.0.0.1", "10.0.0.1/32"},
		{"10.1.0.1", "192.168.0.1", "0.0.0.0/0"},
	} {
		got, err := commonPrefix(tt.a, tt.b)
		if err != nil || got != tt.want {
			t.Errorf("%s %s: %q %v, want %q", tt.a, tt.b, got, err, tt.want)
		}
	}
	for _, bad := range [][2]string{{"fe80::1", "10.0.0.1"}, {"x", "10.0.0.1"}} {
		if _, err := commonPrefix(bad[0], bad[1]); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
