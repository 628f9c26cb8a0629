package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/internal/cleanup"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/internal/undokey"
)

// cleanupHelp is the Long text of `synchook cleanup --help`.
const cleanupHelp = `Takes synchook off the host objects of one vcluster, for uninstalling synchook or after
removing hooks: on every object of the kinds below in the vcluster's host namespace that
carries a synchook.io/* annotation, it undoes the hooks' changes as far as an update may
change them back (labels, annotations, the data of Secrets and ConfigMaps), lists the fields
it must leave as the hooks wrote them (a Pod's tolerations, …), and removes every
synchook.io/* annotation. Each object is written once, with its resourceVersion: a run may be
interrupted and repeated, and a second run finds only what is left.

STOP THE SYNCER FIRST (scale the vcluster to 0), or it writes the objects again through hooks
that are gone:

  kubectl -n <namespace> scale statefulset <vcluster release> --replicas 0

Only a sealed undo that opens with the undo key (--undo-key-file, else the key Secret
--undo-key-secret in the namespace) is applied. Anything else on an object is listed as "undo not
applied (<reason>)" and never applied: a clear-text undo (clear_text: a tenant may have
written it; the syncer copies tenant annotations to the host), one that does not open
(unauthentic), no key (no_key), malformed, …; its hooks' changes stay and its annotations are
removed all the same. When the apiserver refuses a restored object as invalid (e.g. a label
value it does not accept), the object is listed as "refused" with the API reason and field
paths, only its synchook.io/* annotations are removed, and the run goes on.

Progress and what was left go to stderr, the summary line to stdout (objects seen, cleaned,
undos applied, entries left unrestored, undos not applied, objects refused, unchanged,
failed). Nothing printed holds object data or annotation values; undo paths and API field
paths are printed quoted, with control characters escaped.

Exit status:
  0  done: every undo applied, nothing left as the hooks wrote it, no synchook.io/* annotation left
  1  done, but something was left: an undo not applied, an entry left unrestored, or an object
     refused (only its annotations removed); see the lines above. No synchook.io/* annotation
     is left, and running it again changes nothing.
  2  usage or configuration error (flags, kubeconfig, --undo-key-file); nothing was done
  3  not finished: interrupted, the key Secret could not be read, a kind could not be listed or
     an object could not be written; some objects still carry synchook.io/* annotations. Run
     it again once the cause is fixed.
A dry run exits as the run would (except that it cannot know what the apiserver refuses).

--kubeconfig, --context and -n/--namespace are kubectl's, for the HOST cluster; unlike kubectl,
-n is required: cleanup never takes the kubeconfig context's namespace.`

type cleanupOptions struct {
	cluster                   clusterFlags
	keyFile, keySecret, kinds string
	dryRun                    bool
}

// Exit codes of `synchook cleanup` besides exitOK and exitUsage (cleanupHelp explains them).
const (
	// exitLeft: the run finished (no synchook.io/* annotation left) but some change of the
	// hooks stays: an undo not applied, an entry unrestored, an object refused.
	exitLeft = exitFailed
	// exitUnfinished: the run could not finish: some objects still carry synchook.io/*
	// annotations (interrupted, key Secret unreadable, a List or an object's Update failed).
	exitUnfinished = 3
)

