package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Path is where the endpoint serves the metrics.
const Path = "/metrics"

// Server serves one process's registry on /metrics until Close: the Go
// runtime's and the process's collectors, and those Register adds. A
// nil *Server (no --metrics) accepts every method and does nothing. It
// is safe for concurrent use.
type Server struct {
	reg *prometheus.Registry
	srv *http.Server
	ln  net.Listener
}

// Start listens on addr (host:port; port 0 picks one) and serves
// /metrics there; with addr "" it returns a nil *Server. It listens
// before the server it reports on starts, so that a bad address fails
// before anything runs; Register adds the server's collector once it
// does. Unlike --pprof, any host is allowed: Prometheus scrapes from
// another machine, and the counters hold no guest data.
func Start(addr string, log *slog.Logger) (*Server, error) {
	if addr == "" {
		return nil, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("want host:port: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(Path, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(log.Handler(), slog.LevelError),
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	s := &Server{reg: reg, ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("metrics serving", "url", s.URL())
	return s, nil
}

// Register adds c to the registry.
func (s *Server) Register(c prometheus.Collector) error {
	if s == nil {
		return nil
	}
	if err := s.reg.Register(c); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// URL is the endpoint's URL, http://host:port/metrics ("" for nil).
func (s *Server) URL() string {
	if s == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String() + Path
}

// Close stops serving. It is idempotent.
func (s *Server) Close() error {
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return s.srv.Close()
	}
	return nil
}
