package deploy

// Placement through libvirt. A host with a libvirt URI (hosts[].libvirt)
// has its guests defined and started as libvirt domains instead of QEMU
// processes of deploy's own: the same machine (newGuestVM), written as
// domain XML (DomainXML) with libvirt.org/go/libvirtxml, and driven with
// `virsh -c URI`. virsh, not a Go client of libvirt's RPC protocol,
// because it is what an administrator of the host uses and trusts, it
// speaks every transport of a URI (qemu+ssh with the user's SSH agent
// and config, qemu+tls, the local socket) with libvirt's own client
// code, and deploy runs a handful of commands per guest, where a
// process each costs nothing that matters.
//
// What libvirt 9.0 expresses natively is written natively: machine
// type, memory, vCPUs, the direct kernel boot, the disk overlay, the
// serial console in the guest's console.log, the SSH key as an SMBIOS
// OEM string (type 11, the systemd credential), and each ivshmem-doorbell
// function as <shmem> with its server socket and MSI vectors. Three
// things it cannot express go in <qemu:commandline>, argument for
// argument as on deploy's own QEMU command line:
//
//   - The guest RAM file. The device and GPU backends map the guest's
//     RAM for DMA and open the file at start-up, before QEMU, at a path
//     deploy gives them (RUN-DIR/GUEST/ram). libvirt's
//     <memoryBacking><source type='file'/><access mode='shared'/> puts
//     the file under qemu.conf's memory_backing_dir, in a directory
//     named after the domain's id, which exists only once the domain
//     starts; no per-domain element names the file. So the domain
//     gets a memory-backend-file object and the machine option that
//     makes it the RAM (QEMU merges -machine options; the later
//     memory-backend= wins over libvirt's pc.ram, which stays unused
//     and untouched).
//   - The rxe guest's data NIC, QEMU 7.2's -netdev stream on a UNIX
//     socket that the fabric port dials: libvirt 9.0's socket
//     interfaces (type server/client/mcast/udp) are TCP or UDP only.
//   - The management NIC's SSH forward: libvirt 9.0 forwards ports
//     only for the passt backend, not for QEMU's user networking.
//
// QEMU runs as the deploying user (root on a test host) through a
// per-domain static DAC label with relabelling off: it reads and
// writes the private run directory deploy made, and libvirt changes
// the owner of nothing (not the image, which every guest's overlay
// shares).

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/PacketFive/hinic/internal/image"
)

// LibvirtNamespace is the XML namespace of the metadata deploy puts in
// each domain it defines: the run directory and the guest, by which a
// domain is known to be a rack's own.
const LibvirtNamespace = "urn:hinic:deploy:1"

// FileDomainXML is the domain XML deploy defined, in the guest's
// directory.
const FileDomainXML = "domain.xml"

// checkLibvirtURI checks a hosts[].libvirt URI: a QEMU driver URI of
// the system or session daemon, over the local socket or a remote
// transport.
func checkLibvirtURI(s string) error {
	if strings.ContainsAny(s, " \t\n") {
		return fmt.Errorf("libvirt %q is not a URI: it has a space", s)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("libvirt %q is not a URI: %v", s, err)
	}
	driver, transport, _ := strings.Cut(u.Scheme, "+")
	if driver != "qemu" {
		return fmt.Errorf("libvirt %q: the driver must be qemu (qemu:///system or qemu+ssh://HOST/system), not %q", s, driver)
	}
	switch transport {
	case "", "unix":
		if u.Host != "" {
			return fmt.Errorf("libvirt %q: a local URI has no host; for another machine use qemu+ssh://HOST/system", s)
		}
	case "ssh", "tcp", "tls":
		if u.Hostname() == "" {
			return fmt.Errorf("libvirt %q: qemu+%s needs a host: qemu+%s://[USER@]HOST/system", s, transport, transport)
		}
	default:
		return fmt.Errorf("libvirt %q: transport %q is not one of ssh, tcp, tls, unix", s, transport)
	}
	if u.Path != "/system" && u.Path != "/session" {
		return fmt.Errorf("libvirt %q: the path must be /system (or /session for a user's libvirtd), not %q", s, u.Path)
	}
	return nil
}

// localLibvirt reports whether a checked libvirt URI names the libvirtd
// of the machine that uses it: no remote transport.
func localLibvirt(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	_, transport, _ := strings.Cut(u.Scheme, "+")
	return transport == "" || transport == "unix"
}

