package deploy

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// sshServer serves "exec" requests by running them with the local
// /bin/sh: a real SSH exchange (key auth, sessions, exit-status) for
// Client's own code, without a guest.
func sshServer(t *testing.T, authorized ssh.PublicKey) string {
	t.Helper()
	_, hk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := ssh.NewSignerFromKey(hk)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if bytes.Equal(k.Marshal(), authorized.Marshal()) {
			return nil, nil
		}
		return nil, errUnauthorized
	}}
	cfg.AddHostKey(hostKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go serveConn(conn, cfg)
		}
	}()
	return ln.Addr().String()
}

var errUnauthorized = &net.AddrError{Err: "unauthorized key"}

func serveConn(conn net.Conn, cfg *ssh.ServerConfig) {
	_, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		conn.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go func() {
			defer ch.Close()
			for r := range creqs {
				if r.Type != "exec" {
					_ = r.Reply(false, nil)
					continue
				}
				var p struct{ Cmd string }
				_ = ssh.Unmarshal(r.Payload, &p)
				_ = r.Reply(true, nil)
				c := exec.Command("/bin/sh", "-c", p.Cmd)
				c.Stdin, c.Stdout, c.Stderr = ch, ch, ch.Stderr()
				status := uint32(0)
				if err := c.Run(); err != nil {
					status = 255
					if ee, ok := err.(*exec.ExitError); ok {
						status = uint32(ee.ExitCode())
					}
				}
				var b [4]byte
				binary.BigEndian.PutUint32(b[:], status)
				_, _ = ch.SendRequest("exit-status", false, b[:])
				return
			}
		}()
	}
}

func TestClientExec(t *testing.T) {
	dir := t.TempDir()
	signer, _, err := EnsureKey(filepath.Join(dir, FileKey))
	if err != nil {
		t.Fatal(err)
	}
	addr := sshServer(t, signer.PublicKey())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, signer, filepath.Join(dir, FileKnownHosts))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var out, errOut bytes.Buffer
	status, err := c.Exec(ctx, "tr a-z A-Z; echo oops >&2; exit 7", strings.NewReader("hello\n"), &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if status != 7 || out.String() != "HELLO\n" || errOut.String() != "oops\n" {
		t.Errorf("status %d, stdout %q, stderr %q", status, out.String(), errOut.String())
	}
	out.Reset()
	if status, err := c.Exec(ctx, "echo ok", nil, &out, &errOut); err != nil || status != 0 || out.String() != "ok\n" {
		t.Errorf("status %d, err %v, stdout %q", status, err, out.String())
	}
	// One buffer for both streams, as a caller that wants them merged
	// passes it: every line of each arrives.
	var both bytes.Buffer
	if status, err := c.Exec(ctx, "i=0; while [ $i -lt 300 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done", nil, &both, &both); err != nil || status != 0 {
		t.Fatalf("status %d, err %v", status, err)
	}
	lines := strings.Fields(both.String())
	if len(lines) != 600 || !slices.Contains(lines, "out299") || !slices.Contains(lines, "err299") || !slices.Contains(lines, "out0") {
		t.Errorf("one writer for both streams: %d lines, want 600:\n%.300s", len(lines), both.String())
	}
	short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	defer stop()
	if _, err := c.Exec(short, "sleep 3", nil, &out, &errOut); err == nil {
		t.Error("a command cut off by its context returned no error")
	}
}
