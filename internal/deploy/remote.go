package deploy

// Hosts reached over SSH. A host with ssh: is another machine; the
// machine that runs `deploy rack` (the controller) deploys its part
// there by running that machine's own hinic through the system ssh
// client, in batch mode, so that the user's ~/.ssh/config, agent and
// known_hosts apply:
//
//	ssh -o BatchMode=yes -o ConnectTimeout=30 [-p PORT] [USER@]HOST \
//	    'umask 077 && mkdir -p PART && tar --no-same-owner -xf - -C PART'
//	    (stdin: a tar of the rack's key pair and the rack, defaults filled in, as rack.yaml)
//	ssh ... 'HINIC deploy rack PART/rack.yaml --host NAME --run-dir RUN-DIR -o json'
//	ssh ... 'test ! -e PART/known_hosts || cat PART/known_hosts'
//
// RUN-DIR is the host's run-dir (default: the controller's own run
// directory, the same absolute path), PART is RUN-DIR/NAME there. The
// remote deploy's progress lines come back prefixed with the host's
// name, its state (stdout) joins the rack's as a netns part's does, and
// status and down run `HINIC deploy status|down --run-dir PART` the
// same way. The guests' SSH forwards listen on the host's address,
// which the controller reaches over the underlay.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// EnvSSH is the environment variable that replaces the ssh command of
// hosts with ssh:, split at spaces (no quoting): HINIC_SSH="ssh -F
// /tmp/x/ssh_config". deploy adds -o BatchMode=yes, the port and the
// destination to it.
const EnvSSH = "HINIC_SSH"

// FileRemoteSpec is the rack spec deploy copies into an ssh host's part.
const FileRemoteSpec = "rack.yaml"

// sshDest is a hosts[].ssh value taken apart.
type sshDest struct {
	User, Host string
	Port       int // 0: ssh's default (or the ssh config's)
}

