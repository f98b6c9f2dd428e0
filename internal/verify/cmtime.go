package verify

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CMTimeRuns is how many single-connection cmtime runs the cmtime case
// makes; its figure is their median.
const CMTimeRuns = 5

// CMTimeStep is one row of cmtime's table (rdmacm-utils 44): the step's
// time over all connections, the slowest and the fastest connection, and
// the total divided by the connections.
type CMTimeStep struct {
	TotalMs, MaxMs, MinUs, UsPerConn float64
}

// CMTime is one cmtime client run: its steps by name ("create id", "bind
// addr", "resolve addr", "resolve route", "create qp", "connect",
// "disconnect", "destroy").
type CMTime map[string]CMTimeStep

// cmtimeSteps are the steps cmtime 44 prints, in its order; "bind addr"
// only with -b.
var cmtimeSteps = []string{"create id", "bind addr", "resolve addr", "resolve route", "create qp", "connect", "disconnect", "destroy"}

var (
	cmtimeHeader = regexp.MustCompile(`(?m)^step\s+total ms\s+max ms\s+min us\s+us / conn\s*$`)
	cmtimeRow    = regexp.MustCompile(`^([a-z ]+?)\s*:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$`)
)

// ParseCMTime reads every table cmtime printed in out (one per run, in
// order). A run's table must hold the steps from "create id" to
// "destroy" with finite, non-negative figures; the rows that follow a
// header up to the first line that is not a row make one table.
func ParseCMTime(out string) ([]CMTime, error) {
	var runs []CMTime
	for _, loc := range cmtimeHeader.FindAllStringIndex(out, -1) {
		t := CMTime{}
		for _, line := range strings.Split(out[loc[1]:], "\n")[1:] {
			m := cmtimeRow.FindStringSubmatch(strings.TrimRight(line, "\r"))
			if m == nil || !slices.Contains(cmtimeSteps, m[1]) {
				break
			}
			var v [4]float64
			for i := range v {
				f, err := strconv.ParseFloat(m[2+i], 64)
				if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
					return nil, fmt.Errorf("verify: cmtime %s: figure %q", m[1], m[2+i])
				}
				v[i] = f
			}
			if _, dup := t[m[1]]; dup {
				return nil, fmt.Errorf("verify: cmtime: step %q twice in one table", m[1])
			}
			t[m[1]] = CMTimeStep{TotalMs: v[0], MaxMs: v[1], MinUs: v[2], UsPerConn: v[3]}
		}
		for _, s := range cmtimeSteps {
			if _, ok := t[s]; !ok && s != "bind addr" {
				return nil, fmt.Errorf("verify: cmtime table %d has no %q step", len(runs)+1, s)
			}
		}
		runs = append(runs, t)
	}
	if len(runs) == 0 {
		return nil, ErrNoResult
	}
	return runs, nil
}

// cmtime runs rdmacm-utils' cmtime, the RDMA CM's own timing test, runs
// times, one RC connection each: the time from rdma_connect to
// ESTABLISHED (CM REQ, REP and RTU, with the QPs' transitions on both
// sides) is the figure, the median over the runs. Address and route
// resolution, QP creation and disconnection are given in the detail.
// Timed inside the tool, so the guest's process start and device
// discovery, which ucmatose's figure includes, do not count.
//
// cmtime 44's server serves one client run and never exits (a second
// run's connection is rejected: its server fails to create the QP), so
// each run gets a server of its own, stopped after the client. Its
// client exits 0 after a rejected or failed connection: the output's
// event and failure lines are what tell.
func (g *sshGate) cmtime(runs int) func(context.Context) (Outcome, error) {
	return func(ctx context.Context) (Outcome, error) {
		ctx, cancel := context.WithTimeout(ctx, time.Duration(runs)*(g.o.Timeout+15*time.Second))
		defer cancel()
		var srvOuts, cliOuts []string
		defer func() {
			g.save("cmtime", "server", strings.Join(srvOuts, ""))
			g.save("cmtime", "client", strings.Join(cliOuts, ""))
		}()
		for range runs {
			srvOut, cliOut, err := g.cmtimeRun(ctx)
			srvOuts, cliOuts = append(srvOuts, srvOut), append(cliOuts, cliOut)
			if err != nil {
				return Outcome{}, err
			}
		}
		tables, err := ParseCMTime(strings.Join(cliOuts, ""))
		if err != nil {
			return Outcome{}, err
		}
		if len(tables) != runs {
			return Outcome{}, fmt.Errorf("cmtime: %d tables for %d runs", len(tables), runs)
		}
		steps := map[string][]float64{}
		for _, t := range tables {
			for name, s := range t {
				steps[name] = append(steps[name], s.UsPerConn)
			}
		}
		connect := median(steps["connect"])
		if connect <= 0 {
			return Outcome{}, fmt.Errorf("cmtime: connect took %v µs", connect)
		}
		return Outcome{Figure: connect, Unit: "µs",
			Detail: fmt.Sprintf("median of %d runs of 1 RC connection: connect %.0f µs; resolve addr %.0f, resolve route %.0f, create qp %.0f, disconnect %.0f µs",
				runs, connect, median(steps["resolve addr"]), median(steps["resolve route"]), median(steps["create qp"]), median(steps["disconnect"]))}, nil
	}
}

// cmtimeFailure is a line cmtime prints when a step failed: an
// unexpected CM event ("event: RDMA_CM_EVENT_REJECTED, error: 28") or a
// failed call ("failure creating qp: ...", "RDMA_CM_EVENT_ADDR_ERROR").
var cmtimeFailure = regexp.MustCompile(`(?m)^(?:event: .*error: -?\d+|failure .*|RDMA_CM_EVENT_\w+_ERROR.*|getaddrinfo error.*|getrdmaaddr error.*)$`)

// cmtimeRun starts a cmtime server on a port of its own, runs one
// single-connection client against it, stops the server and returns both
// outputs.
func (g *sshGate) cmtimeRun(ctx context.Context) (string, string, error) {
	g.port++
	port := g.port
	secs := int(g.o.Timeout.Seconds())
	srvDone := make(chan runResult, 1)
	go func() {
		out, err := g.srv.Run(ctx, fmt.Sprintf("timeout -s KILL %d cmtime -b %s -p %d", secs, g.srv.DataIP(), port))
		srvDone <- runResult{out, err}
	}()
	stop := func() string {
		_, _ = g.srv.Run(context.WithoutCancel(ctx), "pkill -x cmtime; true")
		select {
		case r := <-srvDone:
			return r.out
		case <-time.After(10 * time.Second):
			return ""
		}
	}
	if exited, err := g.awaitListening(ctx, port, cmListening, srvDone); err != nil {
		if exited != nil {
			return exited.out, "", fmt.Errorf("cmtime: %w", err)
		}
		return stop(), "", fmt.Errorf("cmtime: %w", err)
	}
	cliOut, err := g.cli.Run(ctx, fmt.Sprintf("timeout -s KILL %d cmtime -s %s -b %s -p %d -c 1", secs, g.srv.DataIP(), g.cli.DataIP(), port))
	srvOut := stop()
	if err != nil {
		return srvOut, cliOut, unsupportedIf(fmt.Errorf("cmtime: client: %w: %s", err, lastLine(cliOut)), cliOut)
	}
	if m := cmtimeFailure.FindString(cliOut + srvOut); m != "" {
		return srvOut, cliOut, fmt.Errorf("cmtime: %s", m)
	}
	return srvOut, cliOut, nil
}
