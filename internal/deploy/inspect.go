package deploy

import "errors"

// States of a guest as Inspect shows it, beside the running, stopped
// and crashed of Status.
const (
	StateNotDeployed = "not deployed" // from a spec: no rack state
	StateNotStarted  = "not started"  // in the rack's spec, never launched
)

// GuestRow is one guest of a rack as `hinic deploy inspect` lists it,
// like containerlab's inspect: the spec's wiring and, for a deployed
// rack, its process.
type GuestRow struct {
	Rack    string `json:"rack"`
	Name    string `json:"name"`
	State   string `json:"state"` // running, stopped, crashed, not started, not deployed
	NIC     string `json:"nic"`
	Link    string `json:"link"`
	IP      string `json:"ip"`
	MAC     string `json:"mac"`
	Switch  string `json:"switch"`
	Port    int    `json:"port"`
	SSHPort int    `json:"ssh_port"`
	PID     int    `json:"pid,omitempty"`
	Image   string `json:"image"`
	GPUs    int    `json:"gpus,omitempty"`
}

// Inspect lists the guests of the rack deployed in runDir from its
// state file, without asking them anything: a guest runs when its QEMU
// does (deploy status also asks each over SSH).
func Inspect(runDir string) ([]GuestRow, error) {
	st, err := ReadState(runDir)
	if err != nil {
		return nil, err
	}
	rows := specRows(&st.Rack, StateNotStarted)
	for i := range rows {
		row := &rows[i]
		for _, g := range st.Guests {
			if g.Name != row.Name {
				continue
			}
			row.PID = g.PID
			switch {
			case alive(g.PID, guestProc(&g)):
				row.State = "running"
			case st.Down:
				row.State = "stopped"
			case g.PID > 0:
				row.State = "crashed"
			}
			if g.DataIP != "" {
				row.IP = g.DataIP
			}
		}
		if row.State != "running" {
			row.PID = 0 // a pid that is gone, or another process's now
		}
	}
	return rows, nil
}

// InspectSpec lists the guests a spec would deploy, defaults applied,
// in the state "not deployed".
func InspectSpec(r *Rack) ([]GuestRow, error) {
	if r == nil {
		return nil, errors.New("deploy: no rack")
	}
	if err := r.Defaults(); err != nil {
		return nil, err
	}
	return specRows(r, StateNotDeployed), nil
}

func specRows(r *Rack, state string) []GuestRow {
	rows := make([]GuestRow, 0, len(r.Guests))
	for _, g := range r.Guests {
		rows = append(rows, GuestRow{Rack: r.Name, Name: g.Name, State: state, NIC: g.NIC, Link: g.Link, IP: g.IP,
			MAC: g.MAC, Switch: g.Switch, Port: g.Port, SSHPort: g.SSHPort, Image: g.Image, GPUs: g.GPUs.Count})
	}
	return rows
}
