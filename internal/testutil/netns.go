package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Two hosts on one machine: two network namespaces joined by a veth pair.

// NetnsPair is two network namespaces joined by a veth pair: Veth[i]
// lives in NS[i] with address Addr[i] (/24).
type NetnsPair struct {
	NS, Veth [2]string
	Addr     [2]string
}

// NewNetnsPair makes two namespaces and a veth pair between them with
// 192.168.77.1/24 and .2, removed when the test ends. It skips the test
// without root or without ip.
func NewNetnsPair(t testing.TB) *NetnsPair {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test creates network namespaces and a veth pair")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip to create network namespaces")
	}
	id := strconv.Itoa(os.Getpid() % 100000)
	p := &NetnsPair{
		NS:   [2]string{"hvxa" + id, "hvxb" + id},
		Veth: [2]string{"hvxa" + id, "hvxb" + id},
		Addr: [2]string{"192.168.77.1", "192.168.77.2"},
	}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() {
		for _, ns := range p.NS {
			_ = exec.Command("ip", "netns", "del", ns).Run() // takes its veth end along
		}
	})
	for _, ns := range p.NS {
		ip("netns", "add", ns)
	}
	ip("link", "add", p.Veth[0], "type", "veth", "peer", "name", p.Veth[1])
	for i := range 2 {
		ip("link", "set", p.Veth[i], "netns", p.NS[i])
		ip("-n", p.NS[i], "addr", "add", p.Addr[i]+"/24", "dev", p.Veth[i])
		ip("-n", p.NS[i], "link", "set", p.Veth[i], "up")
		ip("-n", p.NS[i], "link", "set", "lo", "up")
	}
	return p
}

// DialIn returns a fabric.Config DialTunnel that opens the socket in
// namespace ns: the dialling goroutine's thread enters it for the
// socket(2) call (a socket stays in the namespace it was made in) and
// goes back before it is unlocked.
func DialIn(ns string) func(d *net.Dialer, network, address string) (net.Conn, error) {
	return func(d *net.Dialer, network, address string) (net.Conn, error) {
		target, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			return nil, err
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
			return nil, fmt.Errorf("setns %s: %w", ns, err)
		}
		c, err := d.Dial(network, address)
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else the thread stays locked and ends with the goroutine
		return c, err
	}
}
