package deploy

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/PacketFive/hinic/internal/image"
)

// QEMUArgs is the QEMU command line of guest g: the management NIC on
// user networking first, then the data NIC: a virtio-net NIC on the
// fabric for rxe, the HiNIC ivshmem function for hicain; then one
// ivshmem function per GPU. With a hicain NIC or GPUs the guest's RAM
// is a shared file the backends map.
func QEMUArgs(r *Rack, g Guest, m *image.Manifest, imageDir, dir, accel, pubkey string) []string {
	n := 0
	for i := range r.Guests {
		if r.Guests[i].Name == g.Name {
			n = i + 1
		}
	}
	// The forward listens where the guest's host is reached: its
	// address on the underlay, or loopback on a rack without hosts.
	sshFwd, _ := r.guestSSH(g)
	data := []string{"-machine", string(QEMUMachine)}
	if sharedRAM(g) {
		data = ramQEMUArgs(r, g)
	}
	if g.NIC == NICHicain {
		data = append(data, hicainQEMUArgs(r, g)...)
	} else {
		data = append(data,
			"-netdev", "stream,id=data,server=on,addr.type=unix,addr.path="+StreamSocket(r, g),
			"-device", "virtio-net-pci,netdev=data,mac="+g.MAC)
	}
	data = append(data, gpuQEMUArgs(r, g)...)
	args := []string{
		"-name", g.Name, "-accel", accel,
		"-m", strconv.Itoa(g.Memory), "-smp", strconv.Itoa(g.CPUs),
		"-kernel", filepath.Join(imageDir, image.FileKernel),
		"-initrd", filepath.Join(imageDir, image.FileInitrd),
		"-append", m.Cmdline + " systemd.hostname=" + g.Name,
		"-drive", "file=" + filepath.Join(dir, "disk.qcow2") + ",if=virtio,format=qcow2",
		"-netdev", "user,id=mgmt,hostfwd=tcp:" + sshFwd + "-:22",
		"-device", fmt.Sprintf("virtio-net-pci,netdev=mgmt,mac=52:54:00:12:00:%02x", n),
	}
	args = append(args, data...)
	return append(args,
		"-smbios", "type=11,value=io.systemd.credential:ssh.authorized_keys.root="+strings.ReplaceAll(pubkey, ",", ",,"),
		"-display", "none", "-serial", "file:"+filepath.Join(dir, "console.log"),
		"-monitor", "none", "-qmp", "unix:"+QMPSocket(dir)+",server=on,wait=off", "-no-reboot",
		"-pidfile", filepath.Join(dir, "qemu.pid"),
	)
}
