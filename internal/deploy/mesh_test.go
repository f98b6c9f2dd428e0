package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestHostKeyLine(t *testing.T) {
	got, err := hostKeyLine("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB root@hinic-vm\n")
	if err != nil || got != "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB" {
		t.Fatalf("%q, %v", got, err)
	}
	for _, bad := range []string{"", "cat: /etc/ssh/ssh_host_ed25519_key.pub: No such file or directory", "ssh-ed25519"} {
		if _, err := hostKeyLine(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestMeshScript runs the mesh script in a shell with the guest's paths
// moved under a temporary root, twice (a redeploy), and checks what it
// leaves: the key pair, the authorized key beside the host's, every
// guest's host key, one /etc/hosts line per guest and the hostfile.
func TestMeshScript(t *testing.T) {
	guests := []*meshGuest{
		{name: "vm-a", ip: "10.43.0.1", cpus: 1, hostKey: "ssh-ed25519 KEYA"},
		{name: "vm-b", ip: "10.43.0.2", cpus: 2, hostKey: "ssh-ed25519 KEYB"},
	}
	script := meshScript(guests, "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n", "ssh-ed25519 MESH")
	root := t.TempDir()
	for _, d := range []string{"root/.ssh", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hosts := filepath.Join(root, "etc/hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "root/.ssh/authorized_keys"), []byte("ssh-ed25519 HOST\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	local := strings.NewReplacer(" /root/", " "+root+"/root/", " /etc/", " "+root+"/etc/").Replace(script)
	for range 2 {
		if out, err := exec.Command("sh", "-c", local).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s\n%s", err, out, local)
		}
	}
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for path, want := range map[string]string{
		"root/.ssh/id_ed25519":       "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n",
		"root/.ssh/id_ed25519.pub":   "ssh-ed25519 MESH\n",
		"root/.ssh/authorized_keys":  "ssh-ed25519 HOST\n",
		"root/.ssh/authorized_keys2": "ssh-ed25519 MESH hinic rack mesh\n",
		"root/.ssh/known_hosts":      "vm-a,10.43.0.1 ssh-ed25519 KEYA\nvm-b,10.43.0.2 ssh-ed25519 KEYB\n",
		"etc/hinic/hostfile":         "vm-a slots=1\nvm-b slots=2\n",
		"etc/hosts":                  "127.0.0.1 localhost\n10.43.0.1 vm-a # hinic rack\n10.43.0.2 vm-b # hinic rack\n",
	} {
		if got := read(path); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	fi, err := os.Stat(filepath.Join(root, "root/.ssh/id_ed25519"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v, %v", fi.Mode().Perm(), err)
	}
}

func TestForgetHostKey(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "known_hosts")
	in := "[127.0.0.1]:2262 ssh-ed25519 AAAA1\n[127.0.0.1]:2263 ssh-ed25519 AAAA2\n[127.0.0.1]:22620 ssh-ed25519 AAAA3\n"
	if err := os.WriteFile(path, []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ForgetHostKey(path, "127.0.0.1:2262"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := "[127.0.0.1]:2263 ssh-ed25519 AAAA2\n[127.0.0.1]:22620 ssh-ed25519 AAAA3\n"; string(b) != want {
		t.Errorf("known_hosts %q, want %q", b, want)
	}
	if err := ForgetHostKey(filepath.Join(dir, "none"), "127.0.0.1:2262"); err != nil {
		t.Errorf("a missing file: %v", err)
	}
}
