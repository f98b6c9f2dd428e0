#!/usr/bin/env bash
# make e2e: the VM gate on both NICs, side by side.
#
#   1. the guest image (Debian 12, Soft-RoCE tools), cached;
#   2. a two-guest Soft-RoCE rack on HiSwitch -> SSH gate -> rack down;
#   3. HiNIC's packages for the image's kernel (hinic pkg build), and the
#      HiNIC image: the same spec plus those packages (hinic image build
#      --deb), cached while the packages' bytes are unchanged;
#   4. a two-guest HiNIC rack (hinic device serve + HiSwitch) -> the same
#      SSH gate -> the packages' life cycle in a guest (dpkg -r, -P, -i,
#      modprobe, ibv_devices) -> rack down;
#   5. a two-guest native InfiniBand rack (HiNIC vNICs with link ib on
#      two HiSwitches joined by a cable, OpenSM in vm-a, IPoIB) -> the SSH
#      gate's InfiniBand variant (LID addressing, the infiniband-diags
#      cases, RDMA CM over IPoIB) -> rack down;
#   5b. a two-guest RoCEv2 rack across two HiSwitches (one guest per TOR,
#      the TORs joined by an Ethernet cable) -> the RoCEv2 SSH gate ->
#      rack down;
#   6. the interop rack: a HiNIC guest and a Soft-RoCE guest on one
#      HiSwitch -> the interop cases of the SSH gate (ibv_rc_pingpong,
#      ib_write_bw, ib_read_bw, ib_atomic_bw, ib_send_lat) with the HiNIC
#      guest as client (requester) and the Soft-RoCE guest as server
#      (responder), then the other way round -> rack down;
#   6b. the libvirt rack: mixed.yaml's two guests as libvirt domains
#      (testdata/racks/libvirt.yaml) through a libvirtd the test starts,
#      three gate cases, deploy down, no domain left (go test -run
#      TestLibvirtRack ./internal/cli/verify/e2e, about 5 minutes);
#   6c. the host package's systemd units under a real systemd: the hinic
#      package and internal/deploy's test binary built here, a guest of
#      the Soft-RoCE image (its PID 1 is systemd) that installs the
#      package and starts a libvirt host's fabric and device backend as
#      hinic-fabric@ and hinic-device@ with deploy's own code (go test
#      -run TestHostUnits ./internal/cli/verify/e2e, about 2 minutes);
#   6d. only with E2E_TWOHOST=1 (or E2E_ONLY=twohost): the racks across
#      two hosts, each the whole gate across a VXLAN link between two
#      network namespaces (RoCEv2, host b reached over SSH) and across an
#      IB-over-UDP link (native InfiniBand, OpenSM) (go test -run
#      'TestTwoHost(IB)?Rack' ./internal/cli/verify/e2e, about 12
#      minutes);
#   7. both RoCEv2 gates' figures in one table with the HiNIC/Soft-RoCE
#      ratio of every case, and HiNIC's RoCEv2 and InfiniBand figures in
#      another (hinic verify compare).
#   With E2E_GPU=1 (the default; 0 leaves it out): the HiGPU runtime's
#   packages (libhicart1, hicart-tools) are built with HiNIC's and go
#   into the HiNIC image too, and after the HiNIC rack a GPU rack (two
#   hicain guests with two HiGPUs each, hinic gpu serve beside hinic
#   device serve, all four on the rack's HiLink switch) runs the gate's
#   GPU cases only (hicart_smi, hicart_test, hicart_bandwidth) and its
#   HiLink cases (hicart_smi_topo, hicart_p2p, hicart_allreduce, in both
#   guests at once) -> the runtime packages' life cycle
#   in a guest (scripts/guest-gpu-pkg-cycle.sh) -> rack down. One more
#   rack deploy, about 3 minutes under TCG.
# Prints the time of each stage. Needs root (mmdebstrap root mode) and the
# host tools of `hinic doctor`; KVM is not needed (TCG).
#
#   HINIC        the hinic binary (default bin/hinic)
#   E2E_IMAGE    the Soft-RoCE image directory, reused when its spec is
#                unchanged (default .cache/images/hinic-guest; keep .cache/
#                between CI runs)
#   E2E_HIMAGE   the HiNIC image directory (default .cache/images/hinic-hicain)
#   E2E_DIR      outputs (default .cache/e2e): rxe/, hicain/ and ib/
#                (gate.txt, gate.json, gate.xml, raw tool outputs, status),
#                mixed/hicain-to-rxe/ and mixed/rxe-to-hicain/ (the same
#                for each direction of the interop rack),
#                debs/, pkg-cycle.txt, compare.txt, compare.json,
#                compare-ib.txt, compare-ib.json, timings.txt, and
#                failures.txt (what failed, also printed last) on failure
#   E2E_RACK     Soft-RoCE rack spec (default testdata/racks/two-rxe.yaml)
#   E2E_HRACK    HiNIC rack spec (default testdata/racks/two-hicain.yaml)
#   E2E_IRACK    InfiniBand rack spec (default testdata/racks/two-ib.yaml)
#   E2E_RRACK    two-TOR RoCEv2 rack spec (default
#                testdata/racks/two-racks-roce.yaml); outputs in roce2/
#   E2E_MRACK    interop rack spec (default testdata/racks/mixed.yaml): its
#                vm-a has the HiNIC vNIC, its vm-b Soft-RoCE
#   E2E_GRACK    GPU rack spec (default testdata/racks/two-hicain-gpu.yaml)
#   E2E_GPU      1: the GPU stage (the default), 0: none; outputs in gpu/
#   E2E_ONLY     rxe, hicain, ib, roce2, mixed, libvirt, units, twohost or
#                gpu: run one rack only (no comparison); gpu implies
#                E2E_GPU=1
#   E2E_TWOHOST  1: the two-host racks' stage too, 0: not (the default)
#   GO           the go command of the libvirt, units and twohost stages
#                (default go)
set -euo pipefail

