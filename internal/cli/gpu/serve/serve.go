// Package serve implements `hinic gpu serve`: it runs the GPU backend
// (one or more HiGPUs) until interrupted.
package serve

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/PacketFive/hinic/internal/cli/cmdutil"
	"github.com/PacketFive/hinic/internal/cli/gpu/shared"
	"github.com/PacketFive/hinic/internal/gpu"
	"github.com/PacketFive/hinic/internal/metrics"
)

// Setting keys.
const (
	KeyGPUs    = "gpu.gpus"
	KeyPprof   = "gpu.pprof"
	KeyMetrics = "gpu.metrics"
)

// Options are the settings of one `hinic gpu serve` run.
type Options struct {
	IO      *cmdutil.IOStreams
	Logger  *slog.Logger
	Control string
	GPUs    []gpu.GPUConfig
	Pprof   string
	// Metrics, if set, is where the Prometheus endpoint listens
	// (--metrics); MetricsReady, if set, gets its URL (tests).
	Metrics      string
	MetricsReady func(url string)
	// Ready, if set, is called once every socket listens (tests).
	Ready func(*gpu.Server)
}

const long = `Run the HiGPU backend: the "hardware" of emulated GPUs that stock QEMU
guests drive through the ivshmem-doorbell PCI device (higpu.ko, libhicart).

Each --gpu is one GPU function of one guest. The backend maps the guest's
RAM file and the GPU's device memory, and listens on the ivshmem socket;
start it before QEMU, which reads the ivshmem setup synchronously at
start-up. QEMU then needs, per GPU:

  -machine <pc|q35>,memory-backend=ram0 -m <ram-size>
  -object memory-backend-file,id=ram0,size=<ram-size>,mem-path=<ram>,share=on
  -chardev socket,path=<socket>,id=gpu0
  -device ivshmem-doorbell,chardev=gpu0,vectors=<vectors>

Several GPUs of one guest name the same ram= and different id= and socket=.

A --gpu value is a comma-separated list of key=value:
  socket=PATH       ivshmem server socket (required)
  ram=PATH          guest RAM file, the memory-backend-file mem-path (required)
  ram-size=SIZE     guest RAM, equal to QEMU's -m: bytes or with K, M, G (required)
  machine=TYPE      pc or q35 (default q35): where RAM sits below and above 4 GiB
  id=N              gpu_id 0..7 (default 0): device addresses start at (N+1) TiB
  name=NAME         the name in the device header (default HiGPU, at most 31 bytes)
  mem=PATH          host file holding device memory (created, sized, kept sparse);
                    default an anonymous memfd
  mem-size=SIZE     device memory (default 1G, a multiple of 4K, at most 1T)
  vectors=N         ivshmem vectors, same as QEMU's vectors= (default 4, at least 2)
  mem-budget=SIZE   device memory the guest may hold (default mem-size)
  max-contexts=N    contexts of the guest (default 64)
  max-allocs=N      allocations of the guest, all contexts (default 4096)
  max-inflight=N    commands taken and not completed (default 1024)
  max-streams=N     streams per context (default 16)
  max-events=N      events per context (default 256)
  max-sge=N         scatter-list entries of one copy (default 256)
  ctx-mem-budget=SIZE  device memory one context may hold (default mem-budget)
  ctx-max-allocs=N  allocations of one context (default max-allocs)
  hilink=PATH       a HiLink switch port (hinic link serve's hilink-port<N>.sock):
                    peer access to the other GPUs of the rack; gpu_id is the
                    GPU's id on that fabric (default none)
  link-name=NAME    the port's name in hinic link status (default the socket's file name)
  max-peer-ops=N    peer operations of the guest in flight (default 64, at most 256)

The ABI is kernel/higpu_abi.h; docs/gpu.md describes the device. hinic gpu
status reads the control socket. The command runs until SIGINT or SIGTERM.`

const example = `  hinic gpu serve --gpu socket=/run/hinic/vm-a.gpu0,ram=/dev/shm/vm-a.ram,ram-size=4G,mem-size=8G
  hinic gpu serve --gpu socket=/tmp/g0.sock,ram=/dev/shm/a.ram,ram-size=2G,id=0,mem=/var/tmp/g0.mem \
                  --gpu socket=/tmp/g1.sock,ram=/dev/shm/a.ram,ram-size=2G,id=1,mem=/var/tmp/g1.mem`

