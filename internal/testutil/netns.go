package testutil

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/PacketFive/hinic/internal/netns"
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
	id := strconv.Itoa(os.Getpid() % 100000)
	return NewNetnsPairNamed(t, [2]string{"hvxa" + id, "hvxb" + id}, [2]string{"192.168.77.1", "192.168.77.2"})
}

// NewNetnsPairNamed is NewNetnsPair with the namespaces (and their veth
// ends) named ns and the addresses addr. Namespaces of those names left
// by an earlier run are removed first.
func NewNetnsPairNamed(t testing.TB, ns, addr [2]string) *NetnsPair {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test creates network namespaces and a veth pair")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip to create network namespaces")
	}
	p := &NetnsPair{NS: ns, Veth: ns, Addr: addr}
	for _, n := range ns {
		if netns.Check(n) == nil {
			_ = exec.Command("ip", "netns", "del", n).Run()
		}
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
// namespace ns (netns.Dial).
func DialIn(ns string) func(d *net.Dialer, network, address string) (net.Conn, error) {
	return func(d *net.Dialer, network, address string) (net.Conn, error) {
		return netns.Dial(context.Background(), ns, d, network, address)
	}
}
