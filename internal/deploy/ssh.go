package deploy

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	scp "github.com/bramvdbogaerde/go-scp"
	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"

	"github.com/PacketFive/hinic/internal/netns"
)

// EnsureKey returns the signer of the rack's SSH key at path, generating an
// ed25519 key (and path.pub) the first time. The key's directory must be
// private (checkPrivateDir), and an existing key is used only when it is
// a regular file of this user that nobody else may read.
func EnsureKey(path string) (ssh.Signer, string, error) {
	if err := checkPrivateDir(filepath.Dir(path)); err != nil {
		return nil, "", err
	}
	if fi, err := os.Lstat(path); err == nil {
		if err := checkKeyFile(path, fi); err != nil {
			return nil, "", err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, "", err
		}
		s, err := ssh.ParsePrivateKey(b)
		if err != nil {
			return nil, "", fmt.Errorf("deploy: %s: %w", path, err)
		}
		return s, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey()))), nil
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, "hinic rack key")
	if err != nil {
		return nil, "", err
	}
	if err := writePrivate(path, pem.EncodeToMemory(block)); err != nil {
		return nil, "", err
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, "", err
	}
	pub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey()))) + " hinic-rack"
	if err := writePrivate(path+".pub", []byte(pub+"\n")); err != nil {
		return nil, "", err
	}
	return s, pub, nil
}

// checkKeyFile refuses a private key that is a symlink or not a regular
// file, that another user owns, or that group or others may read.
func checkKeyFile(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("deploy: SSH key %s: %w: not a regular file", path, ErrUnsafeRunDir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("deploy: SSH key %s: %w: owned by uid %d, not by you", path, ErrUnsafeRunDir, st.Uid)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("deploy: SSH key %s: %w: mode %04o lets others read it; remove it (deploy makes a new one)", path, ErrUnsafeRunDir, fi.Mode().Perm())
	}
	return nil
}

// knownHostsMu serialises trust-on-first-use writes to one known_hosts file.
var knownHostsMu sync.Mutex

// hostKeyCallback pins a guest's host key on first contact in the rack's
// known_hosts file and refuses a changed key afterwards.
func hostKeyCallback(path string) (ssh.HostKeyCallback, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := writePrivate(path, nil); err != nil {
			return nil, err
		}
	}
	return func(host string, remote net.Addr, key ssh.PublicKey) error {
		knownHostsMu.Lock()
		defer knownHostsMu.Unlock()
		kh, err := knownhosts.New(path)
		if err != nil {
			return err
		}
		err = kh(host, remote, key)
		if knownhosts.IsHostUnknown(err) {
			f, ferr := openPrivate(path, os.O_APPEND)
			if ferr != nil {
				return ferr
			}
			defer f.Close()
			return knownhosts.WriteKnownHost(f, host, remote, key)
		}
		return err
	}, nil
}

// Client is an SSH connection to one guest's management address. It is
// safe for concurrent use (each Run opens its own session).
type Client struct {
	Addr string
	c    *ssh.Client
}

// Dial connects once.
func Dial(ctx context.Context, addr string, signer ssh.Signer, knownHosts string) (*Client, error) {
	return dialIn(ctx, "", addr, signer, knownHosts)
}

// dialIn connects once to addr in network namespace ns ("" for this
// process's own).
func dialIn(ctx context.Context, ns, addr string, signer ssh.Signer, knownHosts string) (*Client, error) {
	cb, err := hostKeyCallback(knownHosts)
	if err != nil {
		return nil, err
	}
	cfg := &ssh.ClientConfig{
		User:            "root",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: cb,
		Timeout:         10 * time.Second,
	}
	// Offer the key types already pinned for this host first, so a pinned
	// ed25519 key is not reported as changed when the server would have
	// negotiated ecdsa (toolkit-facts 6.3).
	if kh, err := knownhosts.New(knownHosts); err == nil {
		cfg.HostKeyAlgorithms = knownhosts.HostKeyAlgorithms(ssh.HostKeyCallback(kh), addr)
	}
	d := net.Dialer{Timeout: cfg.Timeout}
	conn, err := netns.Dial(ctx, ns, &d, "tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	sc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return &Client{Addr: addr, c: ssh.NewClient(sc, chans, reqs)}, nil
}

// WaitSSH dials addr until it answers a command or the context ends.
func WaitSSH(ctx context.Context, addr string, signer ssh.Signer, knownHosts string) (*Client, error) {
	return waitSSHIn(ctx, "", addr, signer, knownHosts)
}

// waitSSHIn is WaitSSH for addr in network namespace ns.
func waitSSHIn(ctx context.Context, ns, addr string, signer ssh.Signer, knownHosts string) (*Client, error) {
	var last error
	for {
		c, err := dialIn(ctx, ns, addr, signer, knownHosts)
		if err == nil {
			if _, err = c.Run(ctx, "true"); err == nil {
				return c, nil
			}
			c.Close()
		}
		if knownhosts.IsHostKeyChanged(err) {
			return nil, fmt.Errorf("deploy: %s: host key changed: %w", addr, err)
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("deploy: ssh %s not ready: %w (last error: %v)", addr, ctx.Err(), last)
		case <-time.After(time.Second):
		}
	}
}

// Close closes the connection.
func (c *Client) Close() error { return c.c.Close() }

// RunError is a remote command that exited non-zero.
type RunError struct {
	Cmd    string
	Status int
	Stderr string
}

func (e *RunError) Error() string {
	return fmt.Sprintf("`%s` exited %d: %s", e.Cmd, e.Status, strings.TrimSpace(e.Stderr))
}

// Run runs cmd in a shell on the guest and returns its standard output and
// error combined. A non-zero exit is a *RunError; the context ending kills
// the remote command (SIGKILL, then the session is closed).
func (c *Client) Run(ctx context.Context, cmd string) (string, error) {
	// One buffer for both streams: Exec serialises their writes.
	var out bytes.Buffer
	status, err := c.Exec(ctx, cmd, nil, &out, &out)
	if err != nil {
		return out.String(), err
	}
	if status != 0 {
		return out.String(), &RunError{Cmd: cmd, Status: status, Stderr: lastLines(out.String(), 5)}
	}
	return out.String(), nil
}

// Upload copies a local file to the guest with scp.
func (c *Client) Upload(ctx context.Context, local, remote, mode string) error {
	sc, err := scp.NewClientBySSH(c.c)
	if err != nil {
		return err
	}
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	return sc.CopyFromFile(ctx, *f, remote, mode)
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// ForgetHostKey removes the pinned host keys of addr (host:port) from a
// known_hosts file: a guest that starts on a fresh disk makes new host
// keys at first boot, and only then may its key change.
func ForgetHostKey(path, addr string) error {
	knownHostsMu.Lock()
	defer knownHostsMu.Unlock()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	name := knownhosts.Normalize(addr)
	var keep []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		hosts, _, _ := strings.Cut(l, " ")
		drop := false
		for _, h := range strings.Split(hosts, ",") {
			if h == name {
				drop = true
			}
		}
		if !drop && l != "" {
			keep = append(keep, l)
		}
	}
	out := strings.Join(keep, "\n")
	if out != "" {
		out += "\n"
	}
	return writePrivate(path, []byte(out))
}
