package netns

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestCommand(t *testing.T) {
	if got := Command("", "qemu", "-m", "1"); !slices.Equal(got, []string{"qemu", "-m", "1"}) {
		t.Errorf("no namespace: %q", got)
	}
	if got := Command("hn-a", "qemu", "-m", "1"); !slices.Equal(got, []string{"ip", "netns", "exec", "hn-a", "qemu", "-m", "1"}) {
		t.Errorf("in hn-a: %q", got)
	}
}

func TestCheckMissing(t *testing.T) {
	err := Check("hn-no-such-namespace")
	if err == nil || !strings.Contains(err.Error(), "ip netns add hn-no-such-namespace") {
		t.Errorf("err %v", err)
	}
}

// TestDialIn: a listener on this namespace's loopback answers Dial from
// here, and Dial from inside another namespace (whose loopback is its
// own) is refused. It needs root and iproute2.
func TestDialIn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	ns := "hn-netns-dialtest"
	_ = exec.Command("ip", "netns", "del", ns).Run()
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v\n%s", err, out)
	}
	if err := Check(ns); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx := context.Background()
	c, err := Dial(ctx, "", &net.Dialer{}, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("dial here: %v", err)
	}
	c.Close()
	if c, err := Dial(ctx, ns, &net.Dialer{}, "tcp", l.Addr().String()); err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial in %s: %v, want connection refused (another namespace's loopback)", ns, err)
	}
	// The thread went back: this goroutine still reaches the listener.
	c, err = Dial(ctx, "", &net.Dialer{}, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("dial here after: %v", err)
	}
	c.Close()
}
