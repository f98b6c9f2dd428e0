package doctor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/accel"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/image"
)

func TestChecksListEveryTool(t *testing.T) {
	checks := Checks()
	if len(checks) != len(image.Tools) {
		t.Fatalf("%d checks for %d tools", len(checks), len(image.Tools))
	}
	for _, c := range checks {
		if c.Package == "" || (c.OK && c.Path == "") {
			t.Errorf("check %+v", c)
		}
	}
}

// scripted is a prober whose host opens /dev/kvm and whose probe guest
// prints nothing, or boots when booted is set.
func scripted(booted bool) *accel.Prober {
	return &accel.Prober{
		QEMU: os.Args[0], NoCache: true,
		ReadHost: func(string) accel.HostFacts {
			return accel.HostFacts{DevKVM: "ok", CPUVirt: "none", Modules: []string{"kvm", "kvm_pvm"}}
		},
		BootProbe: func(context.Context, string, string, time.Duration) accel.Boot {
			if booted {
				return accel.Boot{Console: []byte("Linux version 6.1\nKernel panic - not syncing: VFS\n"), Exited: true, Elapsed: time.Second}
			}
			return accel.Boot{Elapsed: accel.DefaultTimeout}
		},
	}
}

func runDoctor(t *testing.T, pr *accel.Prober, asJSON bool, args ...string) (string, string, error) {
	t.Helper()
	kernel := filepath.Join(t.TempDir(), "vmlinuz")
	if err := os.WriteFile(kernel, []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	ios, _, out, errOut := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
	cmd := NewCmdDoctor(f, func(o *Options) error {
		o.Prober = pr
		if asJSON {
			o.Printer = func() (*cmdutil.Printer, error) { return cmdutil.NewPrinter(out, cmdutil.FormatJSON, false), nil }
		}
		return run(o)
	})
	cmd.SetArgs(append([]string{"--kernel", kernel}, args...))
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestDoctorTable(t *testing.T) {
	out, errOut, err := runDoctor(t, scripted(false), false)
	missing := 0
	for _, c := range Checks() {
		if !c.OK {
			missing++
		}
	}
	if (missing > 0) != (cmdutil.ExitCode(err) == cmdutil.ExitVerifyFailed) {
		t.Errorf("%d missing, err %v", missing, err)
	}
	if !strings.Contains(out, "mmdebstrap") || !strings.Contains(out, "qemu-utils") {
		t.Errorf("table:\n%s", out)
	}
	// An open /dev/kvm whose guest prints nothing is TCG, and says why.
	for _, want := range []string{"accel auto", "tcg", "TCG: /dev/kvm opens, but a guest kernel printed nothing",
		"no VMX/SVM, modules kvm,kvm_pvm", "kernel probed"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "KVM probe with") {
		t.Errorf("no progress line: %q", errOut)
	}
}

func TestDoctorJSON(t *testing.T) {
	for _, booted := range []bool{false, true} {
		out, _, _ := runDoctor(t, scripted(booted), true)
		var rep Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		want := map[bool]string{false: accel.TCG, true: accel.KVM}[booted]
		if len(rep.Tools) != len(image.Tools) || rep.Accel.Accel != want || rep.Accel.Verdict == nil || rep.Accel.Verdict.KVM != booted {
			t.Errorf("booted %v: %+v", booted, rep.Accel)
		}
	}
}

func TestDoctorNoKernel(t *testing.T) {
	out, _, _ := runDoctor(t, scripted(true), true, "--kernel", filepath.Join(t.TempDir(), "none"))
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Accel.Accel != accel.TCG || !strings.Contains(rep.Accel.Why, "could not run") {
		t.Errorf("%+v", rep.Accel)
	}
}
