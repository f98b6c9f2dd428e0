// Package integration holds the device backend's integration tests; it
// has no code of its own. Simulated guests (internal/device/guestsim)
// drive `device serve` over the real ivshmem protocol and a real RAM file,
// attached to a real HiSwitch (internal/fabric); the QEMU tests boot stock
// guests with the hicain modules and provider built from kernel/ and
// rdma-core/. They sit here, above both device and fabric, so that
// device's own tests import neither fabric nor QEMU's control
// (internal/deps_test.go holds the rule).
package integration
