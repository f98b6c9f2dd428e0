package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
)

func TestCompletion(t *testing.T) {
	for _, shell := range completionShells {
		t.Run(shell, func(t *testing.T) {
			isolate(t)
			ios, _, out, errOut := cmdutil.Test()
			if code := Run(context.Background(), []string{"completion", shell}, ios); code != 0 {
				t.Fatalf("exit code %d, stderr:\n%s", code, errOut)
			}
			if out.Len() == 0 {
				t.Fatal("empty completion script")
			}
			if !strings.Contains(out.String(), "hinic") {
				t.Errorf("%s script does not mention hinic", shell)
			}
		})
	}
}
