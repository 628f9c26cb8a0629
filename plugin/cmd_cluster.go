package plugin

import (
	"cmp"
	"path/filepath"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// clusterFlags are kubectl's flags for the cluster a command talks to: --kubeconfig, --context
// and -n/--namespace, with kubectl's meaning, read through client-go's clientcmd (as
// k8s.io/cli-runtime does, without linking cli-runtime and kustomize into every Go-hook binary).
type clusterFlags struct {
	// kubeconfig is the kubeconfig file; empty: the KUBECONFIG variable, else ~/.kube/config,
	// else the in-cluster config of a pod.
	kubeconfig string
	// overrides hold --context (CurrentContext) and --namespace (Context.Namespace).
	overrides clientcmd.ConfigOverrides
}

// bind adds --kubeconfig, --context and -n/--namespace to fs; -n sets *namespace (nil: the
// overrides' namespace), and namespaceUsage says what the namespace is to this command.
func (c *clusterFlags) bind(fs *pflag.FlagSet, namespace *string, namespaceUsage string) {
	namespace = cmp.Or(namespace, &c.overrides.Context.Namespace)
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "path of the kubeconfig file; empty: the KUBECONFIG env var, else ~/.kube/config, else the in-cluster config of a pod")
	fs.StringVar(&c.overrides.CurrentContext, "context", "", "name of the kubeconfig context to use; empty: the kubeconfig's current-context")
	fs.StringVarP(namespace, "namespace", "n", "", namespaceUsage)
}

// namespace is -n/--namespace.
func (c *clusterFlags) namespace() string { return c.overrides.Context.Namespace }

// restConfig returns the client config the flags select: --kubeconfig, else the files in the
// KUBECONFIG variable (read with getenv), else ~/.kube/config; with --context's context; else
// the in-cluster config. Errors name the missing file or context.
func (c *clusterFlags) restConfig(getenv func(string) string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.Precedence = []string{clientcmd.RecommendedHomeFile}
	if v := getenv(clientcmd.RecommendedConfigPathEnvVar); v != "" {
		rules.Precedence = filepath.SplitList(v)
	}
	rules.ExplicitPath = c.kubeconfig
	overrides := c.overrides
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &overrides).ClientConfig()
}
