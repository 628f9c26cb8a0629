package undokey

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/internal/undo"
)

// DefaultSecretName is the name of the managed key Secret when Options.Name is empty.
const DefaultSecretName = "synchook-undo-key"

// DefaultResyncPeriod is how often a Manager checks the Secret when Options.ResyncPeriod is
// zero: 10 s.
const DefaultResyncPeriod = 10 * time.Second

// The items of the managed key Secret.
const (
	// KeysItem holds the ring in the key ring text format of package undo.
	KeysItem = "keys"
	// KindsItem holds one undo.Kind (its String) per line, sorted.
	KindsItem = "kinds"
)

// LoadFile reads a key ring from the file at path, in the key ring text format of package undo
// (what a mounted Secret's "keys" item holds). It refuses a file that group or others may
// write (mode&0o022 != 0; the mode of the file a symbolic link chain ends at, as a mounted
// Secret's item is): whoever can write the key can forge undos. 0600 and 0644 are fine.
// Errors name the file and, for a bad line, its number and key ID; never a secret.
func LoadFile(path string) (*undo.Ring, error) {
	f, err := os.Open(path) // follows links: the mode checked is the target's
	if err != nil {
		return nil, fmt.Errorf("undo key file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("undo key file: %w", err)
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 {
		return nil, fmt.Errorf("undo key file %s: mode %04o lets group or others write it; want 0600 or 0644", path, perm)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("undo key file %s: %w", path, err)
	}
	r, err := undo.ParseRing(data)
	if err != nil {
		return nil, fmt.Errorf("undo key file %s: %w", path, err)
	}
	return r, nil
}

// Read returns the ring and the kinds held by the managed key Secret namespace/name, without
// creating or changing it (for `synchook cleanup`). It fails when the Secret cannot be read
// (a NotFound from the apiserver stays visible to apierrors.IsNotFound), has no keys, or holds
// a line that is neither a key nor, in the kinds item, an undo.Kind. Errors name the Secret,
// never a secret value.
func Read(ctx context.Context, c client.Client, namespace, name string) (*undo.Ring, []undo.Kind, error) {
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sec); err != nil {
		return nil, nil, fmt.Errorf("undo key Secret %s/%s: %w", namespace, name, err)
	}
	ring, err := parseKeys(sec.Data[KeysItem])
	if err != nil {
		return nil, nil, fmt.Errorf("undo key Secret %s/%s: %w", namespace, name, err)
	}
	if ring == nil {
		return nil, nil, fmt.Errorf("undo key Secret %s/%s: item %q holds no key", namespace, name, KeysItem)
	}
	kinds, bad := parseKinds(kindLines(sec.Data[KindsItem]))
	if len(bad) > 0 {
		return nil, nil, fmt.Errorf("undo key Secret %s/%s: item %q: %w", namespace, name, KindsItem, bad[0])
	}
	return ring, kinds, nil
}

// Options configures Start. Zero fields take the defaults named on each.
type Options struct {
	// Client reads and writes the Secret; a direct (uncached) client is best. Required.
	Client client.Client
	// Namespace is the host namespace the Secret lives in. Required.
	Namespace string
	// Name is the Secret's name. Default DefaultSecretName.
	Name string
	// Keeper receives the ring (Set) and the stored kinds (Remember), and tells the Manager
	// of new kinds (Changed, SealedKinds). Required. A Ring it already holds is kept: its keys
	// are added to the Secret's.
	Keeper *undo.Keeper
	// Log receives what the Manager decides (key IDs, never secrets). Default logr.Discard().
	Log logr.Logger
	// OnFallback, when set, is called once each time Start fails, before it returns: the
	// caller then goes on without the managed key (typically it counts this in a metric).
	OnFallback func()
	// ResyncPeriod is how often the Manager reads the Secret to write it back when it was
	// deleted, to take up keys another replica added, and to store kinds whose Keeper.Changed
	// signal another reader of the channel took. Default DefaultResyncPeriod (10 s).
	ResyncPeriod time.Duration
}

func (o *Options) setDefaults() error {
	switch {
	case o.Client == nil:
		return errors.New("no client")
	case o.Namespace == "":
		return errors.New("no namespace")
	case o.Keeper == nil:
		return errors.New("no undo.Keeper")
	}
	if o.Name == "" {
		o.Name = DefaultSecretName
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = DefaultResyncPeriod
	}
	return nil
}

// Manager keeps the managed key Secret and an undo.Keeper in step (see the package doc). Create
// it with Start. It is safe for concurrent use.
type Manager struct {
	opts Options
	// mu serializes the read-merge-write cycles of the resync loop and Rotate.
	mu sync.Mutex
	// failing says the last resync failed, so that a lasting failure is logged once.
	failing bool
	done    chan struct{}
}

// Start reads the key Secret Options.Namespace/Options.Name, or creates it with a new ring when
// it does not exist, makes its ring (with any key the Keeper already held) the Keeper's and
// remembers its kinds in the Keeper. Several processes may start at once: a create that loses
// the race reads the winner's Secret and uses its keys, and existing keys are never replaced.
// A Secret that exists without keys gets a new ring; one whose keys do not parse is an error
// (and is left as it is).
//
// On success a goroutine keeps the Secret and the Keeper in step until ctx ends (Done): it
// adds the Keeper's new kinds to the Secret, writes the Secret back from memory when it was
// deleted, and takes up keys added to it. ctx also bounds the first read and write; the caller
// bounds each request with the client's own timeout.
//
// It fails on missing Options or when the apiserver refuses or cannot be reached; the error
// names the Secret, never a secret value, and Options.OnFallback is called first.
func Start(ctx context.Context, opts Options) (*Manager, error) {
	if err := opts.setDefaults(); err != nil {
		if opts.OnFallback != nil {
			opts.OnFallback()
		}
		return nil, fmt.Errorf("undo key Secret: %w", err)
	}
	m := &Manager{opts: opts, done: make(chan struct{})}
	if err := m.sync(ctx, false); err != nil {
		if opts.OnFallback != nil {
			opts.OnFallback()
		}
		return nil, err
	}
	go m.run(ctx)
	return m, nil
}

// Done is closed when the Manager's goroutine has ended (Start's ctx ended).
func (m *Manager) Done() <-chan struct{} { return m.done }

// Rotate adds a new key to the Secret and the Keeper (undo.Ring.Rotate), which seals from then
// on; every older key stays and keeps opening. It retries when another process changed the
// Secret meanwhile and writes the Secret back when it was deleted. Errors name the Secret,
// never a secret value.
func (m *Manager) Rotate(ctx context.Context) error {
	return m.sync(ctx, true)
}

// run is the resync loop: on each new kind and every ResyncPeriod, until ctx ends.
func (m *Manager) run(ctx context.Context) {
	defer close(m.done)
	ticker := time.NewTicker(m.opts.ResyncPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.opts.Keeper.Changed():
		case <-ticker.C:
		}
		err := m.sync(ctx, false)
		if ctx.Err() != nil {
			return
		}
		m.report(err)
	}
}

