package cmdutil

import (
	"context"
	"errors"
	"fmt"
)

// Exit codes of hinic. They are part of the interface: docs/cli.md and
// `hinic --help` list them, and scripts may rely on them.
const (
	ExitOK           = 0   // the command did what was asked
	ExitError        = 1   // the command failed
	ExitUsage        = 2   // the command line or a setting is invalid
	ExitVerifyFailed = 3   // verification ran and found failures
	ExitInterrupted  = 130 // SIGINT or SIGTERM cancelled the command (128+SIGINT)
)

// UsageError reports a command line (or a setting from the environment or
// the config file) that the command cannot act on. It exits with
// ExitUsage, and the error is followed by a hint to run --help.
type UsageError struct {
	Err error
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// UsageErrorf returns a *UsageError with a formatted message.
func UsageErrorf(format string, a ...any) error {
	return &UsageError{Err: fmt.Errorf(format, a...)}
}

// VerifyError reports that a verification ran to the end and found
// failures, as opposed to being unable to run. It exits with
// ExitVerifyFailed.
type VerifyError struct {
	Err error
}

func (e *VerifyError) Error() string { return e.Err.Error() }
func (e *VerifyError) Unwrap() error { return e.Err }

// VerifyErrorf returns a *VerifyError with a formatted message.
func VerifyErrorf(format string, a ...any) error {
	return &VerifyError{Err: fmt.Errorf(format, a...)}
}

// StatusError carries an exit status that the command passes on, such as
// that of a command it ran in a guest. Status is clamped to 1..255.
type StatusError struct {
	Status int
	Err    error
}

func (e *StatusError) Error() string { return e.Err.Error() }
func (e *StatusError) Unwrap() error { return e.Err }

// ExitCode maps an error returned by a command to hinic's exit code.
// Cancellation wins over the other kinds: a verification cut short by
// Ctrl-C did not fail, it was interrupted.
func ExitCode(err error) int {
	var usage *UsageError
	var verify *VerifyError
	var status *StatusError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	case errors.As(err, &usage):
		return ExitUsage
	case errors.As(err, &verify):
		return ExitVerifyFailed
	case errors.As(err, &status):
		return min(max(status.Status, 1), 255)
	default:
		return ExitError
	}
}
