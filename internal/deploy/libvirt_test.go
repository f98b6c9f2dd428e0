package deploy

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/PacketFive/hinic/internal/image"
)

func TestCheckLibvirtURI(t *testing.T) {
	for _, tc := range []struct {
		uri  string
		want string // a part of the error; "" for none
	}{
		{"qemu:///system", ""},
		{"qemu:///session", ""},
		{"qemu+unix:///system", ""},
		{"qemu+ssh://root@h2/system", ""},
		{"qemu+ssh://h2:2222/system?keyfile=/root/.ssh/id_ed25519", ""},
		{"qemu+tls://h2.example/system", ""},
		{"xen:///system", "driver must be qemu"},
		{"qemu+ssh:///system", "needs a host"},
		{"qemu://h2/system", "a local URI has no host"},
		{"qemu+ftp://h2/system", "transport \"ftp\""},
		{"qemu:///", "the path must be /system"},
		{"qemu+ssh://h2/system/x", "the path must be /system"},
		{"qemu:///system extra", "not a URI"},
		{"%zz", "not a URI"},
	} {
		err := checkLibvirtURI(tc.uri)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.uri, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want one with %q", tc.uri, err, tc.want)
		}
	}
}

// TestLibvirtSpecErrors: a bad libvirt URI, or one with a netns, is
// refused at its line and key.
func TestLibvirtSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		spec, want string
	}{
		{"hosts:\n  - name: h1\n    address: 127.0.0.1\n    libvirt: xen:///system\n",
			`:4: hosts[0].libvirt: host h1: libvirt "xen:///system": the driver must be qemu`},
		{"hosts:\n  - name: h1\n    address: 127.0.0.1\n    netns: ns1\n    libvirt: qemu:///system\n",
			`:5: hosts[0].libvirt: host h1: a libvirt host is a machine`},
		{"name: a b\nhosts:\n  - name: h1\n    address: 127.0.0.1\n    libvirt: qemu:///system\n",
			`:1: name: "a b": the rack's libvirt domains`},
	} {
		p := filepath.Join(t.TempDir(), "r.yaml")
		if err := os.WriteFile(p, []byte(tc.spec), 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := ReadRack(p)
		if err == nil {
			err = r.Defaults()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("spec\n%s: error %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// libvirtGoldenRack has a guest of each kind: Soft-RoCE, a HiNIC RoCE
// vNIC with a GPU, a HiNIC InfiniBand vNIC.
const libvirtGoldenRack = `
name: lvg
run-dir: /run/lvg
network: 10.61.0.0/24
ssh-port-base: 2410
hosts:
  - name: h1
    address: 192.0.2.10
    libvirt: qemu+ssh://root@h1/system
switches: [{name: sw0}, {name: sw1}]
guests:
  - {name: vm-rxe, nic: rxe, mac: "52:54:00:61:00:11", switch: sw0}
  - {name: vm-eth, nic: hicain, mac: "52:54:00:61:00:12", switch: sw0, memory: 2048, cpus: 2, gpus: {count: 1}}
  - {name: vm-ib, nic: hicain, link: ib, mac: "52:54:00:61:00:13", switch: sw1}
`

// TestDomainXMLGolden: the domain XML of each guest kind is the one in
// testdata/libvirt (go test ./internal/deploy -run TestDomainXMLGolden
// -update rewrites them), it is what libvirtxml reads back, and it
// carries the machine of QEMUArgs: the same memory, kernel, disk,
// sockets and forwards.
func TestDomainXMLGolden(t *testing.T) {
	r, err := ParseRack([]byte(libvirtGoldenRack))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Defaults(); err != nil {
		t.Fatal(err)
	}
	m := &image.Manifest{Cmdline: "root=/dev/vda console=ttyS0"}
	for _, g := range r.Guests {
		t.Run(g.Name, func(t *testing.T) {
			dir := GuestDir(r, g.Name)
			// A fixed uid:gid for the golden file; DomainXML uses the
			// deploying user's.
			vm := newGuestVM(r, g, m, "/img", dir, "tcg", "ssh-ed25519 AAAAkey root@h")
			meta, err := xml.Marshal(domainMeta{RunDir: r.RunDir, Rack: r.Name, Guest: g.Name})
			if err != nil {
				t.Fatal(err)
			}
			got, err := vm.domain(DomainName(r, g), string(meta), 0, 0).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			got += "\n"
			golden := filepath.Join("testdata", "libvirt", g.Name+".xml")
			if *updateDocs {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./internal/deploy -run TestDomainXMLGolden -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("domain XML differs from %s (-update rewrites it):\n%s", golden, got)
			}

			var d libvirtxml.Domain
			if err := d.Unmarshal(got); err != nil {
				t.Fatal(err)
			}
			if d.Name != "hinic-lvg-"+g.Name || d.Type != "qemu" || d.OS.Type.Machine != string(QEMUMachine) ||
				d.Memory.Value != uint(g.Memory) || d.Memory.Unit != "MiB" || d.VCPU.Value != uint(g.CPUs) {
				t.Errorf("domain: name %s type %s machine %s memory %d %s vcpus %d", d.Name, d.Type, d.OS.Type.Machine,
					d.Memory.Value, d.Memory.Unit, d.VCPU.Value)
			}
			if d.OS.Kernel != "/img/"+image.FileKernel || d.OS.Initrd != "/img/"+image.FileInitrd ||
				d.OS.Cmdline != m.Cmdline+" systemd.hostname="+g.Name {
				t.Errorf("boot: %+v", d.OS)
			}
			if len(d.Devices.Disks) != 1 || d.Devices.Disks[0].Source.File.File != dir+"/disk.qcow2" {
				t.Errorf("disks: %+v", d.Devices.Disks)
			}
			args := map[string]bool{}
			for _, a := range d.QEMUCommandline.Args {
				args[a.Value] = true
			}
			qemu := strings.Join(QEMUArgs(r, g, m, "/img", dir, "tcg", "k"), " ")
			// Every <qemu:commandline> argument but the machine
			// option is one of deploy's own command line.
			for a := range args {
				a, _, _ = strings.Cut(a, ",addr=") // the NICs' fixed slots
				if a != "memory-backend=ram0" && !strings.Contains(qemu, a) {
					t.Errorf("commandline argument %q is not on QEMUArgs' command line", a)
				}
			}
			if !args["user,id=mgmt,hostfwd=tcp:192.0.2.10:"+strconv.Itoa(g.SSHPort)+"-:22"] {
				t.Errorf("no SSH forward in %v", d.QEMUCommandline.Args)
			}
			ram := "memory-backend-file,id=ram0,size=" + strconv.Itoa(g.Memory) + "M,mem-path=" + GuestRAM(r, g) + ",share=on"
			if args[ram] != sharedRAM(g) {
				t.Errorf("RAM file in commandline: %v, want %v", args[ram], sharedRAM(g))
			}
			stream := "stream,id=data,server=on,addr.type=unix,addr.path=" + StreamSocket(r, g)
			if args[stream] != (g.NIC == NICRxe) {
				t.Errorf("stream netdev: %v", args[stream])
			}
			var socks []string
			for _, s := range d.Devices.Shmems {
				if s.Model.Type != "ivshmem-doorbell" || s.MSI == nil || s.MSI.IOEventFD != "on" {
					t.Errorf("shmem %+v", s)
				}
				socks = append(socks, s.Server.Path)
			}
			var wantSocks []string
			if g.NIC == NICHicain {
				wantSocks = append(wantSocks, IvshmemSocket(r, g))
				if d.Devices.Shmems[0].MSI.Vectors != hicainVectors {
					t.Errorf("hicain vectors %d", d.Devices.Shmems[0].MSI.Vectors)
				}
			}
			for _, id := range g.GPUs.IDs {
				wantSocks = append(wantSocks, GPUSocket(r, g, id))
			}
			if strings.Join(socks, " ") != strings.Join(wantSocks, " ") {
				t.Errorf("shmem sockets %v, want %v", socks, wantSocks)
			}
			if len(d.SecLabel) != 1 || d.SecLabel[0].Label != "+0:+0" || d.SecLabel[0].Relabel != "no" {
				t.Errorf("seclabel %+v", d.SecLabel)
			}
			if !strings.Contains(d.Metadata.XML, `run-dir="/run/lvg"`) || !strings.Contains(d.Metadata.XML, `guest="`+g.Name+`"`) {
				t.Errorf("metadata %s", d.Metadata.XML)
			}
		})
	}
}

// fakeVirsh puts a stand-in virsh first on PATH that knows one domain,
// dom, in state, with the metadata of the rack in runDir (owner "" for
// none), and logs its calls to the file it returns.
func fakeVirsh(t *testing.T, dom, state, owner, guest string) string {
	t.Helper()
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	meta := ""
	if owner != "" {
		meta = `<metadata><hinic:rack xmlns:hinic="urn:hinic:deploy:1" run-dir="` + owner + `" name="r" guest="` + guest + `"/></metadata>`
	}
	script := `#!/bin/sh
echo "$*" >> ` + calls + `
shift 3 # -q -c URI
case "$1 $2" in
"domstate ` + dom + `") echo "` + state + `" ;;
"dumpxml --inactive") echo '<domain type="qemu"><name>` + dom + `</name>` + meta + `</domain>' ;;
"destroy ` + dom + `"|"undefine ` + dom + `") ;;
*) echo "error: failed to get domain '$2'" >&2; exit 1 ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "virsh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return calls
}

// TestLibvirtStatusDown: status reads a libvirt guest's state from its
// domain, and down destroys and undefines a domain with the rack's
// metadata but leaves one of another's alone, with an error that names
// it.
func TestLibvirtStatusDown(t *testing.T) {
	runDir := filepath.Join(t.TempDir(), "run")
	if err := ensurePrivateDir(runDir); err != nil {
		t.Fatal(err)
	}
	write := func(down bool) {
		r := Rack{Name: "r", RunDir: runDir, Hosts: []Host{{Name: "h1", Address: "127.0.0.1", Libvirt: "qemu:///system"}},
			Guests: []Guest{{Name: "vm-a"}}}
		if err := r.Defaults(); err != nil {
			t.Fatal(err)
		}
		st := &State{Rack: r, Down: down, path: filepath.Join(runDir, FileState), Guests: []GuestState{
			{Name: "vm-a", Dir: filepath.Join(runDir, "vm-a"), Libvirt: "qemu:///system", Domain: "hinic-r-vm-a"}}}
		if err := st.save(); err != nil {
			t.Fatal(err)
		}
	}
	status := func() GuestStatus {
		t.Helper()
		rs, err := Status(t.Context(), runDir)
		if err != nil {
			t.Fatal(err)
		}
		return rs.Guests[0]
	}

	write(false)
	fakeVirsh(t, "hinic-r-vm-a", "shut off", runDir, "vm-a")
	if g := status(); g.State != "crashed" || g.Domain != "hinic-r-vm-a" || !strings.Contains(g.Error, "libvirt domain hinic-r-vm-a: shut off") {
		t.Errorf("own domain shut off: %+v", g)
	}
	calls := fakeVirsh(t, "hinic-r-vm-a", "running", "/elsewhere", "vm-a")
	if g := status(); g.State != "unknown" || !strings.Contains(g.Error, "it is guest vm-a of the rack in /elsewhere") {
		t.Errorf("another rack's domain: %+v", g)
	}
	err := Down(runDir, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "deploy leaves it alone") {
		t.Errorf("down with another rack's domain: %v", err)
	}
	if b, _ := os.ReadFile(calls); strings.Contains(string(b), "destroy") || strings.Contains(string(b), "undefine") {
		t.Errorf("down touched another rack's domain:\n%s", b)
	}

	write(false)
	calls = fakeVirsh(t, "hinic-r-vm-a", "running", runDir, "vm-a")
	if err := Down(runDir, t.Logf); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(calls)
	if !strings.Contains(string(b), "destroy hinic-r-vm-a\n") || !strings.Contains(string(b), "undefine hinic-r-vm-a\n") {
		t.Errorf("down did not destroy and undefine the rack's domain:\n%s", b)
	}
	fakeVirsh(t, "other", "running", "", "")
	if g := status(); g.State != "stopped" || g.Error != "" {
		t.Errorf("after down, no domain: %+v", g)
	}
}
