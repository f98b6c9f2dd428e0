package accel

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/testutil"
)

// userspaceMarker is what the test guest's /init prints once the kernel
// has handed over to user space.
const userspaceMarker = "HINIC-USERSPACE-OK"

// TestProbeMatchesGuestBoot runs the probe for real on this host, then
// boots a guest to user space under -accel kvm (the stock kernel with a
// busybox initramfs) and checks that the probe's verdict is what that boot
// shows: KVM passes the probe exactly when the guest reaches user space.
// The same guest under TCG must reach user space, so that a failing KVM
// boot is KVM's and not the test guest's.
func TestProbeMatchesGuestBoot(t *testing.T) {
	if testing.Short() {
		t.Skip("boots QEMU guests")
	}
	qemu, kernel, _, busybox := testutil.GuestBoot(t)

	ctx := context.Background()
	p := &Prober{CacheDir: t.TempDir(), NoCache: true}
	v, err := p.Probe(ctx, kernel)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("probe: kvm=%v: %s (host: /dev/kvm %s, %s; %.1f s)", v.KVM, v.Reason, v.Host.DevKVM, v.Host.Summary(), v.Seconds)
	if v.Host.DevKVM != "ok" && v.KVM {
		t.Fatalf("KVM passes with /dev/kvm %s", v.Host.DevKVM)
	}

	ird, err := testutil.BusyboxInitramfs(busybox,
		"#!/bin/sh\n/bin/busybox echo "+userspaceMarker+"\n/bin/busybox poweroff -f\n", "proc")
	if err != nil {
		t.Fatal(err)
	}
	initrd := filepath.Join(t.TempDir(), "initrd.cpio")
	if err := os.WriteFile(initrd, ird.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	boot := func(accel string, timeout time.Duration) (bool, Boot) {
		b := bootWith(ctx, qemu, timeout, accel, "-kernel", kernel, "-initrd", initrd,
			"-append", "console=ttyS0 panic=-1 quiet")
		return strings.Contains(string(b.Console), userspaceMarker), b
	}

	// Under TCG a two-core host takes about ten seconds.
	if ok, b := boot(TCG, 120*time.Second); !ok {
		t.Fatalf("the test guest did not reach user space under TCG: %s %s", lastLines(string(b.Console), 5), b.Stderr)
	}
	// A working KVM boots it in a few seconds; give it ample time, so that
	// a slow KVM is not taken for a broken one.
	ok, b := boot(KVM, 45*time.Second)
	t.Logf("guest under -accel kvm: user space %v after %.1f s (exited %v; console %q; qemu %q)",
		ok, b.Elapsed.Seconds(), b.Exited, lastLines(string(b.Console), 2), lastLines(string(b.Stderr), 1))
	if ok != v.KVM {
		t.Errorf("the probe says kvm=%v (%s), but a guest under -accel kvm reached user space: %v", v.KVM, v.Reason, ok)
	}
}
