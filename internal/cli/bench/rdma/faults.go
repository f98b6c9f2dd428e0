package rdma

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/faultsuite"
)

// faultFlags checks the --faults settings. The suite's MTU is its own
// default unless --mtu is given.
func faultFlags(cmd *cobra.Command, opts *Options) error {
	fc := &opts.FaultConfig
	if cmd.Flags().Changed("mtu") {
		switch opts.Config.MTU {
		case 256, 512, 1024, 2048, 4096:
		default:
			return cmdutil.UsageErrorf("invalid --mtu %d: valid values are 256, 512, 1024, 2048, 4096", opts.Config.MTU)
		}
		fc.MTU = opts.Config.MTU
	}
	if fc.Hosts != 2 && fc.Hosts != 4 {
		return cmdutil.UsageErrorf("invalid --hosts %d: 2 or 4", fc.Hosts)
	}
	if fc.Timeout < 1 || fc.Timeout > 31 {
		return cmdutil.UsageErrorf("invalid --timeout %d: a code from 1 to 31", fc.Timeout)
	}
	if fc.Restarts < 0 || fc.Restarts > 100 {
		return cmdutil.UsageErrorf("invalid --restarts %d: 0 to 100", fc.Restarts)
	}
	if fc.Ops < 1 {
		return cmdutil.UsageErrorf("invalid --ops %d: at least 1", fc.Ops)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"drop", fc.Faults.Drop}, {"dup", fc.Faults.Duplicate}, {"reorder", fc.Faults.Reorder}, {"corrupt", fc.Faults.Corrupt}} {
		if p.v < 0 || p.v > 0.5 {
			return cmdutil.UsageErrorf("invalid --%s %g: a probability from 0 to 0.5", p.name, p.v)
		}
	}
	return nil
}

func runFaults(opts *Options) error {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	printer, err := opts.Printer()
	if err != nil {
		return err
	}
	cfg := opts.FaultConfig
	cfg.Progress = func(format string, a ...any) { fmt.Fprintf(opts.IO.ErrOut, format+"\n", a...) }
	stop, err := startCPUProfile(opts.CPUProfile)
	if err != nil {
		return err
	}
	rep, err := faultsuite.Run(ctx, cfg)
	if perr := stop(); err == nil && perr != nil {
		return perr
	}
	if rep == nil {
		return err // the suite could not start
	}
	if perr := printFaults(printer, rep); perr != nil && err == nil {
		return perr
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return cmdutil.VerifyErrorf("%v", err)
	}
	return err
}

func printFaults(printer *cmdutil.Printer, r *faultsuite.Report) error {
	if printer.Format() == cmdutil.FormatJSON {
		return printer.Object(r)
	}
	n := func(v uint64) string { return strconv.FormatUint(v, 10) }
	t := r.Total
	fields := []cmdutil.Field{
		{Name: "engines", Value: fmt.Sprintf("%d, %d RC streams, path MTU %d, seed %d", r.Hosts, r.Streams, r.MTU, r.Seed)},
		{Name: "faults configured", Value: fmt.Sprintf("drop %g, duplicate %g, reorder %g, corrupt %g",
			r.Faults.Drop, r.Faults.Duplicate, r.Faults.Reorder, r.Faults.Corrupt)},
		{Name: "operations", Value: fmt.Sprintf("%d of %d checked, %.1f MiB, %.1f s (%.0f ops/s)", r.Checked, r.Ops,
			float64(r.Bytes)/(1<<20), r.Seconds, float64(r.Checked)/max(r.Seconds, 1e-9))},
	}
	for _, k := range r.Kinds {
		v := strconv.Itoa(k.Ops)
		if k.Bytes > 0 {
			v += fmt.Sprintf(" (%.1f MiB)", float64(k.Bytes)/(1<<20))
		}
		fields = append(fields, cmdutil.Field{Name: "  " + k.Kind, Value: v})
	}
	in := r.Injected
	if r.FabricRestarts > 0 {
		fields = append(fields, cmdutil.Field{Name: "fabric restarts", Value: strconv.Itoa(r.FabricRestarts)})
	}
	fields = append(fields,
		cmdutil.Field{Name: "faults injected", Value: fmt.Sprintf("drop %d, duplicate %d, reorder %d, corrupt %d, of %d frames",
			in.Drop, in.Duplicate, in.Reorder, in.Corrupt, r.FabricFrames)},
		cmdutil.Field{Name: "corrupt frames dropped", Value: fmt.Sprintf("bad ICRC %d, malformed %d (engines); malformed %d (switch)",
			t.RxICRCErrors, t.RxMalformed, r.SwitchMalformed)},
		cmdutil.Field{Name: "retransmissions", Value: fmt.Sprintf("%d packets, %d timeouts, %d READ gap retries",
			t.Retransmits, t.RetransmitTimeouts, t.ReadGapRetries)},
		cmdutil.Field{Name: "NAKs", Value: fmt.Sprintf("sequence %d, RNR %d, error %d (received)",
			t.SeqNAKsReceived, t.RNRNAKsReceived, t.ErrNAKsReceived)},
		cmdutil.Field{Name: "duplicates", Value: fmt.Sprintf("%d requests, %d READ replays, %d atomic replays, %d stale responses",
			t.Duplicates, t.ReadReplays, t.AtomicReplays, t.StaleResponses)},
		cmdutil.Field{Name: "atomics", Value: fmt.Sprintf("%d FETCH_AND_ADD onto %d counters (sum %d), %d CMP_AND_SWP (%d swapped) on %d words",
			r.Atomics.Adds, r.Atomics.Counters, r.Atomics.Sum, r.Atomics.Swaps, r.Atomics.Swapped, r.Atomics.SwapWords)},
		cmdutil.Field{Name: "datagrams", Value: fmt.Sprintf("%d UD + %d multicast sent, %d of %d deliveries (%d lost, %d duplicated; %d multicast), every one checked",
			r.UD.Sent, r.UD.McastSent, r.UD.Delivered, r.UD.Expected, r.UD.Lost, r.UD.Duplicates, r.UD.McastDelivered)},
	)
	if err := printer.Object(r, fields...); err != nil {
		return err
	}
	w := printer.Records("ENGINE", "RETRANSMITS", "TIMEOUTS", "SEQ-NAK-RX", "SEQ-NAK-TX", "RNR-NAK-RX", "DUPLICATES",
		"ATOMICS", "ATOMIC-REPLAYS", "ICRC-DROPS")
	for _, e := range append(r.Engines, t) {
		name := e.Host
		if name == "" {
			name = "total"
		}
		if err := w.Write(e, name, n(e.Retransmits), n(e.RetransmitTimeouts), n(e.SeqNAKsReceived), n(e.SeqNAKsSent),
			n(e.RNRNAKsReceived), n(e.Duplicates), n(e.AtomicsExecuted), n(e.AtomicReplays), n(e.RxICRCErrors)); err != nil {
			return err
		}
	}
	return w.Close()
}
