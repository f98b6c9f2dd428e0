#!/usr/bin/env bash
# make e2e: guest image -> two-guest Soft-RoCE rack on HiSwitch -> SSH gate
# (with the fabric capture's ICRCs checked) -> rack down. Prints the time
# of each stage. Needs root (mmdebstrap root mode) and the host tools of
# `hinic doctor`; KVM is not needed (TCG).
#
#   HINIC       the hinic binary (default bin/hinic)
#   E2E_IMAGE   image directory, reused when its spec is unchanged
#               (default .cache/images/hinic-guest; keep .cache/ between CI runs)
#   E2E_DIR     outputs: gate.txt, gate.json, gate.xml, raw tool outputs,
#               status, timings (default .cache/e2e)
#   E2E_RACK    rack spec (default testdata/racks/two-rxe.yaml)
set -euo pipefail

HINIC=${HINIC:-bin/hinic}
IMAGE=${E2E_IMAGE:-.cache/images/hinic-guest}
OUT=${E2E_DIR:-.cache/e2e}
SPEC=${E2E_RACK:-testdata/racks/two-rxe.yaml}
RUN_DIR=${E2E_RUN_DIR:-/tmp/hinic-rack-e2e}

rm -rf "$OUT" && mkdir -p "$OUT"
now() { date +%s.%N; }
declare -a times
stage() { times+=("$(awk -v a="$(now)" -v b="$2" -v n="$1" 'BEGIN { printf "%-8s %7.1f s", n, a - b }')"); }

down() {
	"$HINIC" deploy down --run-dir "$RUN_DIR" || true
	# Nothing of the rack may be left running.
	if [[ -f $RUN_DIR/state.json ]] && "$HINIC" deploy status --run-dir "$RUN_DIR" -o json 2>/dev/null |
		grep -q '"state": "running"'; then
		echo "e2e: a guest is still running after deploy down" >&2
		exit 1
	fi
}

"$HINIC" doctor

t=$(now)
"$HINIC" image build --dir "$IMAGE" -o json > "$OUT/manifest.json"
stage image "$t"

rm -rf "$RUN_DIR"
trap down EXIT
t=$(now)
"$HINIC" deploy rack "$SPEC" --run-dir "$RUN_DIR" --image "$IMAGE" --pcap -o json > "$OUT/deploy.json"
stage deploy "$t"
"$HINIC" deploy status --run-dir "$RUN_DIR" | tee "$OUT/status.txt"

t=$(now)
set +e
"$HINIC" verify e2e --rack "$RUN_DIR" --save "$OUT/raw" --junit "$OUT/gate.xml" | tee "$OUT/gate.txt"
rc=${PIPESTATUS[0]}
set -e
stage gate "$t"

t=$(now)
trap - EXIT
down
stage down "$t"

printf '%s\n' "${times[@]}" | tee "$OUT/timings.txt"
exit "$rc"