HINIC=${HINIC:-bin/hinic}
IMAGE=${E2E_IMAGE:-.cache/images/hinic-guest}
HIMAGE=${E2E_HIMAGE:-.cache/images/hinic-hicain}
OUT=${E2E_DIR:-.cache/e2e}
SPEC=${E2E_RACK:-testdata/racks/two-rxe.yaml}
HSPEC=${E2E_HRACK:-testdata/racks/two-hicain.yaml}
ISPEC=${E2E_IRACK:-testdata/racks/two-ib.yaml}
RSPEC=${E2E_RRACK:-testdata/racks/two-racks-roce.yaml}
MSPEC=${E2E_MRACK:-testdata/racks/mixed.yaml}
GSPEC=${E2E_GRACK:-testdata/racks/two-hicain-gpu.yaml}
ONLY=${E2E_ONLY:-}
GPU=${E2E_GPU:-1}
TWOHOST=${E2E_TWOHOST:-0}
case $ONLY in "" | rxe | hicain | ib | roce2 | mixed | libvirt | units) ;; gpu) GPU=1 ;; twohost) TWOHOST=1 ;; *)
	echo "e2e: E2E_ONLY is rxe, hicain, ib, roce2, mixed, libvirt, units, twohost or gpu, not $ONLY" >&2
	exit 2
	;;
esac
case $GPU in 0 | 1) ;; *) echo "e2e: E2E_GPU is 0 or 1, not $GPU" >&2; exit 2 ;; esac
case $TWOHOST in 0 | 1) ;; *) echo "e2e: E2E_TWOHOST is 0 or 1, not $TWOHOST" >&2; exit 2 ;; esac
# The cases of the GPU rack: its NICs are the HiNIC rack's, checked there.
GPU_CASES=(hicart_smi hicart_test hicart_bandwidth hicart_smi_topo hicart_p2p hicart_allreduce)
# The cases of the interop rack, run from each NIC to the other.
INTEROP_CASES=(ibv_rc_pingpong ib_write_bw ib_read_bw ib_atomic_bw ib_send_lat)

rm -rf "$OUT" && mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
now() { date +%s.%N; }
declare -a times
stage() { times+=("$(awk -v a="$(now)" -v b="$2" -v n="$1" 'BEGIN { printf "%-16s %7.1f s", n, a - b }')"); }