// report logs the first of a run of failed resyncs as an error (the others at V(1)) and one
// line when a resync succeeds again.
func (m *Manager) report(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case err == nil && m.failing:
		m.failing = false
		m.opts.Log.Info("undo key Secret in step again", m.fields()...)
	case err != nil && !m.failing:
		m.failing = true
		m.opts.Log.Error(err, "undo key Secret: resync failed; the keys in memory stay in use", m.fields()...)
	case err != nil:
		m.opts.Log.V(1).Info("undo key Secret: resync failed again", m.fields("error", err.Error())...)
	}
}

func (m *Manager) fields(kv ...any) []any {
	return append([]any{"namespace", m.opts.Namespace, "name", m.opts.Name}, kv...)
}

// sync reads the Secret and makes it and the Keeper hold the union of both: keys (the stored
// ones in stored order, then any in memory that is missing; with rotate, then a new key) and
// kinds. It creates the Secret when it does not exist (from memory, or with a new ring) and
// writes it only when the union differs from what is stored.
func (m *Manager) sync(ctx context.Context, rotate bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	retriable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	err := retry.OnError(retry.DefaultRetry, retriable, func() error { return m.syncOnce(ctx, rotate) })
	if err != nil {
		return fmt.Errorf("undo key Secret %s/%s: %w", m.opts.Namespace, m.opts.Name, err)
	}
	return nil
}

