// Package shared holds what the commands of `hinic device` share: the
// setting the noun binds to --control and the control socket's default.
// serve and status import it rather than each other.
package shared

import "github.com/PacketFive/hinic/internal/rundir"

// KeyControl is bound to the --control flag of the device noun.
const KeyControl = "device.control"

// ControlPath returns the control socket path: the setting, else
// device.sock in the default run directory.
func ControlPath(set string) string { return rundir.File(set, "device.sock") }