// libvirt is the libvirt URI the rack's guests are placed through: its
// host's (a one-host rack or a host's part), "" when deploy runs QEMU.
func (r *Rack) libvirt() string { return r.placed().Libvirt }

// DomainName is guest g's libvirt domain: hinic-RACK-GUEST, so that two
// racks on one libvirtd never share a name.
func DomainName(r *Rack, g Guest) string { return "hinic-" + r.Name + "-" + g.Name }

// domainMeta is deploy's element in a domain's <metadata>.
type domainMeta struct {
	XMLName xml.Name `xml:"urn:hinic:deploy:1 rack"`
	RunDir  string   `xml:"run-dir,attr"`
	Rack    string   `xml:"name,attr"`
	Guest   string   `xml:"guest,attr"`
}

// DomainXML is guest g's libvirt domain: the machine QEMUArgs starts
// (newGuestVM), as libvirt defines it.
func DomainXML(r *Rack, g Guest, m *image.Manifest, imageDir, dir, accel, pubkey string) (string, error) {
	vm := newGuestVM(r, g, m, imageDir, dir, accel, pubkey)
	meta, err := xml.Marshal(domainMeta{RunDir: r.RunDir, Rack: r.Name, Guest: g.Name})
	if err != nil {
		return "", err
	}
	d := vm.domain(DomainName(r, g), string(meta), os.Geteuid(), os.Getegid())
	return d.Marshal()
}

// domain writes vm as a libvirt domain named name, its QEMU run as
// uid:gid.
func (vm guestVM) domain(name, meta string, uid, gid int) *libvirtxml.Domain {
	typ := "qemu"
	if vm.Accel == "kvm" {
		typ = "kvm"
	}
	d := &libvirtxml.Domain{
		Type:     typ,
		Name:     name,
		Metadata: &libvirtxml.DomainMetadata{XML: meta},
		Memory:   &libvirtxml.DomainMemory{Value: uint(vm.Memory), Unit: "MiB"},
		VCPU:     &libvirtxml.DomainVCPU{Value: uint(vm.CPUs)},
		SysInfo: []libvirtxml.DomainSysInfo{{SMBIOS: &libvirtxml.DomainSysInfoSMBIOS{
			OEMStrings: &libvirtxml.DomainSysInfoOEMStrings{Entry: []string{vm.credential()}},
		}}},
		OS: &libvirtxml.DomainOS{
			Type:    &libvirtxml.DomainOSType{Arch: "x86_64", Machine: string(QEMUMachine), Type: "hvm"},
			Kernel:  vm.Kernel,
			Initrd:  vm.Initrd,
			Cmdline: vm.Cmdline,
			SMBios:  &libvirtxml.DomainSMBios{Mode: "sysinfo"},
		},
		// QEMU's defaults on its own command line: ACPI and the APIC.
		Features: &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}, APIC: &libvirtxml.DomainFeatureAPIC{}},
		// -no-reboot: a guest that reboots stops.
		OnReboot: "destroy",
		Devices: &libvirtxml.DomainDeviceList{
			Disks: []libvirtxml.DomainDisk{{
				Device:  "disk",
				Driver:  &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2"},
				Source:  &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: vm.Disk}},
				Target:  &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
				Address: pciSlot(slotDisk),
			}},
			Serials: []libvirtxml.DomainSerial{{
				Source: &libvirtxml.DomainChardevSource{File: &libvirtxml.DomainChardevSourceFile{Path: vm.Console}},
			}},
			Controllers: []libvirtxml.DomainController{{Type: "usb", Model: "none"}},
			MemBalloon:  &libvirtxml.DomainMemBalloon{Model: "none"},
		},
		SecLabel: []libvirtxml.DomainSecLabel{{Type: "static", Model: "dac", Relabel: "no", Label: fmt.Sprintf("+%d:+%d", uid, gid)}},
	}
	for i, f := range vm.Ivshmem {
		s := libvirtxml.DomainShmem{
			Name:    name + "-" + f.Chardev,
			Model:   &libvirtxml.DomainShmemModel{Type: "ivshmem-doorbell"},
			Server:  &libvirtxml.DomainShmemServer{Path: f.Socket},
			MSI:     &libvirtxml.DomainShmemMSI{Vectors: uint(f.Vectors), IOEventFD: "on"},
			Address: pciSlot(slotIvshmem + uint(i)),
		}
		if f.ID != "" {
			// A user alias (ua-) names the function as QEMUArgs' id
			// does, for whoever looks for it.
			s.Alias = &libvirtxml.DomainAlias{Name: "ua-" + f.ID}
		}
		d.Devices.Shmems = append(d.Devices.Shmems, s)
	}
	var args []string
	if vm.RAM != "" {
		args = append(args, vm.ramArgs()[2:]...) // the object; the machine type is the domain's
		args = append(args, "-machine", "memory-backend=ram0")
	}
	// The NICs at fixed slots, which libvirt's devices leave free: QEMU
	// creates the devices of a plain -device before libvirt's JSON
	// ones, and the image names the management NIC ens3 (slot 3).
	mgmt := vm.mgmtArgs()
	mgmt[3] += fmt.Sprintf(",addr=%#x", slotMgmt)
	args = append(args, mgmt...)
	if vm.Stream != "" {
		data := vm.streamArgs()
		data[3] += fmt.Sprintf(",addr=%#x", slotData)
		args = append(args, data...)
	}
	cl := &libvirtxml.DomainQEMUCommandline{}
	for _, a := range args {
		cl.Args = append(cl.Args, libvirtxml.DomainQEMUCommandlineArg{Value: a})
	}
	d.QEMUCommandline = cl
	return d
}

