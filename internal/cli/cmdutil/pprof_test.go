package cmdutil

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPprofTCP serves the profiles on a loopback port and fetches the
// index and a heap profile from it.
func TestPprofTCP(t *testing.T) {
	p, err := StartPprof("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, path := range []string{"", "heap?debug=1", "goroutine?debug=1"} {
		resp, err := http.Get(p.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		if path == "heap?debug=1" && !strings.Contains(string(body), "heap profile") {
			t.Errorf("heap profile: %.200q", body)
		}
		if path == "goroutine?debug=1" && !strings.Contains(string(body), "goroutine profile") {
			t.Errorf("goroutine profile: %.200q", body)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(p.URL()); err == nil {
		t.Error("still serving after Close")
	}
}

// TestPprofUnix serves on a UNIX socket, mode 0600.
func TestPprofUnix(t *testing.T) {
	d, err := os.MkdirTemp("", "hpp")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(d)
	sock := filepath.Join(d, "pprof.sock")
	p, err := StartPprof(sock, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	if p.URL() != "unix:"+sock {
		t.Errorf("URL %q", p.URL())
	}
	c := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Get("http://localhost/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatal(resp.Status)
	}
}

// TestPprofRefusesNetwork: profiles are not served beyond loopback, and a
// malformed address is a usage error.
func TestPprofRefusesNetwork(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "[::]:6060", "192.0.2.1:6060", "example.invalid:6060", "6060"} {
		p, err := StartPprof(addr, slog.New(slog.DiscardHandler))
		if err == nil {
			p.Close()
			t.Errorf("%q: served", addr)
			continue
		}
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: %v is not a usage error", addr, err)
		}
	}
}
