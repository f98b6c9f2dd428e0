package restart_test

import (
	"context"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

func TestRestartArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"deploy", "restart"}, 2, "fabric, device or hilink"},
		{[]string{"deploy", "restart", "switch"}, 2, "fabric, device or hilink"},
		{[]string{"deploy", "restart", "fabric", "device"}, 2, "fabric, device or hilink"},
		{[]string{"deploy", "restart", "--run-dir", "/nonexistent-rack", "hilink"}, 1, "deploy a rack first"},
		{[]string{"deploy", "restart", "--run-dir", "/nonexistent-rack", "device"}, 1, "deploy a rack first"},
		{[]string{"deploy", "restart", "--run-dir", "/nonexistent-rack", "fabric"}, 1, "deploy a rack first"},
	} {
		ios, _, _, errOut := cmdutil.Test()
		code := cli.Run(context.Background(), tc.args, ios)
		if code != tc.code || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut.String(), tc.code, tc.want)
		}
	}
}
