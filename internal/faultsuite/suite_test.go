package faultsuite

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/PacketFive/hinic/internal/fabric"
	"github.com/PacketFive/hinic/internal/rack"
	"github.com/PacketFive/hinic/internal/rdma"
)

// suiteOps overrides the size of TestFaultSuite; `make test` runs it
// larger than the default without the race detector.
var suiteOps = flag.Int("faultsuite.ops", 0, "operations per TestFaultSuite run (0: 10,000; 2,000 under -race, 600 with -short)")

func testOps() int {
	switch {
	case *suiteOps > 0:
		return *suiteOps
	case testing.Short():
		return 600
	case raceEnabled:
		return 2000
	}
	return 10000
}

// testTimeout is the local ACK timeout code of the tests: the default
// (268 ms), 17 (537 ms) under the race detector, which slows the engines
// down several times while they share the machine with the other
// packages' tests.
func testTimeout() uint8 {
	if raceEnabled {
		return 17
	}
	return DefaultTimeout
}

func logReport(t *testing.T, r *Report) {
	t.Helper()
	tot := r.Total
	t.Logf("%d hosts, %d streams: %d ops (%.1f MiB) checked in %v", r.Hosts, r.Streams, r.Checked,
		float64(r.Bytes)/(1<<20), r.Elapsed.Round(1e6))
	t.Logf("faults injected %+v of %d frames (switch dropped %d malformed); engines: retransmits %d (timeouts %d), seq NAKs %d, RNR NAKs %d, read gap retries %d, duplicates %d, read replays %d, atomic replays %d, ICRC drops %d, malformed %d",
		r.Injected, r.FabricFrames, r.SwitchMalformed, tot.Retransmits, tot.RetransmitTimeouts, tot.SeqNAKsReceived,
		tot.RNRNAKsReceived, tot.ReadGapRetries, tot.Duplicates, tot.ReadReplays, tot.AtomicReplays, tot.RxICRCErrors, tot.RxMalformed)
}

// TestFaultSuite runs the suite with the specification's fault rates (1 %
// drop, duplication and reordering, 0.1 % corruption) between two and
// four engines.
func TestFaultSuite(t *testing.T) {
	for _, c := range []struct {
		hosts int
		rnr   bool
		port  string
	}{{2, false, rack.PortSocket}, {4, false, rack.PortSocket}, {2, true, rack.PortSocket},
		{2, false, rack.PortShm}, {4, false, rack.PortShm}} {
		hosts := c.hosts
		t.Run(fmt.Sprintf("hosts=%d,rnr=%v,port=%s", hosts, c.rnr, c.port), func(t *testing.T) {
			r := runFaulty(t, Config{Hosts: hosts, Ops: testOps(), Seed: uint64(hosts), Faults: SpecFaults(),
				Timeout: testTimeout(), RNR: c.rnr, Port: c.port})
			u := r.UD
			t.Logf("datagrams: %d UD + %d multicast sent, %d of %d deliveries, %d lost, %d duplicated, %d stalls",
				u.Sent, u.McastSent, u.Delivered, u.Expected, u.Lost, u.Duplicates, u.Stalls)
			if u.Sent == 0 || u.McastSent == 0 || u.Delivered == 0 || u.Lost != int64(u.Expected)-u.Delivered || u.Lost < 0 {
				t.Fatalf("datagram flows: %+v", u)
			}
			if c.rnr && r.Total.RNRNAKsReceived == 0 {
				t.Fatal("no RNR NAK with receives posted late")
			}
		})
	}
}

