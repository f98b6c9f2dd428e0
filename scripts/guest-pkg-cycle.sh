# Runs in a HiNIC guest (sh -s, through hinic deploy exec) after the gate:
# the life cycle of our packages, which the image installed.
#   KVER    the guest kernel; its modules package is hicain-modules-KVER
#   DEBS    directory holding the two .deb files to install again
# Removal must take every file but the conffiles, purge the conffiles too,
# and a fresh dpkg -i must bring the RDMA device back.
set -eu
mods=hicain-modules-$KVER
pkgs="libhicain $mods"
for p in $pkgs; do
	dpkg-query -W -f='${db:Status-Status}\n' "$p" | grep -qx installed || { echo "pkg-cycle: $p is not installed"; exit 1; }
done
files=$(dpkg -L $pkgs | while read -r f; do [ -f "$f" ] && echo "$f"; done)
conffiles=$(dpkg-query -W -f='${Conffiles}\n' $pkgs | awk 'NF { print $1 }')
echo "pkg-cycle: $(echo "$files" | wc -l) files, conffiles: $(echo $conffiles)"
modprobe -r hicain_ib hicain_net
dpkg -r $pkgs
left=
for f in $files; do
	case " $(echo $conffiles) " in *" $f "*) continue ;; esac
	[ -e "$f" ] && left="$left $f"
done
[ -z "$left" ] || { echo "pkg-cycle: dpkg -r left:$left"; exit 1; }
[ -z "$(ls /lib/modules/$KVER/updates/hicain* 2>/dev/null)" ] || { echo "pkg-cycle: modules left in updates/"; exit 1; }
modinfo hicain_net >/dev/null 2>&1 && { echo "pkg-cycle: depmod still finds hicain_net"; exit 1; }
echo "pkg-cycle: dpkg -r removed every file but the conffiles"
dpkg -P $pkgs
for f in $conffiles; do
	[ -e "$f" ] && { echo "pkg-cycle: dpkg -P left $f"; exit 1; }
done
echo "pkg-cycle: dpkg -P removed the conffiles"
dpkg -i "$DEBS"/*.deb
modprobe hicain_net
modprobe hicain_ib
# The RDMA device under hicain_net's PCI function, whatever udev named it.
i=0
dev=
while :; do
	udevadm settle -t 5 >/dev/null 2>&1 || true
	dev=$(ls /sys/bus/pci/drivers/hicain_net/*/infiniband/ 2>/dev/null | head -n 1)
	[ -n "$dev" ] && break
	i=$((i + 1)); [ $i -ge 50 ] && { echo "pkg-cycle: no RDMA device after dpkg -i and modprobe"; exit 1; }
	sleep 0.2
done
ibv_devices | grep -qw "$dev" || { echo "pkg-cycle: ibv_devices does not list $dev"; ibv_devices; exit 1; }
echo "pkg-cycle: dpkg -i, modprobe: ibv_devices lists $dev"
