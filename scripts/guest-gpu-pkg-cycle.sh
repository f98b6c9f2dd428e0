# Runs in a guest of the GPU rack (sh -s, through hinic deploy exec)
# after the GPU gate: the life cycle of the HiGPU runtime's packages,
# which the image installed, as scripts/guest-pkg-cycle.sh does for the
# NIC's.
#   DEBS    directory holding libhicart1's, hicart-tools' and
#           libhicart-dev's .deb files
# The image has libhicart1 and hicart-tools; libhicart-dev goes in
# first (its header, its libhicart.so link and pkg-config file must
# resolve). Removal must take every file (none has conffiles), the
# dynamic linker must no longer find libhicart, and a fresh dpkg -i must
# bring hicart-smi back to listing the guest's GPUs.
set -eu
dpkg -i "$DEBS"/libhicart-dev_*.deb
[ -f /usr/include/hicart.h ] || { echo "gpu-pkg-cycle: libhicart-dev has no /usr/include/hicart.h"; exit 1; }
dev_so=$(dpkg -L libhicart-dev | grep '/libhicart\.so$')
[ -e "$dev_so" ] || { echo "gpu-pkg-cycle: $dev_so does not resolve"; exit 1; }
pc=$(dpkg -L libhicart-dev | grep '/hicart\.pc$')
grep -q '^Libs:.*-lhicart' "$pc" || { echo "gpu-pkg-cycle: $pc has no -lhicart"; exit 1; }
echo "gpu-pkg-cycle: libhicart-dev: hicart.h, $dev_so -> $(readlink -f "$dev_so"), $pc"
pkgs="libhicart-dev hicart-tools libhicart1"
for p in $pkgs; do
	dpkg-query -W -f='${db:Status-Status}\n' "$p" | grep -qx installed || { echo "gpu-pkg-cycle: $p is not installed"; exit 1; }
done
files=$(dpkg -L $pkgs | while read -r f; do [ -f "$f" ] || [ -L "$f" ] && echo "$f"; done)
conffiles=$(dpkg-query -W -f='${Conffiles}\n' $pkgs | awk 'NF { print $1 }')
[ -z "$conffiles" ] || { echo "gpu-pkg-cycle: unexpected conffiles: $conffiles"; exit 1; }
n=$(hicart-smi --json | grep -o '"gpu_id"' | wc -l)
[ "$n" -gt 0 ] || { echo "gpu-pkg-cycle: hicart-smi lists no GPU before the cycle"; exit 1; }
echo "gpu-pkg-cycle: $(echo "$files" | wc -l) files, $n GPUs"
dpkg -r $pkgs
left=
for f in $files; do
	[ -e "$f" ] || [ -L "$f" ] && left="$left $f"
done
[ -z "$left" ] || { echo "gpu-pkg-cycle: dpkg -r left:$left"; exit 1; }
ldconfig -p | grep -q libhicart && { echo "gpu-pkg-cycle: ldconfig still finds libhicart"; exit 1; }
command -v hicart-smi >/dev/null && { echo "gpu-pkg-cycle: hicart-smi still on PATH"; exit 1; }
echo "gpu-pkg-cycle: dpkg -r removed every file"
dpkg -P $pkgs
for p in $pkgs; do
	dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null | grep -q . &&
		! dpkg-query -W -f='${db:Status-Status}\n' "$p" | grep -qx not-installed &&
		{ echo "gpu-pkg-cycle: dpkg -P left $p"; exit 1; }
done
echo "gpu-pkg-cycle: dpkg -P purged all three"
dpkg -i "$DEBS"/libhicart1_*.deb "$DEBS"/hicart-tools_*.deb "$DEBS"/libhicart-dev_*.deb
ldconfig -p | grep -q 'libhicart.so.1 ' || { echo "gpu-pkg-cycle: ldconfig does not find libhicart.so.1"; exit 1; }
m=$(hicart-smi --json | grep -o '"gpu_id"' | wc -l)
[ "$m" -eq "$n" ] || { echo "gpu-pkg-cycle: hicart-smi lists $m GPUs after dpkg -i, $n before"; exit 1; }
echo "gpu-pkg-cycle: dpkg -i: hicart-smi lists $m GPUs again"
