package image

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Progress is told about each step of a build: a step starting (detail
// empty), and lines of detail while it runs.
type Progress interface {
	Step(name string)
	Detail(line string)
	Done(name string, d time.Duration)
}

type nopProgress struct{}

func (nopProgress) Step(string)                {}
func (nopProgress) Detail(string)              {}
func (nopProgress) Done(string, time.Duration) {}

// BuildOptions are the inputs of Build besides the spec.
type BuildOptions struct {
	// Dir receives root.qcow2, vmlinuz, initrd.img, manifest.json and
	// build.log.
	Dir string
	// Force rebuilds even when Dir holds an image of the same spec.
	Force    bool
	Progress Progress
}

// Result is what Build returns.
type Result struct {
	Manifest *Manifest
	Dir      string
	Cached   bool
}

// Build makes the image of spec in o.Dir, or returns the image already there
// if it was built from the same spec and its artifacts are intact.
func Build(ctx context.Context, spec Spec, o BuildOptions) (*Result, error) {
	p := o.Progress
	if p == nil {
		p = nopProgress{}
	}
	if missing := MissingTools("mmdebstrap", "mke2fs", "qemu-img"); len(missing) > 0 {
		return nil, ErrMissingTools(missing)
	}
	if os.Geteuid() != 0 {
		// Root mode keeps ownership right without a user namespace and
		// lets the kernel's postinst build the initramfs in a chroot;
		// the unshare mode with a kernel is untested (toolkit-facts 4.5).
		return nil, fmt.Errorf("image: building needs root (mmdebstrap root mode); run it with sudo")
	}
	spec.Recipe = recipeVersion
	key := spec.Key()
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	if !o.Force {
		if m, err := ReadManifest(o.Dir); err == nil && m.Key == key && m.Verify(o.Dir, false) == nil {
			return &Result{Manifest: m, Dir: o.Dir, Cached: true}, nil
		}
	}
	start := time.Now()
	work, err := os.MkdirTemp(o.Dir, ".work-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	logf, err := os.Create(filepath.Join(o.Dir, FileLog))
	if err != nil {
		return nil, err
	}
	defer logf.Close()

	rootfs := filepath.Join(work, "rootfs")
	hook := filepath.Join(work, "customize.sh")
	if err := os.WriteFile(hook, []byte(customizeScript), 0o755); err != nil {
		return nil, err
	}
	keyFile := filepath.Join(work, "authorized_keys")
	if err := os.WriteFile(keyFile, []byte(spec.AuthorizedKey), 0o644); err != nil {
		return nil, err
	}
	include := append([]string{spec.Kernel}, spec.Packages...)
	args := []string{
		"--mode=root", "--variant=minbase", "--components=main",
		"--include=" + strings.Join(include, ","),
		"--aptopt=Acquire::Retries \"3\"",
		"--dpkgopt=path-exclude=/usr/share/man/*",
		"--dpkgopt=path-exclude=/usr/share/locale/*",
		"--dpkgopt=path-include=/usr/share/locale/locale.alias",
	}
	// Local .deb files are copied into the root file system and
	// installed there by apt, which resolves their dependencies from the
	// mirrors. (Given to --include, apt would unpack them from a
	// temporary directory of the host that dpkg, chrooted in root mode,
	// cannot see.)
	if len(spec.Debs) > 0 {
		hooks, err := debHooks(spec.Debs)
		if err != nil {
			return nil, err
		}
		args = append(args, hooks...)
	}
	args = append(args,
		"--customize-hook=sh "+hook+" \"$1\" "+keyFile,
		spec.Suite, rootfs,
	)
	args = append(args, spec.Mirrors...)
	step := func(name string, fn func() error) error {
		t := time.Now()
		p.Step(name)
		fmt.Fprintf(logf, "== %s\n", name)
		if err := fn(); err != nil {
			return err
		}
		p.Done(name, time.Since(t))
		return nil
	}
	if err := step("root file system (mmdebstrap)", func() error {
		return runLogged(ctx, logf, p, "mmdebstrap", args...)
	}); err != nil {
		return nil, fmt.Errorf("image: mmdebstrap: %w (see %s)", err, filepath.Join(o.Dir, FileLog))
	}

	m := &Manifest{
		Name: spec.Name, Key: key, Suite: spec.Suite, Mirrors: spec.Mirrors,
		KernelPackage: spec.Kernel, Cmdline: Cmdline, Spec: spec,
	}
	if err := step("manifest of packages", func() error {
		f, err := os.Open(filepath.Join(rootfs, "var/lib/dpkg/status"))
		if err != nil {
			return err
		}
		defer f.Close()
		m.Packages, err = ParseDpkgStatus(f)
		if err != nil {
			return err
		}
		for _, pk := range m.Packages {
			if pk.Name == spec.Kernel {
				m.KernelVersion = pk.Version
			}
		}
		kernels, _ := filepath.Glob(filepath.Join(rootfs, "boot/vmlinuz-*"))
		if len(kernels) != 1 {
			return fmt.Errorf("%w (found %d)", errNoKernel, len(kernels))
		}
		m.KernelRelease = strings.TrimPrefix(filepath.Base(kernels[0]), "vmlinuz-")
		if err := copyFile(kernels[0], filepath.Join(work, FileKernel)); err != nil {
			return err
		}
		if err := copyFile(filepath.Join(rootfs, "boot/initrd.img-"+m.KernelRelease), filepath.Join(work, FileInitrd)); err != nil {
			return err
		}
		m.RootfsBytes, err = duBytes(rootfs)
		return err
	}); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}

	ext4 := filepath.Join(work, "root.ext4")
	mke2fs, _ := LookTool("mke2fs")
	if err := step("ext4 image (mke2fs -d)", func() error {
		return runLogged(ctx, logf, p, mke2fs, "-q", "-t", "ext4", "-d", rootfs, "-L", "hinicroot",
			"-E", "root_owner=0:0", "-F", ext4, spec.Size)
	}); err != nil {
		return nil, fmt.Errorf("image: mke2fs: %w", err)
	}
	if err := os.RemoveAll(rootfs); err != nil {
		return nil, err
	}
	if err := step("qcow2 (qemu-img convert)", func() error {
		return runLogged(ctx, logf, p, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", ext4, filepath.Join(work, FileQcow2))
	}); err != nil {
		return nil, fmt.Errorf("image: qemu-img: %w", err)
	}
	os.Remove(ext4)

	if err := step("checksums", func() error {
		for _, name := range []string{FileQcow2, FileKernel, FileInitrd} {
			path := filepath.Join(work, name)
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			sum, err := FileSHA256(path)
			if err != nil {
				return err
			}
			m.Artifacts = append(m.Artifacts, Artifact{Name: name, Size: st.Size(), SHA256: sum})
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	// Move the artifacts into place, the manifest last: a directory with a
	// manifest is a complete image.
	os.Remove(filepath.Join(o.Dir, FileManifest))
	for _, a := range m.Artifacts {
		if err := os.Rename(filepath.Join(work, a.Name), filepath.Join(o.Dir, a.Name)); err != nil {
			return nil, err
		}
	}
	m.Built = time.Now().UTC().Truncate(time.Second)
	m.BuildSeconds = time.Since(start).Seconds()
	m.BootCommand = BootCommand(o.Dir, m)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Dir, FileManifest), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	return &Result{Manifest: m, Dir: o.Dir}, nil
}

// BootCommand is a QEMU command line that boots the image in dir under TCG
// with SSH forwarded to 127.0.0.1:2222. It boots the base image read-only
// through -snapshot so that trying it changes nothing.
func BootCommand(dir string, m *Manifest) []string {
	return []string{
		"qemu-system-x86_64", "-accel", "tcg", "-m", "1024", "-smp", "1",
		"-kernel", filepath.Join(dir, FileKernel), "-initrd", filepath.Join(dir, FileInitrd),
		"-append", m.Cmdline,
		"-drive", "file=" + filepath.Join(dir, FileQcow2) + ",if=virtio,format=qcow2", "-snapshot",
		"-netdev", "user,id=n0,hostfwd=tcp:127.0.0.1:2222-:22", "-device", "virtio-net-pci,netdev=n0",
		"-smbios", "type=11,value=io.systemd.credential:ssh.authorized_keys.root=<public key>",
		"-display", "none", "-serial", "stdio", "-no-reboot",
	}
}

func runLogged(ctx context.Context, log io.Writer, p Progress, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	fmt.Fprintf(log, "$ %s %s\n", name, strings.Join(args, " "))
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	cmd.Stdin = nil
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	var tail []string
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			fmt.Fprintln(log, l)
			p.Detail(l)
			tail = append(tail, l)
			if len(tail) > 5 {
				tail = tail[1:]
			}
		}
		io.Copy(io.Discard, pr)
	}()
	err := cmd.Wait()
	pw.Close()
	<-done
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.Join(tail, " | "))
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func duBytes(dir string) (int64, error) {
	var n int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		if info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// debDir is where the .deb files of a spec wait in the root file system
// while apt installs them.
const debDir = "/var/cache/hinic-debs"

// debHooks returns mmdebstrap customize hooks that install the .deb files
// of debs ("sha256:path" entries): copy them in, apt-get install them,
// remove the copies.
func debHooks(debs []string) ([]string, error) {
	var abs, inside []string
	for _, d := range debs {
		_, path, _ := strings.Cut(d, ":")
		a, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		if strings.ContainsAny(a, " \t\n'\"\\") {
			return nil, fmt.Errorf("image: --deb %s: the path must not contain blanks, quotes or backslashes (mmdebstrap's copy-in splits on blanks)", a)
		}
		abs = append(abs, a)
		inside = append(inside, debDir+"/"+filepath.Base(a))
	}
	return []string{
		`--customize-hook=mkdir -p "$1` + debDir + `"`,
		"--customize-hook=copy-in " + strings.Join(abs, " ") + " " + debDir,
		`--customize-hook=chroot "$1" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ` +
			strings.Join(inside, " "),
		`--customize-hook=rm -rf "$1` + debDir + `"`,
	}, nil
}

// customizeScript runs on the host as mmdebstrap's customize hook with the
// root file system as $1 and the authorized_keys file (maybe empty) as $2.
const customizeScript = `set -eu
R="$1"
echo hinic-vm > "$R/etc/hostname"
cat > "$R/etc/hosts" <<'EOF'
127.0.0.1	localhost
127.0.1.1	hinic-vm
::1	localhost ip6-localhost ip6-loopback
ff02::1	ip6-allnodes
ff02::2	ip6-allrouters
EOF
echo "nameserver 10.0.2.3" > "$R/etc/resolv.conf"
printf '/dev/vda / ext4 defaults,errors=remount-ro 0 1\n' > "$R/etc/fstab"
mkdir -p "$R/etc/systemd/network"
# The management NIC (QEMU user networking) is the first virtio-net NIC;
# data NICs are configured by hinic deploy.
printf '[Match]\nName=ens3\n\n[Network]\nDHCP=ipv4\nLinkLocalAddressing=no\n' > "$R/etc/systemd/network/10-mgmt.network"
mkdir -p -m 700 "$R/root/.ssh"
if [ -s "$2" ]; then install -m 600 "$2" "$R/root/.ssh/authorized_keys"; fi
mkdir -p "$R/etc/ssh/sshd_config.d"
printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n' > "$R/etc/ssh/sshd_config.d/hinic.conf"
# Host keys are made at first boot, so each guest has its own.
rm -f "$R"/etc/ssh/ssh_host_*
cat > "$R/etc/systemd/system/hinic-ssh-keygen.service" <<'EOF'
[Unit]
Description=Generate SSH host keys (first boot)
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
RequiredBy=ssh.service
EOF
echo rdma_rxe > "$R/etc/modules-load.d/hinic.conf"
chroot "$R" systemctl enable systemd-networkd hinic-ssh-keygen.service
chroot "$R" systemctl mask e2scrub_reap.service systemd-networkd-wait-online.service
chroot "$R" systemctl disable opensm.service 2>/dev/null || true
`