// runFaulty runs the suite with faults: every operation checked, some
// fault injected.
func runFaulty(t *testing.T, cfg Config) *Report {
	t.Helper()
	r, err := Run(context.Background(), cfg)
	if r != nil {
		logReport(t, r)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.Checked != r.Ops {
		t.Fatalf("%d of %d ops checked", r.Checked, r.Ops)
	}
	if in := r.Injected; in.Drop+in.Duplicate+in.Reorder+in.Corrupt == 0 {
		t.Fatal("no fault injected")
	}
	return r
}

// TestFaultSuiteControl runs the suite with no faults: nothing may be
// injected and no frame may fail its ICRC.
func TestFaultSuiteControl(t *testing.T) {
	r, err := Run(context.Background(), Config{Hosts: 2, Ops: testOps() / 2, Seed: 5, Timeout: testTimeout()})
	if r != nil {
		logReport(t, r)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.Injected != (fabric.FaultCounts{}) || r.Total.RxICRCErrors != 0 || r.Total.RxMalformed != 0 || r.SwitchMalformed != 0 {
		t.Fatalf("faults without fault injection: %+v, %+v", r.Injected, r.Total)
	}
}

// TestFaultSuiteCatches proves that the checks can fail: each case changes
// one result in memory just before the suite checks it (the first op of
// a kind on any stream) and the run must fail, naming that op and the
// check.
func TestFaultSuiteCatches(t *testing.T) {
	flip := func(st *stream, o *op, mem *rdma.HostMemory, addr uint64) {
		b := make([]byte, 1)
		_ = mem.ReadAt(b, addr+uint64(o.size-1))
		b[0] ^= 0x10
		_ = mem.WriteAt(b, addr+uint64(o.size-1))
	}
	tests := []struct {
		name   string
		kind   Kind
		tamper func(st *stream, o *op, mem *rdma.HostMemory, addr uint64)
		want   string // in the error
		names  bool   // the error names the op
	}{
		{"WRITE data", Write, flip, "data at the target differs at byte", true},
		{"WRITE_IMM data", WriteImm, flip, "data at the target differs at byte", true},
		{"READ data", Read, flip, "data read from offset", true},
		{"SEND data", Send, flip, "data received at host", true},
		{"FETCH_AND_ADD value returned", FetchAdd, func(st *stream, o *op, mem *rdma.HostMemory, addr uint64) {
			_, _ = mem.FetchAndAdd64(addr, 1)
		}, "FETCH_AND_ADD counter", true},
		{"FETCH_AND_ADD counter in memory", FetchAdd, func(st *stream, o *op, mem *rdma.HostMemory, addr uint64) {
			at := st.peerAtomics
			_, _ = at.host.Memory.FetchAndAdd64(at.addr+8*uint64(o.word), 1)
		}, "the sum of its", false},
		{"CMP_AND_SWP value returned", CmpSwap, func(st *stream, o *op, mem *rdma.HostMemory, addr uint64) {
			_ = mem.WriteAt([]byte{1, 2, 3, 4, 5, 6, 7, 8}, addr)
		}, "CMP_AND_SWP word", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu     sync.Mutex
				victim string
			)
			cfg := Config{Hosts: 2, Ops: 400, Seed: 9, Timeout: testTimeout()}
			cfg.tamper = func(st *stream, o *op, mem *rdma.HostMemory, addr uint64) {
				mu.Lock()
				defer mu.Unlock()
				if o.kind != tt.kind || victim != "" {
					return
				}
				victim = fmt.Sprintf("stream %s op %d ", st.name, o.seq)
				tt.tamper(st, o, mem, addr)
			}
			_, err := Run(context.Background(), cfg)
			if victim == "" {
				t.Fatalf("no %v op in the run", tt.kind)
			}
			if err == nil {
				t.Fatalf("%s: tampered with, and the suite passed", victim)
			}
			if !strings.Contains(err.Error(), tt.want) || tt.names && !strings.Contains(err.Error(), victim) {
				t.Fatalf("tampered with %s; the error does not say so: %v", victim, err)
			}
			t.Log(err)
		})
	}
}

// TestFaultSuiteCatchesUD: a datagram changed after it arrived (as a
// silent corruption would) must fail the run, in its payload or in its
// header.
func TestFaultSuiteCatchesUD(t *testing.T) {
	for _, c := range []struct {
		name string
		at   func(d []byte) int
		want string
	}{
		{"payload", func(d []byte) int { return len(d) - 1 }, "never sent"},
		// Another sequence number: caught by the size or the pattern.
		{"sequence", func(d []byte) int { return 15 }, "datagram "},
	} {
		t.Run(c.name, func(t *testing.T) {
			var once sync.Once
			cfg := Config{Hosts: 2, Ops: 400, Seed: 9, Timeout: testTimeout()}
			cfg.tamperUD = func(host int, d []byte) { once.Do(func() { d[c.at(d)] ^= 0x01 }) }
			_, err := Run(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("a changed datagram: %v", err)
			}
			t.Log(err)
		})
	}
}

// TestConfigErrors checks the refused configurations.
func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{{Hosts: 3}, {Ops: -1}, {Window: 100}, {MaxSize: 4},
		{Faults: fabric.FaultsConfig{Drop: 0.9}}, {Mix: Mix{Send: -1}}, {Timeout: 32}, {Restarts: -1}} {
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("%+v: accepted", cfg)
		}
	}
}

// TestFaultSuiteRestart runs the suite with the specification's faults
// while the fabric is restarted three times, over both port kinds: every
// operation is still checked exactly once with its data (0 lost, 0
// duplicated, 0 corrupted), the atomics' ledgers hold, and no completion
// failed.
func TestFaultSuiteRestart(t *testing.T) {
	for _, port := range []string{rack.PortSocket, rack.PortShm} {
		t.Run("port="+port, func(t *testing.T) {
			const restarts = 3
			r, err := Run(context.Background(), Config{Hosts: 2, Ops: testOps(), Seed: 11, Faults: SpecFaults(),
				Timeout: testTimeout(), Port: port, Restarts: restarts})
			if r != nil {
				logReport(t, r)
				t.Logf("fabric restarts: %d", r.FabricRestarts)
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Checked != r.Ops || r.FabricRestarts != restarts {
				t.Fatalf("%d of %d ops checked, %d of %d restarts", r.Checked, r.Ops, r.FabricRestarts, restarts)
			}
		})
	}
}
