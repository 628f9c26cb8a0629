package plugin

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/webhook"
)

// mutateFlags returns mutate's flags and the options they set.
func mutateFlags() (*pflag.FlagSet, *mutateOptions) {
	o := &mutateOptions{}
	fs := pflag.NewFlagSet("mutate", pflag.ContinueOnError)
	fs.StringVar(&o.configFile, "config", "", "path of the YAML hook config; empty: the SYNCHOOK_CONFIG env var, else the built-in default, or none in a program with Go hooks")
	fs.StringVarP(&o.file, "filename", "f", "", "the objects, YAML or JSON, each with apiVersion and kind, several as YAML documents (---) run in order (empty documents skipped); a List (kind List, as kubectl get -o yaml prints, or PodList) stands for its items, each run as a document; - reads stdin (required)")
	fs.StringVar(&o.hookType, "type", "", "the hook type to run (required): "+hooks.ValidHookTypes())
	fs.DurationVar(&o.timeout, "timeout", webhook.DefaultRequestTimeout, "time the hook chain may take")
	fs.BoolVar(&o.skipIdempotencyCheck, "skip-idempotency-check", false, "do not refuse a hook chain that changes its own result again (checked on built-in sample objects and the given one)")
	fs.StringVarP(&o.output, "output", "o", "", "output: empty prints the JSON Patch and the result for people; json or yaml prints only the resulting object (for scripts)")
	fs.StringVar(&o.undoKeyFile, "undo-key-file", "", "undo key ring file: seal the undo of a write and open the undo of a read with it, as the deployed synchook does; empty: a throwaway key made for this run (a later GetPhysical cannot open what it sealed)")
	fs.StringVar(&o.namespacesFile, "namespaces", "", "YAML or JSON file of the Namespace objects hooks look up (labels fromNamespace, a policy's namespaceObject), one a document or a v1 List (kubectl get namespaces -o yaml); they are the only namespaces there are; empty: none, and a hook that reads one fails naming it")
	fs.BoolVar(&o.explain, "explain", false, "print each document's plan before its patch: the path its chain takes, its hooks in order, undo's steps, the fallbacks and why (not with -o)")
	fs.BoolVar(&o.virtualNamespaces, "virtual-namespaces", false, "the --namespaces are the virtual cluster's, as under vcluster: an object of a physical hook type came from the namespace its vcluster.loft.sh/object-namespace annotation names; default: its own namespace (admission mode)")
	return fs, o
}

// newMutateCommand is `synchook mutate`.
func (p *Plugin) newMutateCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	fs, o := mutateFlags()
	cmd := &cobra.Command{
		Use:   "mutate --type HOOKTYPE -f FILE",
		Short: "Dry-run a hook type on objects, offline: print the JSON Patch and the result",
		Long: `Run the hooks of one hook type on each object of FILE (YAML documents, or JSON), offline,
as serve would, and print each object's JSON Patch and result (-o json or -o yaml: only the
results, for scripts). A List document (kind List, as kubectl get -o yaml prints several
objects, or a kind's list such as PodList) stands for its items: each is checked, run and
printed as a document of its own, named "document 1, item 2 (v1/Pod ns/b)"; an empty List
prints nothing and says so on stderr. Every document and item is checked before any runs and
every one runs before any prints: an invalid one exits 2, a failing hook exits 1, naming the
document or item, with nothing printed. Hooks that read namespaces find them in --namespaces FILE only. --explain prints each
document's plan first, as "# " lines: the path its chain takes (metadata, document, typed,
unstructured, list, none) and why, its hooks in order, undo's steps, the fallbacks a run may
take and the limits.

Hook types: ` + hooks.ValidHookTypes() + `

Exit codes: 0 printed; 1 a hook failed or FILE could not be read; 2 bad flags, an invalid
document or config.`,
		Example: `  # The patch and the result of CreatePhysical on a pod
  synchook mutate --type CreatePhysical -f examples/pod.yaml

  # How the hooks will run on it, then the patch and the result
  synchook mutate --type CreatePhysical -f examples/pod.yaml --explain

  # From stdin, the result only, as YAML
  kubectl get pod web -o yaml | synchook mutate --type UpdatePhysical -f - -o yaml

  # Every pod of a namespace: kubectl's List runs item by item
  kubectl get pods -n shop -o yaml | synchook mutate --type CreatePhysical -f -`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			return exitCode(p.mutate(o, stdin, stdout, stderr))
		},
	}
	cmd.Flags().AddFlagSet(fs)
	return cmd
}