// PCI slots of a domain's devices on the pc machine's bus 0 (slot 0 is
// the host bridge, 1 the PIIX3): the management NIC where deploy's own
// QEMU has it, the disk, the rxe data NIC, then the ivshmem functions.
const (
	slotMgmt    = 3
	slotDisk    = 4
	slotData    = 5
	slotIvshmem = 6
)

// pciSlot is function 0 of slot n on bus 0.
func pciSlot(n uint) *libvirtxml.DomainAddress {
	var zero uint
	return &libvirtxml.DomainAddress{PCI: &libvirtxml.DomainAddressPCI{Domain: &zero, Bus: &zero, Slot: &n, Function: &zero}}
}

// virsh runs libvirt's virsh against one URI.
type virsh struct{ uri string }

// errNoDomain is returned for a domain libvirt does not know.
var errNoDomain = errors.New("no such libvirt domain")

// run runs virsh -c URI args and returns its standard output.
func (v virsh) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "virsh", append([]string{"-q", "-c", v.uri}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "failed to get domain") || strings.Contains(msg, "Domain not found") {
			return "", errNoDomain
		}
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("virsh is not installed (Debian's libvirt-clients): %w", err)
		}
		return string(out), fmt.Errorf("virsh -c %s %s: %v: %s", v.uri, strings.Join(args, " "), err, msg)
	}
	return string(out), nil
}

// state is a domain's state as virsh domstate prints it ("running",
// "shut off", ...), or errNoDomain.
func (v virsh) state(ctx context.Context, dom string) (string, error) {
	out, err := v.run(ctx, "domstate", dom)
	return strings.TrimSpace(out), err
}

// owner reads deploy's metadata of a defined domain: whose it is. A
// domain without it was not defined by deploy.
func (v virsh) owner(ctx context.Context, dom string) (domainMeta, error) {
	out, err := v.run(ctx, "dumpxml", "--inactive", dom)
	if err != nil {
		return domainMeta{}, err
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(out); err != nil {
		return domainMeta{}, fmt.Errorf("domain %s: %w", dom, err)
	}
	var m domainMeta
	if d.Metadata != nil {
		dec := xml.NewDecoder(strings.NewReader(d.Metadata.XML))
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Space == LibvirtNamespace && se.Name.Local == "rack" {
				if err := dec.DecodeElement(&m, &se); err != nil {
					return domainMeta{}, fmt.Errorf("domain %s: metadata: %w", dom, err)
				}
				break
			}
		}
	}
	return m, nil
}