RUN_DIR=
down() {
	[[ -n $RUN_DIR ]] || return 0
	"$HINIC" deploy down --run-dir "$RUN_DIR" || true
	# Nothing of the rack may be left running.
	if [[ -f $RUN_DIR/state.json ]] && "$HINIC" deploy status --run-dir "$RUN_DIR" -o json 2>/dev/null |
		grep -q '"state": "running"'; then
		echo "e2e: a guest is still running after deploy down" >&2
		exit 1
	fi
	RUN_DIR=
}
trap down EXIT

failed=0
declare -a failures
# fail WHAT [GATE_TXT]: records a failure, with the failing cases of a
# gate's table when given, for the summary printed last (CI logs often
# keep only the tail).
fail() {
	failed=1
	failures+=("$1")
	if [[ -n ${2:-} && -f $2 ]]; then
		while IFS= read -r line; do failures+=("    ${line:0:400}"); done < <(awk '$2 == "fail" || $2 == "error"' "$2")
	fi
}
# step NAME LOG WHAT CMD...: runs CMD (standard input passed on; its
# output also into LOG) as the stage NAME; a failure is recorded as WHAT
# with the log's last lines, not fatal.
step() {
	local name=$1 log=$2 what=$3 t rc line
	shift 3
	t=$(now)
	set +e
	"$@" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	set -e
	stage "$name" "$t"
	if ((rc != 0)); then
		echo "e2e: $what failed (exit $rc)" >&2
		fail "$what (exit $rc), $log ends:"
		while IFS= read -r line; do failures+=("    ${line:0:400}"); done < <(tail -n 5 "$log")
	fi
}
# rack NAME SPEC IMAGE [GATE-ARGS...]: deploy, status, gate (with the
# extra arguments of verify e2e, e.g. --case), leaving the rack up; the
# gate's failure is recorded, not fatal, so that down and the comparison
# still run. The spec says whether the rack captures its ports (pcap):
# the two racks the comparison measures (two-rxe.yaml, two-hicain.yaml)
# do not, since a capture copies every frame into the page cache at each
# port it crosses, which on a 2-core machine halved HiNIC's bandwidth
# (docs/deploy.md, "make e2e"); the others do, and their gates end with
# capture_icrc. The interop rack's checks both NICs' frames.
rack() {
	local name=$1 spec=$2 image=$3 t rc
	shift 3
	RUN_DIR=/tmp/hinic-rack-e2e-$name
	rm -rf "$RUN_DIR"
	mkdir -p "$OUT/$name"
	t=$(now)
	"$HINIC" deploy rack "$spec" --run-dir "$RUN_DIR" --image "$image" -o json > "$OUT/$name/deploy.json"
	stage "$name deploy" "$t"
	"$HINIC" deploy status --run-dir "$RUN_DIR" | tee "$OUT/$name/status.txt"
	t=$(now)
	set +e
	"$HINIC" verify e2e --rack "$RUN_DIR" "$@" --save "$OUT/$name/raw" --junit "$OUT/$name/gate.xml" \
		--json "$OUT/$name/gate.json" | tee "$OUT/$name/gate.txt"
	rc=${PIPESTATUS[0]}
	set -e
	stage "$name gate" "$t"
	if ((rc != 0)); then
		echo "e2e: the $name gate failed (exit $rc)" >&2
		fail "the $name gate (exit $rc), $OUT/$name/gate.txt:" "$OUT/$name/gate.txt"
	fi
}

