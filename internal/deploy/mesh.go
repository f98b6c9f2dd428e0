package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// The guests' own SSH mesh, so that tools that start processes on other
// guests over ssh (mpirun, the hostfile's hosts) work between them.
const (
	// FileMeshKey, in the run directory, is the key every guest of the
	// rack uses to reach the others. It is not the key the host uses to
	// reach the guests: a guest holds it, and only the rack's guests
	// accept it.
	FileMeshKey = "mesh_ed25519"
	// GuestHostfile is the Open MPI hostfile written in every guest: one
	// line per guest of the rack, "NAME slots=CPUS", in the spec's order.
	GuestHostfile = "/etc/hinic/hostfile"
	// meshHostsTag marks the lines deploy owns in the guests' /etc/hosts.
	meshHostsTag = "# hinic rack"
)

// meshGuest is what the mesh needs of one ready guest.
type meshGuest struct {
	name, ip string
	cpus     int
	hostKey  string // "ssh-ed25519 AAAA..."
	c        *Client
}

// setupMesh gives every ready guest the rack's mesh key, the other
// guests' host keys, their names in /etc/hosts (the data IPs) and the
// hostfile, then checks that each guest reaches every other with ssh in
// batch mode. It runs after every guest is up; guests that are not ready
// are left out of it.
func setupMesh(ctx context.Context, st *State, p Progress) error {
	r := &st.Rack
	var ready []*GuestState
	for i := range st.Guests {
		if st.Guests[i].Ready {
			ready = append(ready, &st.Guests[i])
		}
	}
	if len(ready) < 2 {
		return nil
	}
	keyPath := filepath.Join(r.RunDir, FileMeshKey)
	_, pub, err := EnsureKey(keyPath)
	if err != nil {
		return fmt.Errorf("mesh key: %w", err)
	}
	priv, err := os.ReadFile(keyPath)
	if err != nil {
		return err
	}
	t0 := time.Now()
	guests := make([]*meshGuest, len(ready))
	defer func() {
		for _, g := range guests {
			if g != nil && g.c != nil {
				g.c.Close()
			}
		}
	}()
	cpus := map[string]int{}
	for _, g := range r.Guests {
		cpus[g.Name] = g.CPUs
	}
	err = forEach(len(ready), func(i int) error {
		gs := ready[i]
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		c, err := st.Connect(cctx, gs)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", gs.Name, err)
		}
		mg := &meshGuest{name: gs.Name, ip: gs.DataIP, cpus: max(cpus[gs.Name], 1), c: c}
		guests[i] = mg
		out, err := c.Run(ctx, "cat /etc/ssh/ssh_host_ed25519_key.pub")
		if err != nil {
			return fmt.Errorf("%s: host key: %w", gs.Name, err)
		}
		if mg.hostKey, err = hostKeyLine(out); err != nil {
			return fmt.Errorf("%s: %w", gs.Name, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deploy: guest mesh: %w", err)
	}
	script := meshScript(guests, string(priv), pub)
	err = forEach(len(guests), func(i int) error {
		if out, err := guests[i].c.Run(ctx, script); err != nil {
			return fmt.Errorf("%s: %w: %s", guests[i].name, err, lastLines(out, 5))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deploy: guest mesh: %w", err)
	}
	// Each guest reaches every other by name, as mpirun will.
	err = forEach(len(guests), func(i int) error {
		for _, o := range guests {
			if o == guests[i] {
				continue
			}
			cmd := "ssh -o BatchMode=yes -o ConnectTimeout=30 " + o.name + " hostname"
			out, err := guests[i].c.Run(ctx, cmd)
			if err != nil || strings.TrimSpace(out) != o.name {
				return fmt.Errorf("%s cannot ssh to %s: %v: %s", guests[i].name, o.name, err, lastLines(out, 3))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deploy: guest mesh: %w", err)
	}
	p("mesh: %d guests reach each other with ssh (hostfile %s) in %.1f s", len(guests), GuestHostfile, time.Since(t0).Seconds())
	return nil
}

// hostKeyLine returns "TYPE BASE64" of an OpenSSH public key file.
func hostKeyLine(pub string) (string, error) {
	f := strings.Fields(pub)
	if len(f) < 2 || !strings.HasPrefix(f[0], "ssh-") {
		return "", fmt.Errorf("not an SSH public key: %.60q", pub)
	}
	return f[0] + " " + f[1], nil
}

// meshScript is the shell script that writes one guest's part of the
// mesh. It is the same for every guest, and idempotent: a redeploy
// replaces what the last one wrote.
func meshScript(guests []*meshGuest, priv, pub string) string {
	var known, hosts, hostfile strings.Builder
	for _, g := range guests {
		fmt.Fprintf(&known, "%s,%s %s\n", g.name, g.ip, g.hostKey)
		fmt.Fprintf(&hosts, "%s %s %s\n", g.ip, g.name, meshHostsTag)
		fmt.Fprintf(&hostfile, "%s slots=%d\n", g.name, g.cpus)
	}
	names := make([]string, len(guests))
	for i, g := range guests {
		names[i] = g.name
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("set -e\numask 077\nmkdir -p /root/.ssh " + filepath.Dir(GuestHostfile) + "\n")
	heredoc(&b, "/root/.ssh/id_ed25519", priv)
	heredoc(&b, "/root/.ssh/id_ed25519.pub", pub+"\n")
	// authorized_keys2 (sshd reads it besides authorized_keys) so that
	// the host's key, which systemd provisions into authorized_keys, is
	// left alone.
	heredoc(&b, "/root/.ssh/authorized_keys2", pub+" hinic rack mesh\n")
	heredoc(&b, "/root/.ssh/known_hosts", known.String())
	heredoc(&b, GuestHostfile, hostfile.String())
	b.WriteString("chmod 644 " + GuestHostfile + "\n")
	b.WriteString("sed -i '/ " + meshHostsTag + "$/d' /etc/hosts\n")
	b.WriteString("cat >> /etc/hosts <<'HINIC_EOF'\n" + hosts.String() + "HINIC_EOF\n")
	return b.String()
}

func heredoc(b *strings.Builder, path, content string) {
	fmt.Fprintf(b, "cat > %s <<'HINIC_EOF'\n%sHINIC_EOF\n", path, content)
}

// forEach runs fn(0..n-1) in parallel and joins their errors.
func forEach(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
