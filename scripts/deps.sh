#!/usr/bin/env bash
# Installs the Debian packages that HiNIC's build and tests need.
#
# Run by `make deps` (and so by `make test`) and by .ci/run. When every
# package is already installed it does nothing and needs no network, so
# repeated runs are fast and work offline. Otherwise it runs apt-get update
# once and installs what is missing: directly as root, through sudo
# otherwise, or, without sudo, prints the command to run and fails.
set -euo pipefail

# The one list of system packages. Add new ones here. The kernel headers
# are added below, derived from the installed kernel image.
PACKAGES=(
	python3-scapy # RoCEv2 frames and ICRC checked against Scapy
	tshark        # frames checked against Wireshark's dissectors
	make
	gcc           # cgo, needed by go test -race
	git
	qemu-system-x86   # internal/fabric: stock QEMU guests ping through HiSwitch
	busybox-static    # their initramfs (built in Go at test time)
	linux-image-amd64 # the kernel they boot (/boot/vmlinuz-*, virtio-net modules)
	mmdebstrap        # hinic image build: the guest root file system
	e2fsprogs         # hinic image build: mke2fs -d (ext4 without mounts)
	qemu-utils        # hinic image build / deploy: qemu-img (qcow2, overlays)
	lintian             # hinic pkg build: checks every .deb
	dkms                # internal/pkg tests: dkms builds the hicain-dkms sources
	linux-headers-amd64 # hinic pkg build: hicain_* modules built against the guest kernel's headers
	libibverbs-dev      # hinic pkg build: libhicain is built against libibverbs (and depends on its version)
	ibverbs-utils       # the QEMU verbs test: ibv_devices, ibv_devinfo, ibv_*_pingpong in the guests
	perftest            # the QEMU verbs test: ib_send_bw, ib_write_bw, ib_read_bw, ib_atomic_bw, ib_send_lat in the guests
	rdmacm-utils        # the QEMU verbs test: rping, ucmatose, udaddy (librdmacm over ib_cm/rdma_cm) in the guests
	infiniband-diags    # the QEMU OpenSM test: ibstat, ibnetdiscover, smpquery, perfquery in the guests
	chromium            # internal/rackview/live: the live rack page in headless chromium (DevTools protocol)
	libvirt-daemon-system # TestLibvirtRack: libvirtd and virtlogd, which the test starts (no systemd on CI)
	libvirt-clients       # deploy through libvirt (hosts[].libvirt): virsh -c URI
	openssh-server        # TestTwoHostRack: the sshd in host b's namespace that deploy reaches hosts[].ssh through
	openssh-client        # deploy to hosts[].ssh: the system ssh client in batch mode
	# The QEMU OpenSM test's subnet manager: the libraries of Debian's
	# opensm package (its binary comes from opensm_extract below).
	libopensm9
	libosmcomp5
	libosmvendor5
	libwrap0
)

# OPENSM_ROOT holds Debian's opensm package unpacked; the QEMU OpenSM test
# (internal/device/integration/qemu_opensm_test.go) copies $OPENSM_ROOT/usr/sbin/opensm
# into its guests. The package is not installed: its postinst starts the
# opensm service (invoke-rc.d opensm start, and exits non-zero when that
# fails), which would run a subnet manager on the host, or fail the
# installation on a host without InfiniBand ports.
OPENSM_ROOT=${HINIC_OPENSM_ROOT:-/var/lib/hinic/opensm}

# kernel_headers prints the headers package of every kernel in /boot: the
# tests build the guest driver (kernel/hicain_net.ko) for the exact kernel
# the QEMU guests boot, so the name follows the installed image
# (linux-image-6.1.0-57-amd64 -> linux-headers-6.1.0-57-amd64) rather than
# whatever ABI linux-headers-amd64 points to in today's apt lists.
kernel_headers() {
	local k
	for k in /boot/vmlinuz-*; do
		[[ -e $k ]] && echo "linux-headers-${k#/boot/vmlinuz-}"
	done
	return 0
}

# missing_of prints the packages of its arguments that are not installed.
missing_of() {
	local pkg status
	for pkg in "$@"; do
		status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
		if [[ $status != installed ]]; then
			echo "$pkg"
		fi
	done
}

updated=
# install_missing installs the packages of its arguments that are missing.
install_missing() {
	local missing
	mapfile -t missing < <(missing_of "$@")
	if ((${#missing[@]} == 0)); then
		return 0
	fi
	echo "deps: installing ${missing[*]}"
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "deps: apt-get not found; HiNIC is built on Debian 12. Install: ${missing[*]}" >&2
		exit 1
	fi
	local sudo=()
	if ((EUID != 0)); then
		if ! command -v sudo >/dev/null 2>&1; then
			echo "deps: not root and sudo is not available. As root, run:" >&2
			echo "  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y ${missing[*]}" >&2
			exit 1
		fi
		sudo=(sudo)
	fi
	# noninteractive: tshark's debconf question (may non-root users
	# capture?) must not wait for an answer; CI has no standard input.
	if [[ -z $updated ]]; then
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
		updated=1
	fi
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# opensm_extract unpacks the opensm package into OPENSM_ROOT once.
opensm_extract() {
	if [[ -x $OPENSM_ROOT/usr/sbin/opensm ]]; then
		return 0
	fi
	echo "deps: unpacking opensm into $OPENSM_ROOT"
	local sudo=() tmp
	if ((EUID != 0)); then
		sudo=(sudo)
	fi
	tmp=$(mktemp -d)
	# apt-get download writes to the current directory, as the caller;
	# it needs the package lists, which a host that had every package
	# may not have fetched.
	if ! (cd "$tmp" && apt-get download -q opensm); then
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
		(cd "$tmp" && apt-get download -q opensm)
	fi
	"${sudo[@]}" mkdir -p "$OPENSM_ROOT"
	"${sudo[@]}" dpkg-deb -x "$tmp"/opensm_*.deb "$OPENSM_ROOT"
	rm -rf "$tmp"
}

install_missing "${PACKAGES[@]}"
opensm_extract
# After the image: its /boot/vmlinuz-* names the headers.
mapfile -t HEADERS < <(kernel_headers)
install_missing "${HEADERS[@]}"
if [[ -z $updated ]]; then
	echo "deps: all $((${#PACKAGES[@]} + ${#HEADERS[@]})) system packages are installed"
fi
