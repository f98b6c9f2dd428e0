// Package shared holds what the commands of `hinic gpu` share: the
// setting the noun binds to --control and the control socket's default.
// serve and status import it rather than each other.
package shared

import "github.com/PacketFive/hinic/internal/rundir"

// KeyControl is bound to the --control flag of the gpu noun.
const KeyControl = "gpu.control"

// ControlPath returns the control socket path: the setting, else
// gpu.sock in the default run directory.
func ControlPath(set string) string { return rundir.File(set, "gpu.sock") }