# interop SPEC IMAGE: the interop rack up, the interop cases with each
# guest as the client (the requester of WRITEs, READs and atomics) in
# turn, down. Failures are recorded like the gates'.
interop() {
	local spec=$1 image=$2 t rc dir srv cli
	RUN_DIR=/tmp/hinic-rack-e2e-mixed
	rm -rf "$RUN_DIR"
	mkdir -p "$OUT/mixed"
	t=$(now)
	"$HINIC" deploy rack "$spec" --run-dir "$RUN_DIR" --image "$image" --pcap -o json > "$OUT/mixed/deploy.json"
	stage "mixed deploy" "$t"
	"$HINIC" deploy status --run-dir "$RUN_DIR" | tee "$OUT/mixed/status.txt"
	local cases=()
	for c in "${INTEROP_CASES[@]}"; do cases+=(--case "$c"); done
	# DIR SERVER CLIENT: vm-a is the HiNIC guest, vm-b the Soft-RoCE one.
	for run in "hicain-to-rxe vm-b vm-a" "rxe-to-hicain vm-a vm-b"; do
		read -r dir srv cli <<<"$run"
		# After the second direction, the captures hold both NICs'
		# traffic both ways: check them.
		if [[ $dir == rxe-to-hicain ]]; then cases+=(--case capture_icrc); fi
		mkdir -p "$OUT/mixed/$dir"
		t=$(now)
		set +e
		"$HINIC" verify e2e --rack "$RUN_DIR" --server "$srv" --client "$cli" "${cases[@]}" \
			--save "$OUT/mixed/$dir/raw" --junit "$OUT/mixed/$dir/gate.xml" --json "$OUT/mixed/$dir/gate.json" |
			tee "$OUT/mixed/$dir/gate.txt"
		rc=${PIPESTATUS[0]}
		set -e
		stage "mixed $dir" "$t"
		if ((rc != 0)); then
			echo "e2e: the interop gate $dir failed (exit $rc)" >&2
			fail "the interop gate $dir (exit $rc), $OUT/mixed/$dir/gate.txt:" "$OUT/mixed/$dir/gate.txt"
		fi
	done
	rack_down mixed
}

rack_down() {
	local t
	t=$(now)
	down
	stage "$1 down" "$t"
}

"$HINIC" doctor

t=$(now)
"$HINIC" image build --dir "$IMAGE" -o json > "$OUT/manifest.json"
stage image "$t"
KVER=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["kernel_release"])' < "$OUT/manifest.json")
KPKG=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["kernel_package"])' < "$OUT/manifest.json")
echo "e2e: guest kernel $KVER ($KPKG)"

if [[ -z $ONLY || $ONLY == rxe ]]; then
	rack rxe "$SPEC" "$IMAGE"
	rack_down rxe
fi

if [[ $ONLY != rxe && $ONLY != units ]]; then
	t=$(now)
	only=hicain-modules,libhicain
	if ((GPU)); then only+=,libhicart1,hicart-tools,libhicart-dev; fi
	"$HINIC" pkg build --fix --kernel "$KVER" --only "$only" --out "$OUT/debs" | tee "$OUT/debs.txt"
	# The modules package and the provider first: the packages' life
	# cycle below takes them by index.
	debs=("$OUT"/debs/hicain-modules-"$KVER"_*.deb "$OUT"/debs/libhicain_*.deb)
	if ((GPU)); then debs+=("$OUT"/debs/libhicart1_*.deb "$OUT"/debs/hicart-tools_*.deb); fi
	# libhicart-dev stays out of the image: the life cycle installs it.
	devdeb=
	if ((GPU)); then devdeb=$(ls "$OUT"/debs/libhicart-dev_*.deb); fi
	for d in "${debs[@]}"; do
		[[ -f $d ]] || { echo "e2e: hinic pkg build made no $d" >&2; exit 1; }
	done
	stage packages "$t"

	t=$(now)
	debargs=()
	for d in "${debs[@]}"; do debargs+=(--deb "$d"); done
	"$HINIC" image build --dir "$HIMAGE" --kernel "$KPKG" "${debargs[@]}" -o json > "$OUT/hicain-manifest.json"
	stage "hicain image" "$t"

fi

if [[ -z $ONLY || $ONLY == hicain ]]; then
	rack hicain "$HSPEC" "$HIMAGE"
	step "pkg cycle" "$OUT/pkg-cycle.txt" "the packages' life cycle in vm-b" \
		"$HINIC" deploy exec --run-dir "$RUN_DIR" vm-b --upload "${debs[0]}:/root/hicain-modules.deb" \
		--upload "${debs[1]}:/root/libhicain.deb" -- "mkdir -p /root/hicain-debs && mv /root/hicain-modules.deb /root/libhicain.deb /root/hicain-debs/ && KVER=$KVER DEBS=/root/hicain-debs sh -s" \
		< scripts/guest-pkg-cycle.sh
	rack_down hicain
fi

