package hookclient

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"

	"github.com/synchook/synchook/hooks"
)

// Default values of Options.
const (
	// DefaultTimeout bounds one hook call, retries included.
	DefaultTimeout = 10 * time.Second
	// DefaultCapabilitiesInterval is how long fetched capabilities are trusted.
	DefaultCapabilitiesInterval = 30 * time.Second
	// DefaultCAReloadInterval is how often, at most, the CA file is read again.
	DefaultCAReloadInterval = 5 * time.Second
	// DefaultMaxIdleConnsPerHost is the number of idle keep-alive connections kept open.
	DefaultMaxIdleConnsPerHost = 64
	// DefaultRetries is the number of retries of a request that never reached the sidecar.
	DefaultRetries = 2
	// DefaultRetryBackoff is the wait before the first retry; it doubles for each next one.
	DefaultRetryBackoff = 100 * time.Millisecond
	// DefaultMaxBatchBytes is the largest list JSON sent in one request (2 MiB), below the
	// sidecar's default --max-request-bytes of 3 MiB.
	DefaultMaxBatchBytes = 2 << 20
)

// NoRetries turns retries off when set as Options.Retries.
const NoRetries = -1

// FailurePolicy says what a hook call does when the sidecar cannot be reached or fails at the
// transport level, as failurePolicy does in a MutatingWebhookConfiguration.
type FailurePolicy string

const (
	// Fail returns an error: the syncer must not write (or use) the object.
	Fail FailurePolicy = "Fail"
	// Ignore goes on with the object as it was, unmutated, and logs the failure.
	Ignore FailurePolicy = "Ignore"
)

// DefaultFailurePolicy returns the failure policy of t when Options.FailurePolicies does not
// name it: Ignore for the Get hook types, Fail for Create, Update and Delete (an object is never
// written without its hooks).
func DefaultFailurePolicy(t hooks.HookType) FailurePolicy {
	if t.Reads() {
		return Ignore
	}
	return Fail
}

// Options configures a Client. Zero fields take the defaults named on each.
type Options struct {
	// URL is the sidecar's base URL, e.g. "https://127.0.0.1:9443". Required unless SocketPath
	// is set; the scheme must be https.
	URL string
	// SocketPath, when set, sends every request in plain HTTP over the sidecar's unix socket
	// (its --socket-path, in a directory shared by the two containers) instead of HTTPS; URL
	// and CAFile are then not needed. Default "" (HTTPS).
	SocketPath string
	// CAFile is the PEM file of the CA that signs the sidecar's serving certificate, e.g. the
	// sidecar's <cert-dir>/ca.crt on a volume shared with the syncer. Required. It is read on
	// the first call (so the sidecar may create it after the syncer starts), again at most every
	// CAReloadInterval, and at once when a handshake fails because the server's certificate is
	// not trusted.
	CAFile string
	// CAReloadInterval is how often, at most, CAFile is read again to pick up a rotated CA.
	// Default DefaultCAReloadInterval (5 s).
	CAReloadInterval time.Duration
	// Scheme maps Go types to GVKs for Mutate and MutateList. Default client-go's scheme (all
	// built-in kinds). Wrap uses the wrapped client's scheme instead.
	Scheme *runtime.Scheme
	// Timeout bounds one hook call, retries included; it is also sent to the sidecar as
	// ?timeout= so that the hook chain stops at the same time. Default DefaultTimeout (10 s).
	Timeout time.Duration
	// FailurePolicies overrides the failure policy per hook type; hook types it does not name
	// take DefaultFailurePolicy.
	FailurePolicies map[hooks.HookType]FailurePolicy
	// CapabilitiesInterval is how long fetched capabilities are used before they are fetched
	// again (on the next call). Default DefaultCapabilitiesInterval (30 s). While they cannot
	// be fetched, the last ones are used; before the first successful fetch every call goes to
	// the sidecar.
	CapabilitiesInterval time.Duration
	// Clock tells the age of the capabilities and of the CA file and waits out retry
	// backoffs. Default the real clock (k8s.io/utils/clock); tests inject a fake one.
	Clock clock.Clock
	// MaxIdleConnsPerHost is the number of idle keep-alive connections kept to the sidecar.
	// Default DefaultMaxIdleConnsPerHost (64).
	MaxIdleConnsPerHost int
	// Retries is the number of retries of a request that never reached the sidecar (the
	// connection could not be opened). Default DefaultRetries (2); NoRetries turns them off.
	Retries int
	// RetryBackoff is the wait before the first retry; it doubles for each next one.
	// Default DefaultRetryBackoff (100 ms).
	RetryBackoff time.Duration
	// MaxBatchBytes is the largest list JSON that MutateList sends in one request; longer
	// lists are split into several requests. Keep it below the sidecar's --max-request-bytes.
	// Default DefaultMaxBatchBytes (2 MiB).
	MaxBatchBytes int
	// Log receives decisions at V(1) (hooked calls, retries, refreshes) and, at V(0), calls
	// that went on unmutated under Ignore and CA reloads. Object data is never logged.
	// Default logr.Discard().
	Log logr.Logger
}

func (o *Options) setDefaults() error {
	if o.SocketPath != "" {
		o.URL, o.CAFile = "http://synchook", "-"
	}
	if o.URL == "" {
		return errors.New("hookclient: Options.URL is required")
	}
	u, err := url.Parse(o.URL)
	if err != nil {
		return fmt.Errorf("hookclient: Options.URL: %w", err)
	}
	if (u.Scheme != "https" && o.SocketPath == "") || u.Host == "" {
		return fmt.Errorf("hookclient: Options.URL %q: want https://host:port", o.URL)
	}
	o.URL = strings.TrimSuffix(o.URL, "/")
	if o.CAFile == "" {
		return errors.New("hookclient: Options.CAFile is required")
	}
	for t, p := range o.FailurePolicies {
		if !t.Valid() {
			_, err := hooks.ParseHookType(string(t))
			return fmt.Errorf("hookclient: Options.FailurePolicies: %w", err)
		}
		if p != Fail && p != Ignore {
			return fmt.Errorf("hookclient: Options.FailurePolicies[%s] = %q: want %q or %q", t, p, Fail, Ignore)
		}
	}
	o.CAReloadInterval = cmp.Or(max(o.CAReloadInterval, 0), DefaultCAReloadInterval)
	o.Scheme = cmp.Or(o.Scheme, clientgoscheme.Scheme)
	o.Timeout = cmp.Or(max(o.Timeout, 0), DefaultTimeout)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	o.CapabilitiesInterval = cmp.Or(max(o.CapabilitiesInterval, 0), DefaultCapabilitiesInterval)
	o.MaxIdleConnsPerHost = cmp.Or(max(o.MaxIdleConnsPerHost, 0), DefaultMaxIdleConnsPerHost)
	switch {
	case o.Retries == 0:
		o.Retries = DefaultRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	o.RetryBackoff = cmp.Or(max(o.RetryBackoff, 0), DefaultRetryBackoff)
	o.MaxBatchBytes = cmp.Or(max(o.MaxBatchBytes, 0), DefaultMaxBatchBytes)
	return nil
}
