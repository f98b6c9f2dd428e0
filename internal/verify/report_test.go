package verify

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"testing"
)

func TestRunOutcomes(t *testing.T) {
	cases := []Case{
		{"ok", func(context.Context) (Outcome, error) { return Outcome{Figure: 12.5, Unit: "MiB/s"}, nil }},
		{"bad", func(context.Context) (Outcome, error) { return Outcome{}, errors.New("data mismatch at byte 7") }},
		{"n/a", func(context.Context) (Outcome, error) { return Outcome{}, fmt.Errorf("atomics: %w", ErrUnsupported) }},
	}
	var lines []string
	rep := Run(context.Background(), "embedded", cases, func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) })
	if got := []Result{rep.Cases[0].Result, rep.Cases[1].Result, rep.Cases[2].Result}; got[0] != Pass || got[1] != Fail || got[2] != Unsupported {
		t.Fatalf("results %v", got)
	}
	if !rep.Failed() || len(lines) != 6 {
		t.Fatalf("failed=%v lines=%q", rep.Failed(), lines)
	}
	if p, f, u := rep.Counts(); p != 1 || f != 1 || u != 1 {
		t.Fatalf("counts %d %d %d", p, f, u)
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ran := 0
	cases := []Case{
		{"first", func(context.Context) (Outcome, error) { ran++; cancel(); return Outcome{}, nil }},
		{"second", func(context.Context) (Outcome, error) { ran++; return Outcome{}, nil }},
	}
	rep := Run(ctx, "embedded", cases, nil)
	if ran != 1 || rep.Cases[1].Result != Fail {
		t.Fatalf("ran %d, second %v", ran, rep.Cases[1])
	}
}

func TestJUnit(t *testing.T) {
	rep := &Report{Target: "embedded", Cases: []CaseResult{
		{Case: "a", Result: Pass, Figure: 3, Unit: "us"},
		{Case: "b", Result: Fail, Detail: "boom <&>"},
		{Case: "c", Result: Unsupported, Detail: "no atomics"},
	}}
	var b bytes.Buffer
	if err := rep.WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Skipped  int `xml:"skipped,attr"`
		Suite    struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if doc.Tests != 3 || doc.Failures != 1 || doc.Skipped != 1 || doc.Suite.Cases[1].Failure.Message != "boom <&>" {
		t.Fatalf("%+v\n%s", doc, b.String())
	}
}

// TestRunMetered: each case gets the CPU its processes used between the
// readings around it, and a case that moved bytes its CPU per GiB; a
// process that appears or vanishes mid-case is left out.
func TestRunMetered(t *testing.T) {
	readings := []map[string]float64{
		{"fabric": 1, "qemu:a": 10},              // before bw
		{"fabric": 1.5, "qemu:a": 12},            // after bw
		{"fabric": 2, "qemu:a": 12},              // before check
		{"fabric": 2.25, "qemu:b": 1},            // after check: a gone, b new
		{"fabric": 3, "qemu:a": 5, "backend": 1}, // before shrink
		{"fabric": 2, "qemu:a": 6, "backend": 2}, // after shrink: fabric restarted
	}
	n := 0
	meter := func() map[string]float64 { n++; return readings[n-1] }
	cases := []Case{
		{"bw", func(context.Context) (Outcome, error) {
			return Outcome{Figure: 1, Unit: "MiB/s", Bytes: 512 << 20}, nil
		}},
		{"check", func(context.Context) (Outcome, error) { return Outcome{}, nil }},
		{"shrink", func(context.Context) (Outcome, error) { return Outcome{}, errors.New("failed") }},
	}
	rep := RunMetered(context.Background(), "rack:x", cases, nil, meter)
	bw := rep.Cases[0]
	if bw.CPU["fabric"] != 0.5 || bw.CPU["qemu:a"] != 2 || bw.CPUTotal() != 2.5 {
		t.Errorf("bw CPU %v", bw.CPU)
	}
	if bw.CPUPerGiB != 5 || bw.CPUPerGiBBy["qemu:a"] != 4 || bw.CPUPerGiBBy["fabric"] != 1 {
		t.Errorf("bw per GiB %v %v", bw.CPUPerGiB, bw.CPUPerGiBBy)
	}
	check := rep.Cases[1]
	if len(check.CPU) != 1 || check.CPU["fabric"] != 0.25 || check.CPUPerGiB != 0 || check.CPUPerGiBBy != nil {
		t.Errorf("check %+v", check)
	}
	shrink := rep.Cases[2]
	if len(shrink.CPU) != 2 || shrink.CPU["qemu:a"] != 1 || shrink.CPU["backend"] != 1 || shrink.Result != Fail {
		t.Errorf("shrink %+v", shrink)
	}
	if n != 6 {
		t.Errorf("meter read %d times", n)
	}
	if plain := Run(context.Background(), "x", cases[:1], nil); plain.Cases[0].CPU != nil {
		t.Errorf("Run metered: %v", plain.Cases[0].CPU)
	}
}
