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
