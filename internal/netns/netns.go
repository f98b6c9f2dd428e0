// Package netns opens sockets in a named Linux network namespace (one
// that `ip netns add` made, bound under /run/netns) and runs commands in
// it. A socket stays in the namespace it was made in, so a process in
// one namespace can reach another's loopback or addresses: deploy does so
// to reach the guests of a rack host that is a network namespace, tests
// to open the two ends of a link between two of them. It imports only
// the standard library and golang.org/x/sys.
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// Dir is where iproute2 binds named network namespaces.
const Dir = "/run/netns"

// Path is the bind mount of namespace name.
func Path(name string) string { return filepath.Join(Dir, name) }

// Check reports an error unless namespace name exists.
func Check(name string) error {
	if _, err := os.Stat(Path(name)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("netns %s: no such network namespace (create it with ip netns add %s)", name, name)
		}
		return fmt.Errorf("netns %s: %w", name, err)
	}
	return nil
}

// Dial dials address with d from inside namespace name ("" is the
// caller's own): the dialling goroutine's thread enters it for the
// socket(2) call, which DialContext makes on the calling thread, and
// goes back before it is unlocked. Entering another
// namespace needs CAP_SYS_ADMIN.
func Dial(ctx context.Context, name string, d *net.Dialer, network, address string) (net.Conn, error) {
	if name == "" {
		return d.DialContext(ctx, network, address)
	}
	target, err := os.Open(Path(name))
	if err != nil {
		return nil, fmt.Errorf("netns %s: %w", name, err)
	}
	defer target.Close()
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer orig.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("setns %s: %w", name, err)
	}
	c, err := d.DialContext(ctx, network, address)
	if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
		runtime.UnlockOSThread()
	} // else the thread stays locked and ends with the goroutine
	return c, err
}

// Command returns the argv that runs argv in namespace name through
// iproute2 (`ip netns exec`, which execs it: the process keeps the pid
// and shows argv as its command line); argv itself for "".
func Command(name string, argv ...string) []string {
	if name == "" {
		return argv
	}
	return append([]string{"ip", "netns", "exec", name}, argv...)
}
