// Package cmdutil holds what every hinic command shares: the Factory a
// command is built from, the IOStreams it reads and writes, the viper
// configuration it reads settings from, the Printer for its results and
// the typed errors that become exit codes.
//
// A command lives in its own file of package cli, or in its own package
// under internal/cli/<noun>/<verb> (gh's layout), and follows one shape:
//
//	type ServeOptions struct {
//		IO    *cmdutil.IOStreams
//		Ports int
//	}
//
//	func NewCmdServe(f *cmdutil.Factory, runF func(*ServeOptions) error) *cobra.Command {
//		opts := &ServeOptions{IO: f.IOStreams}
//		cmd := &cobra.Command{
//			Use:  "serve",
//			Args: cobra.NoArgs,
//			RunE: func(cmd *cobra.Command, args []string) error {
//				cfg, err := f.Config()
//				if err != nil {
//					return err
//				}
//				opts.Ports = cfg.GetInt("fabric.ports")
//				if runF != nil {
//					return runF(opts)
//				}
//				return serveRun(cmd.Context(), opts)
//			},
//		}
//		cmd.Flags().Int("ports", 4, "number of switch ports")
//		f.BindFlag("fabric.ports", cmd.Flags().Lookup("ports"))
//		return cmd
//	}
//
// Values are read from the Config viper under namespaced keys, never from
// flag variables, so that flag > HINIC_FABRIC_PORTS > hinic.yaml
// (fabric: {ports: N}) > flag default holds for every setting.
//
// NewCmd writes that RunE for a command without arguments: the command
// gives its texts, a load function that fills the options from the
// settings, and its run function. NewGroup builds a noun with a
// persistent flag its verbs share. The `serve` verbs of the backends run
// under Serve (--pprof, stop on cancel) and parse their repeated
// key=value flags (--vnic, --gpu) with ParseSpec and GuestSpec; the
// `status` verbs print through PrintStatus, with BytesCell, GuestCell
// and StateCell for the cells they share.
//
// This package imports no command package; commands import it.
package cmdutil
