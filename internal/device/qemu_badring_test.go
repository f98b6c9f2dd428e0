package device_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/PacketFive/hinic/internal/testutil"
)

// badRingInit is /init of TestQEMUBadRing's guest: up as a verbs guest,
// then ibv_badring against its own device.
const badRingInit = ibGuestUp + `echo HICAIN-BADRING-BEGIN
timeout 200 /ibv_badring hicain_0
echo HICAIN-BADRING-END rc=$?
dmesg | grep -i -E 'hicain|infiniband|rdma|ib_mad'
echo HICAIN-DONE
poweroff -f
`

// badRingCases are the cases ibv_badring must pass (testdata/ibv_badring.c).
var badRingCases = []string{"control", "lkey-other-pd", "lkey-scan", "sge-outside", "opcode", "sq-index",
	"num-sge", "inline-len", "rq-index", "cq-cons", "fork", "cross-context", "resize-cq", "rereg-mr", "cq-ex", "after"}

// TestQEMUBadRing: a user process in a TCG guest writes garbage into
// the rings hicain_ib mapped into it (an unknown opcode, too many SGEs,
// an inline length beyond the stride, SQ and RQ producer indices beyond
// the depth, a CQ consumer index ahead of the device) and posts work
// with lkeys of another PD, lkeys it never registered (the kernel's DMA
// MR among them) and an SGE past its MR's end. Every case must end in
// an error completion or the QP in ERR with a QP_FATAL event, no byte
// may reach the target buffer, a forked child must have no mapping of
// the rings and another context no way to map them, and a well-formed
// write must work afterwards. The backend counts the WQE errors, goes
// fatal for none of them, and the guest logs no kernel warning.
func TestQEMUBadRing(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	qemu, kernel, release, busybox := testutil.GuestBoot(t)
	netKo := buildModule(t, release)
	so, driver := buildProvider(t)
	prog := filepath.Join(t.TempDir(), "ibv_badring")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Werror", "-I../../rdma-core/providers/hicain",
		"-I../../kernel", "-o", prog, "testdata/ibv_badring.c", "-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("ibv_badring build: %v\n%s", err, out)
	}
	srv, cfgs, dir := startTwoVNICs(t, "hbr")
	r, _ := verbsInitramfs(t, busybox, badRingInit, release, netKo, so, driver,
		"ib_core", "ib_uverbs", "ib_umad", "ib_cm", "rdma_cm", "rdma_ucm")
	r.addFile(t, "/ibv_badring", prog, 0o755)
	r.addLibs(t, prog, so)
	initrd := filepath.Join(dir, "initrd.cpio")
	if err := os.WriteFile(initrd, r.w.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 280*time.Second)
	defer cancel()
	g := startGuest(t, ctx, "guest 1", qemu, kernel, initrd, cfgs[0], "hicain.n=1")
	g.wait(ctx, t, "HICAIN-DONE")
	con := g.out.String()
	for _, l := range strings.Split(con, "\n") {
		if strings.Contains(l, "BADRING") || strings.Contains(l, "hicain") {
			t.Logf("%s", strings.TrimSpace(l))
		}
		for _, bad := range []string{"Oops", "BUG:", "WARNING:", "Call Trace", "INSMOD-FAIL", "BADRING-FAIL",
			"libibverbs: Warning"} {
			if strings.Contains(l, bad) {
				t.Errorf("console: %s", strings.TrimSpace(l))
			}
		}
	}
	for _, c := range badRingCases {
		if !strings.Contains(con, "BADRING-OK "+c+"\n") && !strings.Contains(con, "BADRING-OK "+c+"\r\n") {
			t.Errorf("case %s did not pass", c)
		}
	}
	for _, want := range []string{"BADRING-DONE failures=0", "HICAIN-BADRING-END rc=0"} {
		if !strings.Contains(con, want) {
			t.Errorf("console lacks %q", want)
		}
	}
	st := srv.Status().VNICs[0].Counters
	t.Logf("vNIC 1: WQE errors %d, admin errors %d, fatal %d", st.WQEErrors, st.AdminErrors, st.Fatal)
	// The raw WQEs and the bad SQ and RQ indices are the device's to
	// count (the lkey and range checks are the engine's).
	if st.WQEErrors < 5 || st.Fatal != 0 {
		t.Errorf("vNIC 1: WQE errors %d (want at least 5), fatal %d (want 0)", st.WQEErrors, st.Fatal)
	}
}