// claim checks that domain dom, if libvirt has one of that name, is
// guest's of the rack in runDir, and returns its state ("" when there
// is none). A domain of the name that is another's is an error: deploy
// never touches it.
func (v virsh) claim(ctx context.Context, dom, runDir, guest string) (string, error) {
	st, err := v.state(ctx, dom)
	if errors.Is(err, errNoDomain) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	m, err := v.owner(ctx, dom)
	if err != nil {
		return "", err
	}
	if m.RunDir != runDir || m.Guest != guest {
		whose := "it has no hinic metadata: not defined by hinic deploy"
		if m.RunDir != "" {
			whose = fmt.Sprintf("it is guest %s of the rack in %s", m.Guest, m.RunDir)
		}
		return "", fmt.Errorf("libvirt domain %s exists (%s) and %s; deploy leaves it alone: remove it (virsh -c %s undefine %s) or rename the rack",
			dom, st, whose, v.uri, dom)
	}
	return st, nil
}

// remove destroys (if running) and undefines a domain of the rack's.
func (v virsh) remove(ctx context.Context, dom string) error {
	st, err := v.state(ctx, dom)
	if errors.Is(err, errNoDomain) {
		return nil
	}
	if err != nil {
		return err
	}
	if st != "shut off" {
		if _, err := v.run(ctx, "destroy", dom); err != nil {
			return err
		}
	}
	_, err = v.run(ctx, "undefine", dom)
	return err
}

// domainPID is the pid of a running domain's QEMU when libvirtd runs on
// this machine (its pid file in /run/libvirt/qemu, or in the user's
// runtime directory for a session daemon), 0 otherwise: the process
// deploy meters CPU time of.
func domainPID(uri, dom string) int {
	u, err := url.Parse(uri)
	if err != nil || u.Host != "" {
		return 0
	}
	dir := "/run/libvirt/qemu"
	if u.Path == "/session" {
		dir = filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "libvirt", "qemu", "run")
	}
	pid := readPIDFile(filepath.Join(dir, dom+".pid"))
	if !alive(pid, domainProc(dom)) {
		return 0
	}
	return pid
}

// domainProc is the QEMU libvirt runs for domain dom: libvirt names the
// guest on its command line.
func domainProc(dom string) proc {
	return proc{exe: "qemu-system-", args: []string{"-name", "guest=" + dom + ",debug-threads=on"}}
}

// guestProc is the process a guest's recorded pid must be: its QEMU,
// deploy's own or libvirt's.
func guestProc(g *GuestState) proc {
	if g.Domain != "" {
		return domainProc(g.Domain)
	}
	return qemuProc(g.Dir)
}

// startDomain defines guest g's domain afresh and starts it. A domain
// of the rack's from before (a dead run, or a changed spec) is replaced.
func startDomain(ctx context.Context, r *Rack, g Guest, gs *GuestState, m *image.Manifest, imageDir, pub string) error {
	v := virsh{uri: gs.Libvirt}
	if _, err := v.claim(ctx, gs.Domain, r.RunDir, g.Name); err != nil {
		return err
	}
	if err := v.remove(ctx, gs.Domain); err != nil {
		return err
	}
	x, err := DomainXML(r, g, m, imageDir, gs.Dir, gs.Accel, pub)
	if err != nil {
		return err
	}
	path := filepath.Join(gs.Dir, FileDomainXML)
	if err := writePrivate(path, []byte(x+"\n")); err != nil {
		return err
	}
	if _, err := v.run(ctx, "define", path); err != nil {
		return err
	}
	if _, err := v.run(ctx, "start", gs.Domain); err != nil {
		return err
	}
	gs.PID = domainPID(gs.Libvirt, gs.Domain)
	return nil
}

// domainRunning reports whether guest gs's domain runs, and errs when a
// domain of its name is not the rack's.
func domainRunning(ctx context.Context, runDir string, gs *GuestState) (bool, error) {
	st, err := virsh{uri: gs.Libvirt}.claim(ctx, gs.Domain, runDir, gs.Name)
	return st == "running", err
}

// downDomain destroys and undefines guest g's domain, if it is the
// rack's: a domain of the name that another defined is left alone and
// reported.
func downDomain(runDir string, g *GuestState, p Progress) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v := virsh{uri: g.Libvirt}
	st, err := v.claim(ctx, g.Domain, runDir, g.Name)
	if err != nil {
		return err
	}
	if st == "" {
		p("%s: no libvirt domain %s", g.Name, g.Domain)
		return nil
	}
	if err := v.remove(ctx, g.Domain); err != nil {
		return err
	}
	p("%s: libvirt domain %s destroyed and undefined (was %s)", g.Name, g.Domain, st)
	return nil
}
