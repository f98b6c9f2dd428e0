package qmp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrNoDevice is PCIAddress's answer for a qdev id on no PCI bus.
var ErrNoDevice = errors.New("qmp: no such PCI device")

// PCIAddr is a PCI function's place: its bus number and devfn.
type PCIAddr struct {
	Bus, Slot, Function int
}

// String is the form of device_add's addr property: "slot.function".
func (a PCIAddr) String() string { return fmt.Sprintf("%x.%x", a.Slot, a.Function) }

// PCIAddress finds the PCI function whose qdev id is id (query-pci).
func (c *Client) PCIAddress(ctx context.Context, id string) (PCIAddr, error) {
	r, err := c.Execute(ctx, "query-pci", nil)
	if err != nil {
		return PCIAddr{}, err
	}
	return findPCI(r, id)
}

func findPCI(r json.RawMessage, id string) (PCIAddr, error) {
	type dev struct {
		Bus      int    `json:"bus"`
		Slot     int    `json:"slot"`
		Function int    `json:"function"`
		QdevID   string `json:"qdev_id"`
	}
	var buses []struct {
		Devices []dev `json:"devices"`
	}
	if err := json.Unmarshal(r, &buses); err != nil {
		return PCIAddr{}, fmt.Errorf("%w: query-pci: %v", ErrMessage, err)
	}
	for _, b := range buses {
		for _, d := range b.Devices {
			if d.QdevID == id {
				return PCIAddr{Bus: d.Bus, Slot: d.Slot, Function: d.Function}, nil
			}
		}
	}
	return PCIAddr{}, fmt.Errorf("%w: %q", ErrNoDevice, id)
}

// Unplug asks the guest to release the device whose qdev id is id
// (device_del) and waits until QEMU deleted it (DEVICE_DELETED). On a
// machine with ACPI PCI hotplug (pc) that takes the guest's
// cooperation: its driver's remove must complete, then the guest ejects
// the slot. A guest that does not is reported when ctx ends.
func (c *Client) Unplug(ctx context.Context, id string) error {
	if _, err := c.Execute(ctx, "device_del", map[string]string{"id": id}); err != nil {
		return fmt.Errorf("qmp: device_del %s: %w", id, err)
	}
	if _, err := c.WaitEvent(ctx, "DEVICE_DELETED", DeviceDeleted(id)); err != nil {
		return fmt.Errorf("qmp: the guest did not release device %s: %w", id, err)
	}
	return nil
}

// Ivshmem is an ivshmem-doorbell function and the socket chardev of
// its server.
type Ivshmem struct {
	ID      string  // the function's qdev id
	Chardev string  // the chardev's id
	Socket  string  // the ivshmem server's UNIX socket
	Vectors int     // MSI-X vectors
	Bus     string  // "pci.0" on the pc machine
	Addr    PCIAddr // its place on Bus
}

// PlugIvshmem gives the guest the function f on a new connection to its
// server: the old chardev, whose server is gone, is removed, a new one
// connects to f.Socket (a server that is not listening fails here),
// and device_add realizes the function at f.Addr, which reads the
// server's set-up there and then; the guest's ACPI hotplug then finds
// it and its driver probes.
func (c *Client) PlugIvshmem(ctx context.Context, f Ivshmem) error {
	// Gone already when a previous attempt removed it.
	var qe *Error
	if _, err := c.Execute(ctx, "chardev-remove", map[string]string{"id": f.Chardev}); err != nil &&
		!(errors.As(err, &qe) && qe.Class == "GenericError") {
		return fmt.Errorf("qmp: chardev-remove %s: %w", f.Chardev, err)
	}
	backend := map[string]any{
		"type": "socket",
		"data": map[string]any{
			"addr":   map[string]any{"type": "unix", "data": map[string]string{"path": f.Socket}},
			"server": false,
		},
	}
	if _, err := c.Execute(ctx, "chardev-add", map[string]any{"id": f.Chardev, "backend": backend}); err != nil {
		return fmt.Errorf("qmp: chardev-add %s (%s): %w", f.Chardev, f.Socket, err)
	}
	args := map[string]any{
		"driver": "ivshmem-doorbell", "id": f.ID, "chardev": f.Chardev,
		"vectors": f.Vectors, "bus": f.Bus, "addr": f.Addr.String(),
	}
	if _, err := c.Execute(ctx, "device_add", args); err != nil {
		return fmt.Errorf("qmp: device_add %s: %w", f.ID, err)
	}
	return nil
}
