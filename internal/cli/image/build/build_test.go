package build

import (
	"context"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/image"
)

func TestFlags(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
	var got *Options
	cmd := NewCmdBuild(f, func(o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--name", "g1", "--kernel", "linux-image-6.1.0-57-amd64", "--package", "gdb",
		"--mirror", "deb http://mirror.example/debian bookworm main"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Dir != ".cache/images/g1" || got.Kernel != "linux-image-6.1.0-57-amd64" || got.Size != "3G" || got.Suite != "bookworm" {
		t.Errorf("options %+v", got)
	}
	spec, err := Spec(context.Background(), got)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Kernel != got.Kernel || len(spec.Mirrors) != 1 || spec.Packages[len(spec.Packages)-1] != "gdb" ||
		len(spec.Packages) != len(image.BasePackages)+1 {
		t.Errorf("spec %+v", spec)
	}
}

func TestDebMustExist(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	f := cmdutil.NewFactory(ios, cmdutil.BuildInfo{})
	cmd := NewCmdBuild(f, func(o *Options) error { return nil })
	cmd.SetArgs([]string{"--deb", "/nonexistent/x.deb"})
	err := cmd.Execute()
	if err == nil || cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "x.deb") {
		t.Errorf("err %v", err)
	}
}
