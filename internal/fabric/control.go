package fabric

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"time"
)

// The control socket (control.sock in the run directory, SOCK_STREAM,
// mode 0660) answers one JSON request per connection with one JSON
// response, each a line:
//
//	-> {"op":"status"}
//	<- {"status":{...}}            or {"error":"..."}

const (
	controlTimeout = 5 * time.Second
	controlMaxReq  = 4 << 10
)

type controlRequest struct {
	Op string `json:"op"`
}

type controlResponse struct {
	Status *Status `json:"status,omitempty"`
	Error  string  `json:"error,omitempty"`
}

type controlServer struct {
	f      *Fabric
	ln     *net.UnixListener
	wg     sync.WaitGroup
	once   sync.Once
	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
}

func newControlServer(f *Fabric) (*controlServer, error) {
	path := f.ControlSocket()
	ln, err := listenUnix("unix", path)
	if err != nil {
		return nil, fmt.Errorf("fabric: control socket: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &controlServer{f: f, ln: ln, ctx: ctx, cancel: cancel}, nil
}

func (cs *controlServer) start() {
	cs.wg.Add(1)
	go cs.acceptLoop()
}

func (cs *controlServer) acceptLoop() {
	defer cs.wg.Done()
	sem := make(chan struct{}, 8)
	for {
		c, err := cs.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-cs.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			c.Close()
			continue
		}
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			defer func() { <-sem }()
			cs.serve(c)
		}()
	}
}

func (cs *controlServer) serve(c *net.UnixConn) {
	defer c.Close()
	stop := context.AfterFunc(cs.ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	c.SetDeadline(time.Now().Add(controlTimeout))
	line, err := bufio.NewReaderSize(c, controlMaxReq).ReadSlice('\n')
	var resp controlResponse
	var req controlRequest
	switch {
	case err != nil:
		resp.Error = "request: " + err.Error()
	case json.Unmarshal(line, &req) != nil:
		resp.Error = "request is not JSON"
	case req.Op == "status":
		st := cs.f.Status()
		resp.Status = &st
	default:
		resp.Error = fmt.Sprintf("unknown op %q", req.Op)
	}
	enc := json.NewEncoder(c)
	_ = enc.Encode(&resp)
}

func (cs *controlServer) close() {
	cs.once.Do(func() {
		cs.cancel()
		cs.ln.Close()
		cs.wg.Wait()
	})
}

// QueryStatus asks the fabric serving in runDir for its status through
// the control socket.
func QueryStatus(ctx context.Context, runDir string) (*Status, error) {
	path := filepath.Join(runDir, ControlSocketName)
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("%w in %s (%v): start one with `hinic fabric serve --run-dir %s`", ErrNoFabric, runDir, err, runDir)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	c.SetDeadline(time.Now().Add(controlTimeout))
	if _, err := c.Write([]byte(`{"op":"status"}` + "\n")); err != nil {
		return nil, fmt.Errorf("fabric: control %s: %w", path, err)
	}
	var resp controlResponse
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("fabric: control %s: %w", path, err)
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("fabric: control %s: %s", path, resp.Error)
	}
	if resp.Status == nil {
		return nil, fmt.Errorf("fabric: control %s: empty answer", path)
	}
	return resp.Status, nil
}
