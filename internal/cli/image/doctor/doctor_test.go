package doctor

import (
	"strings"
	"testing"

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

func TestDoctorTable(t *testing.T) {
	ios, _, out, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
	cmd := NewCmdDoctor(f, nil)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	missing := 0
	for _, c := range Checks() {
		if !c.OK {
			missing++
		}
	}
	if (missing > 0) != (cmdutil.ExitCode(err) == cmdutil.ExitVerifyFailed) {
		t.Errorf("%d missing, err %v", missing, err)
	}
	if !strings.Contains(out.String(), "mmdebstrap") || !strings.Contains(out.String(), "qemu-utils") {
		t.Errorf("table:\n%s", out)
	}
}
