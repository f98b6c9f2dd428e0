package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	"num-sge", "inline-len", "rq-index", "cq-cons", "fork", "cross-context", "resize-cq", "rereg-mr", "cq-ex", "parent-domain", "import", "rq-full", "qp-ex", "xrc", "paged-cq", "mw", "after"}

// TestQEMUBadRing: a user process in a TCG guest writes garbage into
// the rings hicain_ib mapped into it (an unknown opcode, too many SGEs,
// an inline length beyond the stride, SQ and RQ producer indices beyond
// the depth, a CQ consumer index ahead of the device) and posts work
// with lkeys of another PD, lkeys it never registered (the kernel's DMA
// MR among them) and an SGE past its MR's end. Every case must end in
// an error completion or the QP in ERR with a QP_FATAL event, no byte
// may reach the target buffer, a forked child must have no mapping of
// the rings and another context no way to map them, and a well-formed
// write must work afterwards. An RQ takes its depth of receives and no
// more, although the device empties the ring ahead. The extended post API (ibv_wr_*) moves
// data with every operation the device has in one batch, drops a batch
// with a bad entry whole and refuses posts in Reset. Memory windows (mw) bind,
// grant and refuse as the responder's checks say, SEND_WITH_INV frees a window,
// and hand-written BIND_MW WQEs with a foreign or unknown window or a range past
// the MR complete with MW_BIND_ERR. The backend counts the WQE errors, goes
// fatal for none of them, and the guest logs no kernel warning.
func TestQEMUBadRing(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	qemu, kernel, release, busybox := testutil.GuestBoot(t)
	netKo := buildModule(t, release)
	so, driver := buildProvider(t)
	prog := filepath.Join(t.TempDir(), "ibv_badring")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-Werror", "-I../../../rdma-core/providers/hicain",
		"-I../../../kernel", "-o", prog, "testdata/ibv_badring.c", "-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("ibv_badring build: %v\n%s", err, out)
	}
	srv, cfgs, dir := startTwoVNICs(t, "hbr")
	r, _ := verbsInitramfs(t, busybox, badRingInit, release, netKo, so, driver,
		"ib_core", "ib_uverbs", "ib_umad", "ib_cm", "rdma_cm", "rdma_ucm")
	r.AddFile(t, "/ibv_badring", prog, 0o755)
	r.AddLibs(t, prog, so)
	initrd := filepath.Join(dir, "initrd.cpio")
	if err := os.WriteFile(initrd, r.W.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 280*time.Second)
	defer cancel()
	g := startGuest(t, ctx, "guest 1", qemu, kernel, initrd, cfgs[0], "hicain.n=1")
	g.Wait(ctx, t, "HICAIN-DONE")
	con := g.Out.String()
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

// abiMismatchInit is /init of TestQEMUABIMismatch's guest.
const abiMismatchInit = ibGuestUp + `ibv_devinfo 2>&1
echo HICAIN-DEVINFO rc=$?
echo HICAIN-DONE
poweroff -f
`

// uverbsABI returns HICAIN_UVERBS_ABI_VERSION of kernel/hicain_uverbs_abi.h.
func uverbsABI(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("../../../kernel/hicain_uverbs_abi.h")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#define HICAIN_UVERBS_ABI_VERSION\s+(\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("hicain_uverbs_abi.h defines no HICAIN_UVERBS_ABI_VERSION")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestQEMUABIMismatch: a provider of another uverbs ABI than the kernel
// module (the one before the module's) never drives the device:
// libibverbs refuses it with a warning that names both versions, and
// lists no device.
func TestQEMUABIMismatch(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	qemu, kernel, release, busybox := testutil.GuestBoot(t)
	tools := lookTools(t, "ibverbs-utils", "ibv_devinfo")
	netKo := buildModule(t, release)
	abi := uverbsABI(t)
	so, driver := buildProviderABI(t, abi-1)
	_, cfgs, dir := startTwoVNICs(t, "hab")
	r, _ := verbsInitramfs(t, busybox, abiMismatchInit, release, netKo, so, driver,
		"ib_core", "ib_uverbs", "ib_umad", "ib_cm", "rdma_cm", "rdma_ucm")
	for _, p := range tools {
		r.AddFile(t, p, p, 0o755)
	}
	r.AddLibs(t, append([]string{so}, tools...)...)
	initrd := filepath.Join(dir, "initrd.cpio")
	if err := os.WriteFile(initrd, r.W.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Second)
	defer cancel()
	g := startGuest(t, ctx, "guest 1", qemu, kernel, initrd, cfgs[0], "hicain.n=1")
	g.Wait(ctx, t, "HICAIN-DONE")
	con := g.Out.String()
	t.Logf("ibv_devinfo:\n%s", section(con, "HICAIN-UP", "HICAIN-DEVINFO"))
	want := fmt.Sprintf("Driver hicain does not support the kernel ABI of %d (supports %d to %d)", abi, abi-1, abi-1)
	if !strings.Contains(con, want) {
		t.Errorf("console lacks %q", want)
	}
	if strings.Contains(con, "hca_id:") {
		t.Error("ibv_devinfo listed the device through a provider of another ABI")
	}
	for _, bad := range []string{"Oops", "BUG:", "WARNING:", "Call Trace", "INSMOD-FAIL"} {
		if strings.Contains(con, bad) {
			t.Errorf("console shows %q", bad)
		}
	}
}