// sshHostRE is a host name or an address: no option, no shell word.
var sshHostRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:%-]*$`)

// sshUserRE is a login name.
var sshUserRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// parseSSHDest reads "[USER@]HOST[:PORT]"; an IPv6 address with a port
// is bracketed, [2001:db8::1]:22.
func parseSSHDest(s string) (sshDest, error) {
	var d sshDest
	if s == "" || strings.ContainsAny(s, " \t\n'\"\\/") {
		return d, fmt.Errorf("ssh %q: want [USER@]HOST[:PORT], without spaces, quotes or '/'", s)
	}
	rest := s
	if u, h, ok := strings.Cut(s, "@"); ok {
		if !sshUserRE.MatchString(u) || strings.Contains(h, "@") {
			return d, fmt.Errorf("ssh %q: want [USER@]HOST[:PORT], the user a login name (letters, digits, '_', '.', '-', not first)", s)
		}
		d.User, rest = u, h
	}
	port := ""
	switch {
	case strings.HasPrefix(rest, "["):
		h, p, err := net.SplitHostPort(rest)
		if err != nil {
			if !strings.HasSuffix(rest, "]") {
				return d, fmt.Errorf("ssh %q: %v", s, err)
			}
			h = strings.TrimSuffix(strings.TrimPrefix(rest, "["), "]")
		}
		d.Host, port = h, p
	case strings.Count(rest, ":") == 1:
		d.Host, port, _ = strings.Cut(rest, ":")
	default:
		d.Host = rest // a name, an IPv4 address, or an IPv6 one without port
	}
	if !sshHostRE.MatchString(d.Host) {
		return d, fmt.Errorf("ssh %q: host %q is not a host name or address", s, d.Host)
	}
	if strings.Contains(d.Host, ":") {
		// Only an IPv6 address has colons; "[0:]" is neither a name
		// nor an address.
		if a, err := netip.ParseAddr(d.Host); err != nil || !a.Is6() {
			return d, fmt.Errorf("ssh %q: host %q is not a host name or address", s, d.Host)
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return d, fmt.Errorf("ssh %q: port %q is not 1 to 65535", s, port)
		}
		d.Port = n
	}
	return d, nil
}

// sshBase is the ssh command: $HINIC_SSH's words, or ssh.
func sshBase() []string {
	if f := strings.Fields(os.Getenv(EnvSSH)); len(f) > 0 {
		return f
	}
	return []string{"ssh"}
}

// sshArgv is the command line that runs the shell command remote on
// host h: ssh -o BatchMode=yes -o ConnectTimeout=30 [-p PORT]
// [USER@]HOST REMOTE.
func (h Host) sshArgv(remote string) []string {
	d, _ := parseSSHDest(h.SSH) // checked with the spec
	// A host that does not answer fails in 30 s rather than after the
	// kernel's TCP timeout (HINIC_SSH's own -o ConnectTimeout comes
	// first and wins).
	argv := append(sshBase(), "-o", "BatchMode=yes", "-o", "ConnectTimeout=30")
	if d.Port != 0 {
		argv = append(argv, "-p", strconv.Itoa(d.Port))
	}
	dest := d.Host
	if d.User != "" {
		dest = d.User + "@" + dest
	}
	return append(argv, dest, remote)
}

// shellQuote quotes s as one word of a POSIX shell: ssh hands the
// command to the remote user's shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellJoin quotes each argument and joins them with spaces.
func shellJoin(args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// hinic is the hinic binary of an ssh host.
func (h Host) hinic() string { return cmp.Or(h.Hinic, "hinic") }

// partDir is the run directory of an ssh host's part on that host:
// RUN-DIR/NAME, RUN-DIR its run-dir or else runDir, the controller's.
func (h Host) partDir(runDir string) string {
	return filepath.Join(cmp.Or(h.RemoteRunDir, runDir), h.Name)
}

// progressRE matches the "[ 12.3s] " a deploy puts before each progress
// line.
var progressRE = regexp.MustCompile(`^\[\s*\d+(\.\d+)?s\] `)

// sshRun runs the shell command remote on host h with stdin (nil for
// none) and returns its standard output. Each line of its standard
// error goes to p (nil: none), less a deploy's own time stamp; an error
// carries the lines that were not progress, which hold the remote
// hinic's (or ssh's) own error.
func (h Host) sshRun(ctx context.Context, stdin []byte, p Progress, remote string) ([]byte, error) {
	argv := h.sshArgv(remote)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("host %s: %s: %w (install an ssh client, or set %s)", h.Name, argv[0], err, EnvSSH)
	}
	// Standard error is read to its end before Wait closes the pipe.
	var errLines []string
	sc := bufio.NewScanner(errPipe)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if loc := progressRE.FindStringIndex(line); loc != nil {
			if p != nil {
				p("%s", line[loc[1]:])
			}
			continue
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		errLines = append(errLines, line)
		if p != nil {
			p("%s", line)
		}
	}
	err = cmd.Wait()
	if err != nil {
		msg := strings.Join(errLines, "\n")
		if len(errLines) > 20 {
			msg = strings.Join(errLines[len(errLines)-20:], "\n")
		}
		if msg == "" {
			msg = err.Error()
		}
		return stdout.Bytes(), fmt.Errorf("host %s (ssh %s): %s: %s", h.Name, h.SSH, remote, msg)
	}
	return stdout.Bytes(), nil
}

// remoteSpec is the rack as an ssh host's part is deployed from: the
// whole rack with its defaults filled in (so that the command line's
// --name, --image and --pcap and every default hold there too), the
// paths of images, debs and files absolute, where that host must hold
// the same files.
func remoteSpec(r *Rack) ([]byte, error) {
	c := *r
	var err error
	if c.Image, err = filepath.Abs(c.Image); err != nil {
		return nil, err
	}
	c.Guests = append([]Guest(nil), r.Guests...)
	for i := range c.Guests {
		g := &c.Guests[i]
		if g.Image, err = filepath.Abs(g.Image); err != nil {
			return nil, err
		}
		g.Debs = append([]string(nil), g.Debs...)
		for j := range g.Debs {
			if g.Debs[j], err = filepath.Abs(g.Debs[j]); err != nil {
				return nil, err
			}
		}
		g.Files = append([]string(nil), g.Files...)
		for j, f := range g.Files {
			local, dst, _ := strings.Cut(f, ":")
			if local, err = filepath.Abs(local); err != nil {
				return nil, err
			}
			g.Files[j] = local + ":" + dst
		}
	}
	var n yaml.Node
	if err := n.Encode(&c); err != nil {
		return nil, err
	}
	pruneZero(&n)
	return yaml.Marshal(&n)
}

// pruneZero drops the keys of mappings whose values are zero (an empty
// string, 0, false, an empty list or mapping): the loader checks a key
// that is present ("" is no host:port), and a rack whose defaults are
// filled in takes them again from nothing. It reports whether n is
// zero itself.
func pruneZero(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			pruneZero(c)
		}
		return false
	case yaml.MappingNode:
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			if !pruneZero(n.Content[i+1]) {
				kept = append(kept, n.Content[i], n.Content[i+1])
			}
		}
		n.Content = kept
		return len(kept) == 0
	case yaml.SequenceNode:
		for _, c := range n.Content {
			pruneZero(c)
		}
		return len(n.Content) == 0
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return n.Value == ""
		case "!!int":
			return n.Value == "0"
		case "!!bool":
			return n.Value == "false"
		case "!!null":
			return true
		}
	}
	return false
}

// upRemote deploys host h's part of rack r on that host over SSH: the
// rack's key pair and spec into its part's run directory, then its own
// `hinic deploy rack --host`. It returns the part's state and the
// guests' host keys its deploy pinned.
func upRemote(ctx context.Context, r *Rack, h Host, key, pub []byte, p Progress) (*State, []byte, error) {
	part := h.partDir(r.RunDir)
	spec, err := remoteSpec(r)
	if err != nil {
		return nil, nil, err
	}
	p("deploying over ssh %s in %s", h.SSH, part)
	// The three files in one connection: a tar stream that the
	// remote tar unpacks under umask 077 (owner only, as the
	// controller's).
	files, err := tarFiles(map[string][]byte{FileKey: key, FileKey + ".pub": pub, FileRemoteSpec: spec})
	if err != nil {
		return nil, nil, err
	}
	q := shellQuote(part)
	if _, err := h.sshRun(ctx, files, nil, "umask 077 && mkdir -p "+q+" && tar --no-same-owner -xf - -C "+q); err != nil {
		return nil, nil, err
	}
	out, upErr := h.sshRun(ctx, nil, p, shellJoin(h.hinic(), "deploy", "rack", filepath.Join(part, FileRemoteSpec),
		"--host", h.Name, "--run-dir", filepath.Dir(part), "-o", "json"))
	var st *State
	if len(bytes.TrimSpace(out)) > 0 {
		st = &State{}
		if err := json.Unmarshal(out, st); err != nil {
			return nil, nil, fmt.Errorf("host %s: the state its deploy printed: %w (%v)", h.Name, err, upErr)
		}
	}
	if upErr != nil {
		return st, nil, upErr
	}
	kf := shellQuote(filepath.Join(part, FileKnownHosts))
	known, err := h.sshRun(ctx, nil, nil, "test ! -e "+kf+" || cat "+kf)
	if err != nil {
		return st, nil, err
	}
	return st, known, nil
}

// tarFiles is a tar archive of regular files named by the keys, mode
// 0600, in name order.
func tarFiles(files map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		b := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// partStatus is the status of host h's part: asked on that machine for
// an ssh host, read here for the others.
func (h HostState) partStatus(ctx context.Context) (*RackStatus, error) {
	if h.SSH == "" {
		return Status(ctx, h.RunDir)
	}
	out, err := h.Host.sshRun(ctx, nil, nil, shellJoin(h.hinic(), "deploy", "status", "--run-dir", h.RunDir, "-o", "json"))
	if err != nil {
		return nil, err
	}
	rs := &RackStatus{}
	if err := json.Unmarshal(out, rs); err != nil {
		return nil, fmt.Errorf("host %s: deploy status: %w", h.Name, err)
	}
	return rs, nil
}

// partDown takes host h's part down: on that machine for an ssh host,
// here for the others. A part that was never deployed is not an error.
func (h HostState) partDown(ctx context.Context, p Progress) error {
	if h.SSH == "" {
		if err := Down(h.RunDir, p); err != nil && !errors.Is(err, ErrNotDeployed) {
			return fmt.Errorf("host %s: %w", h.Name, err)
		}
		return nil
	}
	_, err := h.Host.sshRun(ctx, nil, p, shellJoin(h.hinic(), "deploy", "down", "--run-dir", h.RunDir))
	if err != nil && strings.Contains(err.Error(), ErrNotDeployed.Error()) {
		return nil // the remote hinic's text: its part was never deployed
	}
	return err
}
