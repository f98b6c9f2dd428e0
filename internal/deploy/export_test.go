package deploy

// What the external tests drive directly.
var (
	StartGPU     = startGPU
	StopGPU      = func(st *State) error { return stop(st.GPUPID, gpuProc(&st.Rack, st.GPUExe), "gpu", quiet) }
	GPUAlive     = func(st *State) bool { return alive(st.GPUPID, gpuProc(&st.Rack, st.GPUExe)) }
	GPUInfos     = gpuInfos
	GPUsFree     = waitGPUsFree
	CPUMetered   = (*State).CPUSeconds
	StartHiLinks = startHiLinks
	HiLinkAlive  = func(st *State, name string) bool {
		return alive(st.HiLinkPIDs[name], hilinkProc(&st.Rack, name, st.HiLinkExe))
	}
	WaitGPULinks = waitGPULinks
	GPURelinks   = gpuRelinks
)

// quiet discards progress.
func quiet(string, ...any) {}
