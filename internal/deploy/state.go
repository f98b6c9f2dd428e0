package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// State is what a deployed rack leaves in its run directory (state.json).
type State struct {
	Rack      Rack      `json:"rack"`
	Started   time.Time `json:"started"`
	FabricPID int       `json:"fabric_pid"`
	DevicePID int       `json:"device_pid,omitempty"` // hinic device serve, with hicain guests
	GPUPID    int       `json:"gpu_pid,omitempty"`    // hinic gpu serve, with guests that have GPUs
	// FabricExe, DeviceExe and GPUExe are the hinic binaries, symlinks
	// resolved, that started the fabric and the device and GPU
	// backends: a recorded pid is the rack's process only when it runs
	// that binary (see proc). A state written before they were recorded
	// has them empty, and the binary reading it stands in for them.
	FabricExe string `json:"fabric_exe,omitempty"`
	DeviceExe string `json:"device_exe,omitempty"`
	GPUExe    string `json:"gpu_exe,omitempty"`
	// HiLinkPIDs are the racks' HiLink switches (hinic link serve) by
	// name, HiLinkExe the binary that started them.
	HiLinkPIDs map[string]int `json:"hilink_pids,omitempty"`
	HiLinkExe  string         `json:"hilink_exe,omitempty"`
	Guests     []GuestState   `json:"guests"`
	// Hosts are the hosts' parts of a rack that spans hosts (hosts.go),
	// each a rack with its own state in its run directory; the rack's
	// own state then lists every guest and runs no daemon.
	Hosts   []HostState  `json:"hosts,omitempty"`
	Timings []StepTiming `json:"timings"`
	Down    bool         `json:"down"`
	// AccelWhy says why the guests run under their accelerator (the KVM
	// probe's verdict, one line per guest kernel).
	AccelWhy []string `json:"accel_why,omitempty"`

	mu   sync.Mutex // guards the fields above while guests boot in parallel
	path string
	// deviceFresh is set when this Up started the device backend: a
	// hicain guest's QEMU still running from before is attached to
	// nothing and boots again.
	deviceFresh bool
	// gpuFresh is the same for the GPU backend and the guests with
	// GPUs.
	gpuFresh bool
}

// GuestState is a guest of a deployed rack.
type GuestState struct {
	Name    string `json:"name"`
	PID     int    `json:"pid"`
	SSHAddr string `json:"ssh_addr"`
	// Netns is the network namespace SSHAddr is in: the guest's host's,
	// when that is a namespace of this machine.
	Netns   string  `json:"netns,omitempty"`
	DataIP  string  `json:"data_ip"`
	DataNIC string  `json:"data_nic"` // the guest's netdev name, e.g. ens4
	RDMADev string  `json:"rdma_dev"` // e.g. rxe0
	NIC     string  `json:"nic"`
	Link    string  `json:"link"`  // eth (RoCEv2) or ib (native InfiniBand; DataNIC is IPoIB)
	Accel   string  `json:"accel"` // tcg or kvm
	Dir     string  `json:"dir"`
	BootSec float64 `json:"boot_to_ssh_s"`
	// HicainGen counts the HiNIC functions deploy restart device gave
	// the running QEMU: the current one is hicainQdevID(HicainGen) on
	// chardev hicainChardevID(HicainGen); 0 is QEMUArgs' own.
	HicainGen int `json:"hicain_gen,omitempty"`
	// Libvirt and Domain are the URI and the domain of a guest placed
	// through libvirt (libvirt.go); PID is then its QEMU's when
	// libvirtd runs on this machine.
	Libvirt string `json:"libvirt,omitempty"`
	Domain  string `json:"domain,omitempty"`
	Ready   bool   `json:"ready"`
	Error   string `json:"error,omitempty"`
}

// StepTiming records how long a deploy step took.
type StepTiming struct {
	Step    string  `json:"step"`
	Seconds float64 `json:"seconds"`
}

// ReadState reads the state of the rack in runDir.
func ReadState(runDir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(runDir, FileState))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s (deploy a rack first)", ErrNotDeployed, runDir)
	}
	if err != nil {
		return nil, err
	}
	// The state names processes to stop and the key to trust: only a
	// private run dir's is believed.
	if err := checkPrivateDir(runDir); err != nil {
		return nil, err
	}
	s := &State{path: filepath.Join(runDir, FileState)}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("deploy: %s: %w", s.path, err)
	}
	return s, nil
}

func (s *State) save() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := writePrivate(tmp, append(b, '\n')); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

// Guest returns the state of the named guest.
func (s *State) Guest(name string) *GuestState {
	for i := range s.Guests {
		if s.Guests[i].Name == name {
			return &s.Guests[i]
		}
	}
	return nil
}

// Connect opens SSH to a deployed guest.
func (s *State) Connect(ctx context.Context, g *GuestState) (*Client, error) {
	signer, _, err := EnsureKey(filepath.Join(s.Rack.RunDir, FileKey))
	if err != nil {
		return nil, err
	}
	return dialIn(ctx, g.Netns, g.SSHAddr, signer, filepath.Join(s.Rack.RunDir, FileKnownHosts))
}
