package sidecar

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/internal/undokey"
)

// keySecretTimeout bounds each request serve sends to the apiserver for its undo key Secret.
const keySecretTimeout = 10 * time.Second

// serveKeys returns the Keeper of serve's undo key, from the first source that applies:
//
//  1. opts.UndoKeyFile, when set (undokey.LoadFile; a bad file wraps ErrConfig);
//  2. in a cluster — a namespace is known (opts.UndoKeyNamespace, else the one in
//     opts.ServiceAccountNamespaceFile) — the undo key Secret opts.UndoKeySecretName there,
//     read or created and kept in step until ctx ends by undokey.Start, as the vcluster
//     plugin v2 keeps it (the Manager is returned; the caller waits for its Done after ending
//     ctx). A failure (no client config, RBAC that forbids Secrets, an apiserver that does
//     not answer) stops the start with an error that says what serve needs: a key file on
//     the local disk of one replica would not open what another sealed;
//  3. else, outside a cluster, the key file undokey.LocalFileName in opts.CertDir, created on
//     the first start (undokey.LocalFile; a directory that is not synchook's own wraps
//     ErrConfig and tells to give --undo-key-file).
//
// It logs where the key came from, with the key IDs (never a secret).
func serveKeys(ctx context.Context, opts *Options) (*undo.Keeper, *undokey.Manager, error) {
	log := opts.Log.WithName("undo")
	if opts.UndoKeyFile != "" {
		keys, err := LoadKeys(opts.UndoKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: --undo-key-file: %w", ErrConfig, err)
		}
		log.Info("undo key from a file", "source", "file", "file", opts.UndoKeyFile, "keyIDs", keys.Ring().IDs())
		return keys, nil, nil
	}
	namespace, from, err := keyNamespace(opts)
	if err != nil {
		return nil, nil, err
	}
	if namespace != "" {
		return secretKeys(ctx, opts, namespace, from)
	}
	ring, created, err := undokey.LocalFile(opts.CertDir)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: no --undo-key-file and not in a cluster (no -n/--namespace, no %s): %w", ErrConfig, opts.ServiceAccountNamespaceFile, err)
	}
	path := filepath.Join(opts.CertDir, undokey.LocalFileName)
	if created {
		log.Info("undo key: created a key file beside the certificates (one local process; give --undo-key-file to share a key)", "source", "local file", "file", path, "keyIDs", ring.IDs())
	} else {
		log.Info("undo key from the key file beside the certificates", "source", "local file", "file", path, "keyIDs", ring.IDs())
	}
	return undo.NewKeeper(ring), nil, nil
}

// keyNamespace returns the namespace of the undo key Secret and where it was found: the
// option, else the service-account namespace file; "" when neither names one.
func keyNamespace(opts *Options) (namespace, from string, err error) {
	if opts.UndoKeyNamespace != "" {
		return opts.UndoKeyNamespace, "-n/--namespace", nil
	}
	data, err := os.ReadFile(opts.ServiceAccountNamespaceFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", nil
	case err != nil:
		return "", "", fmt.Errorf("undo key: the pod's namespace: %w (give -n/--namespace or --undo-key-file)", err)
	}
	return strings.TrimSpace(string(data)), opts.ServiceAccountNamespaceFile, nil
}

// secretKeys keeps the undo key in the Secret opts.UndoKeySecretName of namespace
// (undokey.Start) until ctx ends.
func secretKeys(ctx context.Context, opts *Options, namespace, from string) (*undo.Keeper, *undokey.Manager, error) {
	name := opts.UndoKeySecretName
	where := fmt.Sprintf("undo key Secret %s/%s (namespace from %s)", namespace, name, from)
	rc, err := opts.RESTConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: no client config (in-cluster, or KUBECONFIG): %w; give --undo-key-file to use a mounted key instead", where, err)
	}
	rc = rest.CopyConfig(rc)
	rc.Timeout = keySecretTimeout
	rc.UserAgent = cmp.Or(rc.UserAgent, "synchook-serve")
	// Only Secrets are read and written: a fixed mapping, no discovery round trip.
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Secret"), meta.RESTScopeNamespace)
	c, err := client.New(rc, client.Options{Mapper: mapper})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: client: %w", where, err)
	}
	keys := undo.NewKeeper(nil)
	log := opts.Log.WithName("undo").WithValues("source", "secret")
	m, err := undokey.Start(ctx, undokey.Options{Client: c, Namespace: namespace, Name: name, Keeper: keys, Log: log})
	if err != nil {
		// Start's error names the Secret.
		return nil, nil, fmt.Errorf("%w (namespace from %s); serve keeps its undo key in a Secret when it runs in a cluster: it needs RBAC get, create and update on secrets in namespace %s (a Role bound to its service account), or give --undo-key-file with a mounted key", err, from, namespace)
	}
	log.Info("undo key from the key Secret", "namespace", namespace, "name", name, "keyIDs", keys.Ring().IDs(), "kinds", len(keys.SealedKinds()))
	return keys, m, nil
}

// ClusterConfig returns the client config serve uses for its undo key Secret, as
// controller-runtime finds one: the kubeconfig files in KUBECONFIG (read with getenv), else
// the in-cluster config of a pod, else ~/.kube/config.
func ClusterConfig(getenv func(string) string) (*rest.Config, error) {
	if paths := getenv(clientcmd.RecommendedConfigPathEnvVar); paths != "" {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.Precedence = filepath.SplitList(paths)
		return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	if rc, err := rest.InClusterConfig(); err == nil {
		return rc, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: []string{clientcmd.RecommendedHomeFile}}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("not in a pod, no KUBECONFIG and %s: %w", clientcmd.RecommendedHomeFile, err)
	}
	return rc, nil
}
