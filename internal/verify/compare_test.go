package verify

import (
	"math"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	base := &Report{Cases: []CaseResult{
		{Case: "ibv_devices", Result: Pass},
		{Case: "ib_send_bw", Result: Pass, Figure: 6.4, Unit: "MiB/s"},
		{Case: "ib_send_lat", Result: Pass, Figure: 730, Unit: "µs"},
		{Case: "ud_multicast", Result: Unsupported},
		{Case: "ib_read_bw", Result: Fail},
		{Case: "integrity", Result: Pass, Figure: 8, Unit: "MiB checked"},
	}}
	cand := &Report{Cases: []CaseResult{
		{Case: "ib_send_lat", Result: Pass, Figure: 73, Unit: "µs"},
		{Case: "ib_send_bw", Result: Pass, Figure: 64, Unit: "MiB/s"},
		{Case: "ibv_devices", Result: Pass},
		{Case: "ud_multicast", Result: Pass, Figure: 100, Unit: "deliveries/s"},
		{Case: "ib_read_bw", Result: Pass, Figure: 40, Unit: "MiB/s"},
		{Case: "checksums", Result: Pass},
		{Case: "integrity", Result: Pass, Figure: 8, Unit: "MiB checked"},
	}}
	got := Compare(base, cand)
	if len(got) != 7 {
		t.Fatalf("%d rows: %+v", len(got), got)
	}
	want := []struct {
		name  string
		ratio float64
		gain  float64
	}{{"ibv_devices", 0, 0}, {"ib_send_bw", 10, 10}, {"ib_send_lat", 0.1, 10}, {"ud_multicast", 0, 0},
		{"ib_read_bw", 0, 0}, {"integrity", 0, 0}, {"checksums", 0, 0}}
	for i, w := range want {
		c := got[i]
		if c.Case != w.name || math.Abs(c.Ratio-w.ratio) > 1e-9 || math.Abs(c.Gain-w.gain) > 1e-9 {
			t.Errorf("row %d: %+v, want %s ratio %v gain %v", i, c, w.name, w.ratio, w.gain)
		}
	}
	if !got[2].LowerIsBetter || got[1].LowerIsBetter {
		t.Errorf("lower-is-better: %+v %+v", got[1], got[2])
	}
	if got[6].BaseResult != "" || got[6].NewResult != Pass {
		t.Errorf("candidate-only case: %+v", got[6])
	}
}

func TestReadReport(t *testing.T) {
	for name, in := range map[string]string{
		"report": `{"target":"rack rxe","cases":[{"case":"a","result":"pass","figure":1,"unit":"MiB/s"},{"case":"b","result":"fail"}]}`,
		"array":  `[{"case":"a","result":"pass","figure":1,"unit":"MiB/s"},{"case":"b","result":"fail"}]`,
		"lines":  "{\"case\":\"a\",\"result\":\"pass\",\"figure\":1,\"unit\":\"MiB/s\"}\n{\"case\":\"b\",\"result\":\"fail\"}\n",
	} {
		rep, err := ReadReport(strings.NewReader(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(rep.Cases) != 2 || rep.Cases[0].Figure != 1 || rep.Cases[1].Result != Fail {
			t.Errorf("%s: %+v", name, rep.Cases)
		}
	}
	for _, bad := range []string{"", "gate: 15 pass", `{"x":1}`, "[1,2]"} {
		if _, err := ReadReport(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