// NewCmdServe returns the `gpu serve` command. runF replaces the work in
// tests; nil runs it.
func NewCmdServe(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams}
	cmd := cmdutil.NewCmd(f, &cobra.Command{
		Use:     "serve",
		Short:   "Run the emulated GPU backend for QEMU guests until interrupted",
		Long:    long,
		Example: example,
	}, opts, func(v *viper.Viper) error {
		specs := v.GetStringSlice(KeyGPUs)
		if len(specs) == 0 {
			return cmdutil.UsageErrorf("no GPU: give at least one --gpu socket=...,ram=...,ram-size=...")
		}
		gpus, err := cmdutil.ParseSpecs("--gpu", specs, ParseGPU)
		if err != nil {
			return err
		}
		opts.GPUs = gpus
		opts.Control = shared.ControlPath(v.GetString(shared.KeyControl))
		opts.Pprof = v.GetString(KeyPprof)
		opts.Metrics = v.GetString(KeyMetrics)
		opts.Logger = f.Logger()
		return nil
	}, runF, Run)
	cmd.Flags().StringArray("gpu", nil, "a GPU as `key=value,...` (see above); repeat for several")
	cmd.Flags().String("pprof", "", cmdutil.PprofHelp)
	f.BindFlag(KeyGPUs, cmd.Flags().Lookup("gpu"))
	f.BindFlag(KeyPprof, cmd.Flags().Lookup("pprof"))
	cmd.Flags().String("metrics", "", cmdutil.MetricsHelp)
	f.BindFlag(KeyMetrics, cmd.Flags().Lookup("metrics"))
	return cmd
}

// Run serves until ctx is cancelled.
func Run(ctx context.Context, opts *Options) error {
	ms, err := metrics.Start(opts.Metrics, opts.Logger)
	if err != nil {
		return cmdutil.UsageErrorf("--metrics %q: %v", opts.Metrics, err)
	}
	defer ms.Close()
	return cmdutil.Serve(ctx, opts.Pprof, opts.Logger, func() (func() error, error) {
		srv, err := gpu.Start(ctx, gpu.Config{GPUs: opts.GPUs, Logger: opts.Logger, Control: opts.Control})
		if err != nil {
			return nil, err
		}
		for _, g := range srv.GPUs() {
			c := g.Config()
			opts.Logger.Info("GPU serving", "gpu_id", c.ID, "name", c.Name, "ivshmem", c.Socket, "ram", c.RAMPath,
				"mem_size", c.MemSize, "mem", c.MemPath)
		}
		opts.Logger.Info("GPU backend serving", "gpus", len(opts.GPUs), "status", "hinic gpu status --control "+opts.Control)
		if err := ms.Register(metrics.GPU(srv.Status)); err != nil {
			srv.Close()
			return nil, err
		}
		if opts.MetricsReady != nil {
			opts.MetricsReady(ms.URL())
		}
		if opts.Ready != nil {
			opts.Ready(srv)
		}
		return srv.Close, nil
	})
}

// ParseGPU parses one --gpu value.
func ParseGPU(spec string) (gpu.GPUConfig, error) {
	var c gpu.GPUConfig
	guest := cmdutil.GuestSpec{Socket: &c.Socket, RAMPath: &c.RAMPath, RAMSize: &c.RAMSize, Machine: &c.Machine}
	keys := guest.Keys(cmdutil.SpecKeys{
		"id": func(_, val string) (err error) {
			if c.ID, err = strconv.Atoi(val); err == nil && (c.ID < 0 || c.ID >= gpu.MaxGPUs) {
				err = fmt.Errorf("id=%s: want 0..%d", val, gpu.MaxGPUs-1)
			}
			return err
		},
		"name":           cmdutil.StringKey(&c.Name),
		"mem":            cmdutil.StringKey(&c.MemPath),
		"mem-size":       cmdutil.SizeKey(&c.MemSize),
		"vectors":        cmdutil.PositiveKey(&c.Vectors),
		"mem-budget":     cmdutil.SizeKey(&c.MemBudget),
		"max-contexts":   cmdutil.PositiveKey(&c.MaxContexts),
		"max-allocs":     cmdutil.PositiveKey(&c.MaxAllocs),
		"max-inflight":   cmdutil.PositiveKey(&c.MaxInflight),
		"max-streams":    cmdutil.PositiveKey(&c.MaxStreams),
		"max-events":     cmdutil.PositiveKey(&c.MaxEvents),
		"max-sge":        cmdutil.PositiveKey(&c.MaxSGE),
		"ctx-mem-budget": cmdutil.SizeKey(&c.CtxMemBudget),
		"ctx-max-allocs": cmdutil.PositiveKey(&c.CtxMaxAllocs),
		"hilink":         cmdutil.StringKey(&c.HiLink),
		"link-name":      cmdutil.StringKey(&c.LinkName),
		"max-peer-ops":   cmdutil.PositiveKey(&c.MaxPeerOps),
	})
	if err := cmdutil.ParseSpec(spec, keys); err != nil {
		return c, err
	}
	return c, guest.Check()
}