// cleanup is `synchook cleanup`: flags → the host client, the key and the kinds →
// cleanup.Run. Exit exitOK: everything restored and cleaned; exitLeft: cleaned, but something
// was left (cleanup.Summary.Left); exitUsage: bad flags, kubeconfig or key file;
// exitUnfinished: something could not be cleaned (interrupted, the key Secret unreadable, a
// kind or an object failed).
func (p *Plugin) cleanup(o *cleanupOptions, stdout, stderr io.Writer) int {
	fail := failer(stderr, "cleanup")
	namespace := o.cluster.namespace()
	if namespace == "" {
		return fail(exitUsage, "-n/--namespace is required: the vcluster's host namespace (see synchook cleanup --help)")
	}
	var kinds []schema.GroupVersionKind
	if o.kinds != "" {
		var err error
		if kinds, err = cleanup.ParseKinds(o.kinds); err != nil {
			return fail(exitUsage, "--kinds: %v", err)
		}
		if len(kinds) == 0 {
			return fail(exitUsage, "--kinds: no kind given")
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	cfg, err := o.cluster.restConfig(p.getenv)
	if err != nil {
		return fail(exitUsage, "the host cluster's client config (--kubeconfig, --context, KUBECONFIG): %v", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fail(exitUsage, "client of the host cluster: %v", err)
	}
	ring, sealed, secretFound, err := cleanupKey(ctx, c, o, stderr)
	var keyFileErr *keyFileError
	switch {
	case errors.As(err, &keyFileErr):
		return fail(exitUsage, "%v", err)
	case err != nil:
		return fail(exitUnfinished, "%v; nothing was cleaned", err)
	}
	if kinds == nil {
		kinds = cleanup.Kinds(sealed)
		for _, k := range sealed {
			if k.Side != undo.Physical {
				fmt.Fprintf(stderr, "not cleaned: %s (objects of the virtual cluster)\n", k)
			}
		}
	}
	names := make([]string, len(kinds))
	for i, gvk := range kinds {
		names[i] = cleanup.KindString(gvk)
	}
	fmt.Fprintf(stderr, "cleaning namespace %s, kinds %s\n", namespace, strings.Join(names, ", "))
	if o.dryRun {
		fmt.Fprintln(stderr, "dry run: nothing is written")
	}

	sum, err := cleanup.Run(ctx, cleanup.Options{
		Client: c, Namespace: namespace, Kinds: kinds, Ring: ring, DryRun: o.dryRun, Progress: stderr,
	})
	fmt.Fprintln(stdout, sum)
	switch {
	case errors.Is(err, cleanup.ErrOptions):
		return fail(exitUsage, "%v", err)
	case err != nil:
		return fail(exitUnfinished, "stopped: %v (run it again to clean the rest)", err)
	case !sum.OK():
		return fail(exitUnfinished, "some objects or kinds failed (see above): they still carry synchook.io/* annotations; run it again once their cause is fixed")
	}
	if !o.dryRun && secretFound {
		fmt.Fprintf(stdout, "No synchook.io/* annotation is left on these kinds. The key Secret %s/%s can be deleted once no vcluster in %s uses synchook any more (kubectl -n %s delete secret %s).\n",
			namespace, o.keySecret, namespace, namespace, o.keySecret)
	}
	switch {
	case sum.Left() && o.dryRun:
		fmt.Fprintln(stderr, "synchook cleanup: dry run: a run would leave some changes of the hooks (undos not applied, entries unrestored: see above)")
		return exitLeft
	case sum.Left():
		fmt.Fprintln(stderr, "synchook cleanup: done, but some changes of the hooks were left (undos not applied, entries unrestored or objects refused: see above)")
		return exitLeft
	}
	return exitOK
}

// keyFileError is cleanupKey's error when --undo-key-file cannot be loaded: a usage error.
type keyFileError struct{ err error }

func (e *keyFileError) Error() string { return "--undo-key-file: " + e.err.Error() }
func (e *keyFileError) Unwrap() error { return e.err }

// cleanupKey returns the ring that opens sealed undos (nil: none), the kinds the key Secret
// lists and whether it exists. Without --undo-key-file the Secret must be readable or absent:
// a run that could not read an existing key would throw the undos away. With it, the Secret
// is read for its kinds only, and a failure to is a warning. Errors: a *keyFileError when
// --undo-key-file cannot be loaded (a usage error), else the Secret's.
func cleanupKey(ctx context.Context, c client.Client, o *cleanupOptions, stderr io.Writer) (*undo.Ring, []undo.Kind, bool, error) {
	var fileRing *undo.Ring
	if o.keyFile != "" {
		var err error
		if fileRing, err = undokey.LoadFile(o.keyFile); err != nil {
			return nil, nil, false, &keyFileError{err}
		}
	}
	ring, kinds, err := undokey.Read(ctx, c, o.cluster.namespace(), o.keySecret)
	switch {
	case err == nil && fileRing != nil:
		return fileRing, kinds, true, nil
	case err == nil:
		return ring, kinds, true, nil
	case apierrors.IsNotFound(err) && fileRing != nil:
		return fileRing, nil, false, nil
	case apierrors.IsNotFound(err):
		fmt.Fprintf(stderr, "no undo key (no Secret %s/%s, no --undo-key-file): sealed undos cannot be opened; their changes stay and their annotations are removed\n", o.cluster.namespace(), o.keySecret)
		return nil, nil, false, nil
	case fileRing != nil:
		fmt.Fprintf(stderr, "warning: cannot read the kinds of the key Secret (%v); give --kinds to clean more than the default kinds\n", err)
		return fileRing, nil, false, nil
	default:
		return nil, nil, false, fmt.Errorf("%w (without the key, sealed undos would be lost; fix access or give --undo-key-file)", err)
	}
}
