package verify

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Comparison is one case of two gate runs side by side: a baseline (for
// example the Soft-RoCE rack) and a candidate (the HiNIC rack).
type Comparison struct {
	Case       string  `json:"case"`
	Unit       string  `json:"unit"`
	Base       float64 `json:"base"`
	BaseResult Result  `json:"base_result"`
	New        float64 `json:"new"`
	NewResult  Result  `json:"new_result"`
	// Ratio is New/Base when both runs passed with a performance figure
	// (Measured), else 0.
	Ratio float64 `json:"ratio"`
	// LowerIsBetter is true for latencies (µs, µs/iter).
	LowerIsBetter bool `json:"lower_is_better"`
	// Gain is how many times better the candidate is: Ratio for rates,
	// 1/Ratio for latencies; below 1 the candidate is worse. 0 when
	// there is no ratio.
	Gain float64 `json:"gain"`
	// BaseCPUPerGiB and NewCPUPerGiB are each run's host CPU seconds
	// per GiB moved (CaseResult.CPUPerGiB), 0 when not metered.
	BaseCPUPerGiB float64 `json:"base_cpu_s_per_gib,omitempty"`
	NewCPUPerGiB  float64 `json:"new_cpu_s_per_gib,omitempty"`
	// Only is OnlyBase or OnlyNew for a case one run has and the
	// other lacks (the GPU cases have no Soft-RoCE counterpart), else
	// empty.
	Only string `json:"only,omitempty"`
}

// Values of Comparison.Only.
const (
	OnlyBase = "base"
	OnlyNew  = "new"
)

// LowerIsBetter reports whether a smaller figure in unit is better.
func LowerIsBetter(unit string) bool {
	return unit == "µs" || unit == "µs/iter" || unit == "ms" || unit == "s"
}

// Measured reports whether figures in unit measure performance (a rate or
// a time), so that two runs' figures have a meaningful ratio; counts of
// what a case checked ("MiB checked", "captures", "devices") do not.
func Measured(unit string) bool {
	return LowerIsBetter(unit) || strings.HasSuffix(unit, "/s") || unit == UnitOfMemcpy
}

// Compare lines up the cases of base and cand by name, in base's order
// followed by the cases only cand has.
func Compare(base, cand *Report) []Comparison {
	byName := map[string]CaseResult{}
	for _, c := range cand.Cases {
		byName[c.Case] = c
	}
	seen := map[string]bool{}
	var out []Comparison
	add := func(b, n CaseResult, hasB, hasN bool) {
		c := Comparison{Case: b.Case, Unit: b.Unit}
		if !hasB {
			c.Case, c.Unit = n.Case, n.Unit
		}
		if hasB {
			c.Base, c.BaseResult, c.BaseCPUPerGiB = b.Figure, b.Result, b.CPUPerGiB
		}
		if hasN {
			c.New, c.NewResult, c.NewCPUPerGiB = n.Figure, n.Result, n.CPUPerGiB
			if c.Unit == "" {
				c.Unit = n.Unit
			}
		}
		switch {
		case !hasB:
			c.Only = OnlyNew
		case !hasN:
			c.Only = OnlyBase
		}
		c.LowerIsBetter = LowerIsBetter(c.Unit)
		if hasB && hasN && b.Result == Pass && n.Result == Pass && Measured(b.Unit) && b.Unit == n.Unit &&
			b.Figure > 0 && n.Figure > 0 {
			c.Ratio = n.Figure / b.Figure
			c.Gain = c.Ratio
			if c.LowerIsBetter {
				c.Gain = 1 / c.Ratio
			}
		}
		out = append(out, c)
	}
	for _, b := range base.Cases {
		n, ok := byName[b.Case]
		seen[b.Case] = true
		add(b, n, true, ok)
	}
	for _, n := range cand.Cases {
		if !seen[n.Case] {
			add(CaseResult{}, n, false, true)
		}
	}
	return out
}

// ReadReport reads a gate report as `hinic verify e2e` writes it: the
// whole report (--json FILE), the array of cases (-o json), or one case
// per line.
func ReadReport(r io.Reader) (*Report, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("verify: empty report")
	}
	switch b[0] {
	case '[':
		var cases []CaseResult
		if err := json.Unmarshal(b, &cases); err != nil {
			return nil, fmt.Errorf("verify: report: %w", err)
		}
		return &Report{Cases: cases}, nil
	case '{':
		var rep Report
		if err := json.Unmarshal(b, &rep); err == nil && rep.Cases != nil {
			return &rep, nil
		}
		// One case per line.
		rep = Report{}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			var c CaseResult
			if err := json.Unmarshal([]byte(line), &c); err != nil || c.Case == "" {
				return nil, fmt.Errorf("verify: report line %d is neither a report nor a case", n)
			}
			rep.Cases = append(rep.Cases, c)
		}
		return &rep, sc.Err()
	}
	return nil, fmt.Errorf("verify: a report is JSON (an object, an array of cases or one case per line)")
}
