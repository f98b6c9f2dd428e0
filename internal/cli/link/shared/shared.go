// Package shared holds what the commands of `hinic link` share: the
// setting the noun binds to --run-dir (rundir.Dir gives its default).
// serve and status import it rather than each other.
package shared

// KeyRunDir is bound to the --run-dir flag of the link noun.
const KeyRunDir = "link.run-dir"