# The GPU stage, unless E2E_GPU=0.
if ((GPU)) && [[ -z $ONLY || $ONLY == gpu ]]; then
	cases=()
	for c in "${GPU_CASES[@]}"; do cases+=(--case "$c"); done
	rack gpu "$GSPEC" "$HIMAGE" "${cases[@]}"
	# The runtime packages' life cycle in vm-b, as the NIC's above.
	step "gpu pkg cycle" "$OUT/gpu-pkg-cycle.txt" "the runtime packages' life cycle in vm-b" \
		"$HINIC" deploy exec --run-dir "$RUN_DIR" vm-b --upload "${debs[2]}:/root/libhicart1.deb" \
		--upload "${debs[3]}:/root/hicart-tools.deb" --upload "$devdeb:/root/libhicart-dev.deb" -- "mkdir -p /root/hicart-debs && for p in libhicart1 hicart-tools libhicart-dev; do mv /root/\$p.deb /root/hicart-debs/\${p}_.deb; done && DEBS=/root/hicart-debs sh -s" \
		< scripts/guest-gpu-pkg-cycle.sh
	rack_down gpu
fi

if [[ -z $ONLY || $ONLY == ib ]]; then
	rack ib "$ISPEC" "$HIMAGE"
	rack_down ib
fi

if [[ -z $ONLY || $ONLY == roce2 ]]; then
	rack roce2 "$RSPEC" "$HIMAGE"
	rack_down roce2
fi

if [[ -z $ONLY || $ONLY == mixed ]]; then
	interop "$MSPEC" "$HIMAGE"
fi

if [[ -z $ONLY || $ONLY == libvirt ]]; then
	mkdir -p "$OUT/libvirt"
	step libvirt "$OUT/libvirt/test.log" "the libvirt rack" \
		env HINIC_LIBVIRT_IMAGE="$(cd "$HIMAGE" && pwd)" "${GO:-go}" test -count=1 -timeout 30m -v -run 'TestLibvirtRack$' \
		./internal/cli/verify/e2e
fi

if [[ -z $ONLY || $ONLY == units ]]; then
	mkdir -p "$OUT/units"
	step units "$OUT/units/test.log" "the host package's units under systemd" \
		env HINIC_UNITS_IMAGE="$(cd "$IMAGE" && pwd)" "${GO:-go}" test -count=1 -timeout 30m -v -run 'TestHostUnits$' \
		./internal/cli/verify/e2e
fi

if [[ ( -z $ONLY || $ONLY == twohost ) && $TWOHOST == 1 ]]; then
	mkdir -p "$OUT/twohost"
	step twohost "$OUT/twohost/test.log" "the racks across two hosts" \
		env HINIC_TWOHOST_IMAGE="$(cd "$HIMAGE" && pwd)" "${GO:-go}" test -count=1 -timeout 90m -v \
		-run 'TestTwoHost(IB)?Rack$' ./internal/cli/verify/e2e
fi

if [[ -z $ONLY ]]; then
	echo
	echo "Soft-RoCE (rdma_rxe) and HiNIC (hicain), the same stock tools in the same TCG guests:"
	"$HINIC" verify compare "$OUT/rxe/gate.json" "$OUT/hicain/gate.json" --base-name Soft-RoCE --new-name HiNIC |
		tee "$OUT/compare.txt"
	"$HINIC" verify compare "$OUT/rxe/gate.json" "$OUT/hicain/gate.json" --base-name Soft-RoCE --new-name HiNIC \
		-o json > "$OUT/compare.json" 2>/dev/null
	echo
	echo "HiNIC on RoCEv2 (one switch) and on native InfiniBand (two switches, OpenSM), the same tools:"
	"$HINIC" verify compare "$OUT/hicain/gate.json" "$OUT/ib/gate.json" --base-name RoCEv2 --new-name InfiniBand |
		tee "$OUT/compare-ib.txt"
	"$HINIC" verify compare "$OUT/hicain/gate.json" "$OUT/ib/gate.json" --base-name RoCEv2 --new-name InfiniBand \
		-o json > "$OUT/compare-ib.json" 2>/dev/null
fi

trap - EXIT
printf '%s\n' "${times[@]}" | tee "$OUT/timings.txt"
if ((failed)); then
	echo
	echo "e2e: FAILED:"
	printf '  %s\n' "${failures[@]}" | tee "$OUT/failures.txt"
fi
exit "$failed"
