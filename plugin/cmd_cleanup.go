package plugin

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/synchook/synchook/internal/undokey"
)

// newCleanupCommand is `synchook cleanup -n NAMESPACE`.
func (p *Plugin) newCleanupCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &cleanupOptions{}
	cmd := &cobra.Command{
		Use:   "cleanup -n NAMESPACE",
		Short: "Take synchook off the host objects of one vcluster (stop the syncer first)",
		Long:  cleanupHelp,
		Example: `  # Stop the syncer, see what a run would do, then run it
  kubectl -n team-a scale statefulset team-a --replicas 0
  synchook cleanup -n team-a --dry-run
  synchook cleanup -n team-a

  # Another cluster of the kubeconfig, the key from a file
  synchook cleanup --context prod -n team-a --undo-key-file keys`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			return exitCode(p.cleanup(o, stdout, stderr))
		},
	}
	fs := cmd.Flags()
	o.cluster.bind(fs, nil, "the vcluster's host namespace, where its objects and the key Secret are (required)")
	fs.Lookup("kubeconfig").Usage = "kubeconfig of the HOST cluster; empty: the KUBECONFIG env var, else ~/.kube/config, else the in-cluster config"
	fs.StringVar(&o.keyFile, "undo-key-file", "", "key ring file (the key Secret's \"keys\" item) that opens sealed undos; empty: read the key Secret")
	fs.StringVar(&o.keySecret, "undo-key-secret", undokey.DefaultSecretName, "name of the undo key Secret in -n/--namespace, read for its keys (without --undo-key-file) and its kinds")
	deprecatedAlias(fs, "key-secret", "undo-key-secret")
	fs.StringVar(&o.kinds, "kinds", "", "comma-separated kinds to clean, <group/version>/<Kind> (e.g. v1/Pod,apps/v1/Deployment); empty: v1 Pod, Service, Secret, ConfigMap and the host kinds the key Secret lists")
	fs.BoolVar(&o.dryRun, "dry-run", false, "report what would be cleaned and write nothing")
	return cmd
}
