package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"plain error", errors.New("boom"), ExitError},
		{"usage", UsageErrorf("bad %s", "flag"), ExitUsage},
		{"wrapped usage", fmt.Errorf("serve: %w", UsageErrorf("bad")), ExitUsage},
		{"verify failed", VerifyErrorf("2 of 5 checks failed"), ExitVerifyFailed},
		{"wrapped verify", fmt.Errorf("e2e: %w", &VerifyError{Err: errors.New("x")}), ExitVerifyFailed},
		{"canceled", context.Canceled, ExitInterrupted},
		{"wrapped canceled", fmt.Errorf("listen: %w", context.Canceled), ExitInterrupted},
		{"verify interrupted", &VerifyError{Err: fmt.Errorf("ping: %w", context.Canceled)}, ExitInterrupted},
		{"deadline is an error", context.DeadlineExceeded, ExitError},
		{"passed-on status", &StatusError{Status: 7, Err: errors.New("exited 7")}, 7},
		{"status clamped high", fmt.Errorf("x: %w", &StatusError{Status: 300, Err: errors.New("x")}), 255},
		{"status clamped low", &StatusError{Status: 0, Err: errors.New("x")}, ExitError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExitCode(tt.err); got != tt.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestExitCodeValues(t *testing.T) {
	// These numbers are documented (docs/cli.md, hinic --help); scripts
	// depend on them.
	got := []int{ExitOK, ExitError, ExitUsage, ExitVerifyFailed, ExitInterrupted}
	want := []int{0, 1, 2, 3, 130}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("exit code %d = %d, want %d", i, got[i], want[i])
		}
	}
}