func (m *Manager) syncOnce(ctx context.Context, rotate bool) error {
	c, keeper, log := m.opts.Client, m.opts.Keeper, m.opts.Log
	sec := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: m.opts.Namespace, Name: m.opts.Name}, sec)
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	var stored *undo.Ring
	if found {
		if stored, err = parseKeys(sec.Data[KeysItem]); err != nil {
			return err
		}
	}
	mem := keeper.Ring()
	ring, err := union(stored, mem)
	if err != nil {
		return err
	}
	for _, id := range clashes(stored, mem) {
		log.Error(nil, "undo key ID in memory and in the Secret with different secrets: the Secret's is used, undos sealed with the other no longer open", m.fields("keyID", id)...)
	}
	generated := ring == nil
	if generated {
		if ring, err = undo.GenerateRing(); err != nil {
			return err
		}
	}
	if rotate {
		if ring, err = ring.Rotate(); err != nil {
			return err
		}
	}
	storedKinds := kindLines(sec.Data[KindsItem])
	kinds := unionKinds(storedKinds, keeper.SealedKinds())
	keysText, err := ring.MarshalText()
	if err != nil {
		return err
	}

	switch {
	case !found:
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: m.opts.Namespace, Name: m.opts.Name,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "synchook"},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{KeysItem: keysText, KindsItem: kindsText(kinds)},
		}
		if err := c.Create(ctx, sec); err != nil {
			return err // AlreadyExists: another process won; the retry reads its Secret
		}
		if mem == nil {
			log.Info("created the undo key Secret", m.fields("keyIDs", ring.IDs())...)
		} else {
			log.Info("undo key Secret was missing: wrote it back with the keys in memory", m.fields("keyIDs", ring.IDs())...)
		}
	case !sameKeys(stored, ring) || !slices.Equal(storedKinds, kinds):
		data := make(map[string][]byte, len(sec.Data)+2)
		for k, v := range sec.Data {
			data[k] = v
		}
		data[KeysItem], data[KindsItem] = keysText, kindsText(kinds)
		sec.Data = data
		if err := c.Update(ctx, sec); err != nil {
			return err // Conflict: changed meanwhile; the retry merges again
		}
		log.V(1).Info("updated the undo key Secret", m.fields("keyIDs", ring.IDs(), "kinds", len(kinds))...)
	}

	switch {
	case found && generated:
		log.Info("the undo key Secret held no key: added a new ring", m.fields("keyIDs", ring.IDs())...)
	case mem == nil && !generated:
		log.Info("loaded the undo key ring from the Secret", m.fields("keyIDs", ring.IDs())...)
	case mem != nil && !slices.Equal(mem.IDs(), ring.IDs()):
		log.Info("undo key ring changed", m.fields("keyIDs", ring.IDs(), "previousKeyIDs", mem.IDs())...)
	}
	if !sameKeys(mem, ring) {
		keeper.Set(ring)
	}
	parsed, bad := parseKinds(storedKinds)
	for _, b := range bad {
		log.V(1).Info("undo key Secret: kept a kinds line this build does not read", m.fields("line", b.line)...)
	}
	keeper.Remember(parsed...)
	return nil
}

// keyLines returns the lines of a key ring text that hold a key (neither blank nor a comment),
// trimmed.
func keyLines(text []byte) []string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	return lines
}

// parseKeys parses a key ring text; nil, nil when it holds no key. Errors name the item, a line
// number and key ID, never a secret.
func parseKeys(text []byte) (*undo.Ring, error) {
	if len(keyLines(text)) == 0 {
		return nil, nil
	}
	r, err := undo.ParseRing(text)
	if err != nil {
		return nil, fmt.Errorf("item %q: %w", KeysItem, err)
	}
	return r, nil
}

// ringLines returns the key lines of r ("<ID> <base64>"), oldest first; none for nil.
func ringLines(r *undo.Ring) []string {
	if r == nil {
		return nil
	}
	text, _ := r.MarshalText() // never fails
	return keyLines(text)
}

func lineID(line string) string {
	id, _, _ := strings.Cut(line, " ")
	return id
}

// union returns the keys of stored in its order followed by the keys of mem whose ID stored
// lacks: nil when both are nil. A key ID in both with different secrets keeps stored's
// (clashes names them).
func union(stored, mem *undo.Ring) (*undo.Ring, error) {
	if mem == nil || stored == nil {
		if stored != nil {
			return stored, nil
		}
		return mem, nil
	}
	lines := ringLines(stored)
	have := map[string]bool{}
	for _, l := range lines {
		have[lineID(l)] = true
	}
	for _, l := range ringLines(mem) {
		if !have[lineID(l)] {
			lines = append(lines, l)
		}
	}
	return undo.ParseRing([]byte(strings.Join(lines, "\n")))
}

// clashes returns the IDs that a and b both hold with different secrets.
func clashes(a, b *undo.Ring) []string {
	if a == nil || b == nil {
		return nil
	}
	byID := map[string]string{}
	for _, l := range ringLines(a) {
		byID[lineID(l)] = l
	}
	var ids []string
	for _, l := range ringLines(b) {
		if other, ok := byID[lineID(l)]; ok && other != l {
			ids = append(ids, lineID(l))
		}
	}
	return ids
}

// sameKeys reports whether a and b hold the same keys in the same order.
func sameKeys(a, b *undo.Ring) bool { return slices.Equal(ringLines(a), ringLines(b)) }

// kindLines returns the non-blank, non-comment lines of a kinds item, trimmed.
func kindLines(text []byte) []string { return keyLines(text) }

// badKind is a kinds line that does not parse as an undo.Kind.
type badKind struct {
	line string
	err  error
}

func (b badKind) Error() string { return b.err.Error() }

// parseKinds parses kinds lines; the lines that are not an undo.Kind (perhaps written by a
// newer build) come back as bad.
func parseKinds(lines []string) (kinds []undo.Kind, bad []badKind) {
	for _, l := range lines {
		k, err := undo.ParseKind(l)
		if err != nil {
			bad = append(bad, badKind{line: l, err: err})
			continue
		}
		kinds = append(kinds, k)
	}
	return kinds, bad
}

// unionKinds returns the stored lines (kept even when this build cannot parse them) and the
// Strings of kinds, sorted, without repeats.
func unionKinds(stored []string, kinds []undo.Kind) []string {
	out := slices.Clone(stored)
	for _, k := range kinds {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func kindsText(lines []string) []byte {
	if len(lines) == 0 {
		return []byte{}
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}
