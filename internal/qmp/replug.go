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

// Ivshmem is an ivshmem-doorbell function and the socket chardev of
// its server.
type Ivshmem struct {
	ID      string // the function's qdev id
	Chardev string // the chardev's id
	Socket  string // the ivshmem server's UNIX socket
	Vectors int    // MSI-X vectors
	Bus     string // "pci.0" on the pc machine
}

// AddIvshmem plugs in a new ivshmem-doorbell function f on a new
// chardev connected to f.Socket (a server that is not listening fails
// here), at the first free slot of f.Bus. device_add realizes it, which
// reads the server's set-up there and then; the guest's ACPI hotplug
// then finds it and its driver probes.
//
// There is no counterpart that removes one: on QEMU 7.2 without KVM's
// irqfd (TCG), ivshmem_exit closes the function's interrupt eventfds and
// frees its msi_vectors but never removes the fd handlers that
// watch_vector_notifier installed (qemu_set_fd_handler with
// ivshmem_vector_notify and &s->msi_vectors[vector]), so once a new
// file takes one of those descriptor numbers and becomes readable,
// ivshmem_vector_notify runs on freed memory and QEMU crashes
// (hw/misc/ivshmem.c; seen as a segfault in ivshmem_vector_notify after
// device_del and device_add). An old function is left in place instead,
// its driver unbound in the guest.
func (c *Client) AddIvshmem(ctx context.Context, f Ivshmem) error {
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
		"vectors": f.Vectors, "bus": f.Bus,
	}
	if _, err := c.Execute(ctx, "device_add", args); err != nil {
		// The chardev is the new function's alone: no use keeping it.
		_, _ = c.Execute(ctx, "chardev-remove", map[string]string{"id": f.Chardev})
		return fmt.Errorf("qmp: device_add %s: %w", f.ID, err)
	}
	return nil
}
