package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/PacketFive/hinic/internal/unixsock"
)

// PprofHelp is the flag help of every --pprof flag.
const PprofHelp = "serve Go's profiles (net/http/pprof) on `ADDR`: a loopback host:port or a UNIX socket path"

// MetricsHelp is the flag help of every --metrics flag.
const MetricsHelp = "serve Prometheus metrics on `ADDR` (host:port, e.g. 127.0.0.1:9464) at /metrics (docs/metrics.md)"

// Pprof serves the Go runtime's profiles of a long-running command (its
// --pprof flag) until Close. The address is a loopback TCP address
// ("127.0.0.1:6060", "localhost:0", "[::1]:6060") or a UNIX socket path
// (any value with a '/'), created 0600. Other hosts are refused: the
// profiles show the process's memory and are not for the network.
type Pprof struct {
	srv *http.Server
	ln  net.Listener
}

// StartPprof listens on addr and serves /debug/pprof/ there.
func StartPprof(addr string, log *slog.Logger) (*Pprof, error) {
	ln, err := pprofListen(addr)
	if err != nil {
		return nil, &UsageError{Err: fmt.Errorf("--pprof %q: %w", addr, err)}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	p := &Pprof{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof server stopped", "err", err)
		}
	}()
	log.Info("pprof serving", "addr", p.URL())
	return p, nil
}

// Addr is the address the profiles are served on.
func (p *Pprof) Addr() net.Addr { return p.ln.Addr() }

// URL is where the index page is: http://host:port/debug/pprof/, or
// unix:PATH for a UNIX socket (curl --unix-socket PATH
// http://localhost/debug/pprof/).
func (p *Pprof) URL() string {
	if p.ln.Addr().Network() == "unix" {
		return "unix:" + p.ln.Addr().String()
	}
	return "http://" + p.ln.Addr().String() + "/debug/pprof/"
}

// Close stops serving; a profile being taken is cut short.
func (p *Pprof) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		return p.srv.Close()
	}
	return nil
}

func pprofListen(addr string) (net.Listener, error) {
	if strings.Contains(addr, "/") {
		return unixsock.Listen("unix", addr, 0o600)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("want host:port or a socket path: %w", err)
	}
	if !loopbackHost(host) {
		return nil, fmt.Errorf("host %q is not a loopback address (use 127.0.0.1, ::1, localhost or a UNIX socket path)", host)
	}
	if host == "localhost" {
		// Resolve here so that no resolver can send it elsewhere.
		_, port, _ := net.SplitHostPort(addr)
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	return net.Listen("tcp", addr)
}

func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
