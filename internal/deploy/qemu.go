package deploy

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/PacketFive/hinic/internal/image"
)

// guestVM is what a guest's virtual machine is made of, whoever starts
// it: QEMUArgs turns it into a QEMU command line, DomainXML into a
// libvirt domain. Both start the same machine.
type guestVM struct {
	Name    string
	Accel   string // tcg or kvm
	Memory  int    // MiB
	CPUs    int
	Kernel  string // the image's kernel, initrd and command line
	Initrd  string
	Cmdline string
	Disk    string // the guest's qcow2 overlay
	// SSHFwd is host:port of the management NIC's SSH forward (QEMU
	// user networking), MgmtMAC the management NIC's MAC.
	SSHFwd  string
	MgmtMAC string
	// RAM, when set, is the guest RAM file the backends map (a hicain
	// NIC or GPUs): QEMU's memory-backend-file, share=on.
	RAM string
	// Stream, for an rxe guest, is the UNIX socket of the data NIC's
	// -netdev stream,server=on, which the fabric's port dials; DataMAC
	// is the data NIC's MAC.
	Stream  string
	DataMAC string
	// Ivshmem are the ivshmem-doorbell functions: the hicain vNIC, then
	// one per GPU.
	Ivshmem []ivshmemFn
	// AuthorizedKey is root's SSH key, passed as the systemd credential
	// ssh.authorized_keys.root in SMBIOS type 11.
	AuthorizedKey string
	Console       string // the serial console's log file
	Dir           string // the guest's directory
}

// ivshmemFn is one ivshmem-doorbell function of a guest.
type ivshmemFn struct {
	ID      string // qdev id ("" leaves QEMU's own)
	Chardev string
	Socket  string // the backend's ivshmem server socket
	Vectors int
}

// newGuestVM describes guest g's machine: the management NIC on user
// networking, then the data NIC (a virtio-net NIC on the fabric for
// rxe, the HiNIC ivshmem function for hicain), then one ivshmem
// function per GPU. With a hicain NIC or GPUs the guest's RAM is a
// shared file the backends map.
func newGuestVM(r *Rack, g Guest, m *image.Manifest, imageDir, dir, accel, pubkey string) guestVM {
	n := 0
	for i := range r.Guests {
		if r.Guests[i].Name == g.Name {
			n = i + 1
		}
	}
	// The forward listens where the guest's host is reached: its
	// address on the underlay, or loopback on a rack without hosts.
	sshFwd, _ := r.guestSSH(g)
	vm := guestVM{
		Name: g.Name, Accel: accel, Memory: g.Memory, CPUs: g.CPUs,
		Kernel:  filepath.Join(imageDir, image.FileKernel),
		Initrd:  filepath.Join(imageDir, image.FileInitrd),
		Cmdline: m.Cmdline + " systemd.hostname=" + g.Name,
		Disk:    filepath.Join(dir, "disk.qcow2"),
		SSHFwd:  sshFwd, MgmtMAC: fmt.Sprintf("52:54:00:12:00:%02x", n),
		AuthorizedKey: pubkey, Console: filepath.Join(dir, "console.log"), Dir: dir,
	}
	if sharedRAM(g) {
		vm.RAM = GuestRAM(r, g)
	}
	if g.NIC == NICHicain {
		vm.Ivshmem = append(vm.Ivshmem, ivshmemFn{ID: HicainQdevID, Chardev: hicainChardev, Socket: IvshmemSocket(r, g), Vectors: hicainVectors})
	} else {
		vm.Stream, vm.DataMAC = StreamSocket(r, g), g.MAC
	}
	for _, id := range g.GPUs.IDs {
		vm.Ivshmem = append(vm.Ivshmem, ivshmemFn{Chardev: fmt.Sprintf("gpu%d", id), Socket: GPUSocket(r, g, id), Vectors: gpuVectors})
	}
	return vm
}

// QEMUArgs is the QEMU command line of guest g (newGuestVM).
func QEMUArgs(r *Rack, g Guest, m *image.Manifest, imageDir, dir, accel, pubkey string) []string {
	return newGuestVM(r, g, m, imageDir, dir, accel, pubkey).qemuArgs()
}

func (vm guestVM) qemuArgs() []string {
	data := []string{"-machine", string(QEMUMachine)}
	if vm.RAM != "" {
		data = vm.ramArgs()
	}
	if vm.Stream != "" {
		data = append(data, vm.streamArgs()...)
	}
	for _, f := range vm.Ivshmem {
		data = append(data, "-chardev", "socket,path="+f.Socket+",id="+f.Chardev)
		dev := fmt.Sprintf("ivshmem-doorbell,chardev=%s,vectors=%d", f.Chardev, f.Vectors)
		if f.ID != "" {
			dev += ",id=" + f.ID
		}
		data = append(data, "-device", dev)
	}
	args := []string{
		"-name", vm.Name, "-accel", vm.Accel,
		"-m", strconv.Itoa(vm.Memory), "-smp", strconv.Itoa(vm.CPUs),
		"-kernel", vm.Kernel, "-initrd", vm.Initrd, "-append", vm.Cmdline,
		"-drive", "file=" + vm.Disk + ",if=virtio,format=qcow2",
	}
	args = append(args, vm.mgmtArgs()...)
	args = append(args, data...)
	return append(args,
		"-smbios", "type=11,value="+strings.ReplaceAll(vm.credential(), ",", ",,"),
		"-display", "none", "-serial", "file:"+vm.Console,
		"-monitor", "none", "-qmp", "unix:"+QMPSocket(vm.Dir)+",server=on,wait=off", "-no-reboot",
		"-pidfile", filepath.Join(vm.Dir, "qemu.pid"),
	)
}

// credential is the SMBIOS type 11 string that gives root the key.
func (vm guestVM) credential() string {
	return "io.systemd.credential:ssh.authorized_keys.root=" + vm.AuthorizedKey
}

// mgmtArgs are the management NIC: user networking with the SSH forward.
func (vm guestVM) mgmtArgs() []string {
	return []string{
		"-netdev", "user,id=mgmt,hostfwd=tcp:" + vm.SSHFwd + "-:22",
		"-device", "virtio-net-pci,netdev=mgmt,mac=" + vm.MgmtMAC,
	}
}

// streamArgs are an rxe guest's data NIC on the fabric.
func (vm guestVM) streamArgs() []string {
	return []string{
		"-netdev", "stream,id=data,server=on,addr.type=unix,addr.path=" + vm.Stream,
		"-device", "virtio-net-pci,netdev=data,mac=" + vm.DataMAC,
	}
}

// ramArgs put the guest's RAM in its shared file: a memory backend the
// machine names.
func (vm guestVM) ramArgs() []string {
	return []string{
		"-machine", string(QEMUMachine) + ",memory-backend=ram0",
		"-object", fmt.Sprintf("memory-backend-file,id=ram0,size=%dM,mem-path=%s,share=on", vm.Memory, vm.RAM),
	}
}
