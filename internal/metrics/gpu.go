package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/PacketFive/hinic/internal/gpu"
)

// The GPU backend (hinic gpu serve). Every metric has the label gpu,
// the GPU's gpu_id.
var (
	gpuGuest     = def("gpu", "hinic_gpu_guest_connected", Gauge, "1 while a guest is connected to the GPU, else 0.", "gpu")
	gpuMemSize   = def("gpu", "hinic_gpu_memory_bytes", Gauge, "Device memory of the GPU.", "gpu")
	gpuMemUsed   = def("gpu", "hinic_gpu_memory_used_bytes", Gauge, "Device memory the guest has allocated.", "gpu")
	gpuContexts  = def("gpu", "hinic_gpu_contexts", Gauge, "Contexts the guest holds.", "gpu")
	gpuAllocs    = def("gpu", "hinic_gpu_allocations", Gauge, "Device memory allocations the guest holds.", "gpu")
	gpuInflight  = def("gpu", "hinic_gpu_inflight_commands", Gauge, "Commands taken and not yet completed.", "gpu")
	gpuSessions  = def("gpu", "hinic_gpu_sessions_total", Counter, "Guest sessions the GPU accepted.", "gpu")
	gpuDoorbells = def("gpu", "hinic_gpu_doorbells_total", Counter, "Doorbells the guest rang.", "gpu")
	gpuIRQs      = def("gpu", "hinic_gpu_interrupts_total", Counter, "Interrupts the backend raised.", "gpu")
	gpuCommands  = def("gpu", "hinic_gpu_commands_total", Counter, "Commands executed.", "gpu")
	gpuErrors    = def("gpu", "hinic_gpu_command_errors_total", Counter, "Commands that completed with an error.", "gpu")
	gpuKernels   = def("gpu", "hinic_gpu_kernels_total", Counter, "Kernels launched.", "gpu")
	gpuCopyBytes = def("gpu", "hinic_gpu_copy_bytes_total", Counter, "Bytes copied, by direction (h2d, d2h, d2d).", "gpu", "direction")
	gpuBusy      = def("gpu", "hinic_gpu_busy_seconds_total", Counter, "Time the GPU's streams spent executing (streams add up).", "gpu")
	gpuFatal     = def("gpu", "hinic_gpu_fatal_total", Counter, "Times the GPU entered the fatal state.", "gpu")
	gpuResets    = def("gpu", "hinic_gpu_resets_total", Counter, "Device resets.", "gpu")
	gpuDropped   = def("gpu", "hinic_gpu_dropped_completions_total", Counter, "Completions dropped because their session ended.", "gpu")
)

// GPU returns the collector of a GPU backend: status is
// (*gpu.Server).Status.
func GPU(status func() gpu.Status) prometheus.Collector {
	return &collector[gpu.Status]{source: "gpu", status: status, emit: emitGPU}
}

func emitGPU(st gpu.Status, emit emitFunc) {
	for _, g := range st.GPUs {
		n := strconv.Itoa(g.ID)
		emit(gpuGuest, b(g.Guest), n)
		emit(gpuMemSize, u(g.MemSize), n)
		emit(gpuMemUsed, u(g.MemUsed), n)
		emit(gpuContexts, float64(g.Contexts), n)
		emit(gpuAllocs, float64(g.Allocs), n)
		emit(gpuInflight, float64(g.Inflight), n)
		c := g.Counters
		emit(gpuSessions, u(c.Sessions), n)
		emit(gpuDoorbells, u(c.Doorbells), n)
		emit(gpuIRQs, u(c.Interrupts), n)
		emit(gpuCommands, u(c.Commands), n)
		emit(gpuErrors, u(c.Errors), n)
		emit(gpuKernels, u(c.Kernels), n)
		emit(gpuCopyBytes, u(c.BytesH2D), n, "h2d")
		emit(gpuCopyBytes, u(c.BytesD2H), n, "d2h")
		emit(gpuCopyBytes, u(c.BytesD2D), n, "d2d")
		emit(gpuBusy, float64(c.BusyNS)/1e9, n)
		emit(gpuFatal, u(c.Fatal), n)
		emit(gpuResets, u(c.Resets), n)
		emit(gpuDropped, u(c.Dropped), n)
	}
}
