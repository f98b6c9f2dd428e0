package exec_test

import (
	"context"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli"
	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

func TestExecArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"deploy", "exec"}, 2, "needs a GUEST"},
		{[]string{"deploy", "exec", "vm-a"}, 2, "nothing to do"},
		{[]string{"deploy", "exec", "vm-a", "ls"}, 2, "put the command after --"},
		{[]string{"deploy", "exec", "vm-a", "vm-b", "--", "ls"}, 2, "one GUEST before --"},
		{[]string{"deploy", "exec", "vm-a", "--upload", "nocolon", "--", "ls"}, 2, "want LOCAL:REMOTE"},
		{[]string{"deploy", "exec", "--run-dir", "/nonexistent-rack", "vm-a", "--", "ls"}, 1, "deploy a rack first"},
	} {
		ios, _, _, errOut := cmdutil.Test()
		code := cli.Run(context.Background(), tc.args, ios)
		if code != tc.code || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut.String(), tc.code, tc.want)
		}
	}
}
