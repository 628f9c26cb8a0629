package undokey_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/internal/undokey"
)

// host is the one envtest apiserver of this package's tests, started by the first test that
// needs it and stopped by TestMain.
var host struct {
	once sync.Once
	env  *envtest.Environment
	c    client.Client
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if host.env != nil {
		if err := host.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop envtest:", err)
		}
	}
	os.Exit(code)
}

// hostNamespace returns a client of the shared apiserver and a new namespace for t alone.
func hostNamespace(t *testing.T) (client.Client, string) {
	t.Helper()
	host.once.Do(func() {
		dir, err := testenv.AssetsDir()
		if err != nil {
			host.err = err
			return
		}
		host.env = testenv.WithTimeouts(&envtest.Environment{BinaryAssetsDirectory: dir})
		cfg, err := host.env.Start()
		if err != nil {
			host.err = err
			return
		}
		host.c, host.err = client.New(cfg, client.Options{})
	})
	if host.err != nil {
		t.Fatalf("envtest: %v", host.err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "undokey-"}}
	if err := host.c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return host.c, ns.Name
}

// start starts a Manager on keeper in ns and ends it when t ends.
func start(t *testing.T, opts undokey.Options) *undokey.Manager {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m, err := undokey.Start(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		<-m.Done()
	})
	return m
}

// secretsOf returns the base64 secrets of r, which no error or log line may contain.
func secretsOf(t *testing.T, r *undo.Ring) []string {
	t.Helper()
	text, err := r.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(text), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(line, "#") {
			out = append(out, f[1])
		}
	}
	if len(out) == 0 {
		t.Fatal("no secrets in the ring text")
	}
	return out
}

func checkNoSecret(t *testing.T, what, text string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) || strings.Contains(text, s[:16]) {
			t.Errorf("%s holds a key secret:\n%s", what, text)
		}
	}
}

func getSecret(t *testing.T, c client.Client, ns, name string) (*corev1.Secret, error) {
	t.Helper()
	sec := &corev1.Secret{}
	err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, sec)
	return sec, err
}

// storedRing returns the ring and kinds lines the Secret holds now.
func storedRing(t *testing.T, c client.Client, ns string) (*undo.Ring, []string, error) {
	t.Helper()
	sec, err := getSecret(t, c, ns, undokey.DefaultSecretName)
	if err != nil {
		return nil, nil, err
	}
	r, err := undo.ParseRing(sec.Data[undokey.KeysItem])
	if err != nil {
		return nil, nil, err
	}
	var kinds []string
	for _, l := range strings.Split(string(sec.Data[undokey.KindsItem]), "\n") {
		if l != "" {
			kinds = append(kinds, l)
		}
	}
	return r, kinds, nil
}

func createSecret(t *testing.T, c client.Client, ns string, keys []byte, kinds string) {
	t.Helper()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: undokey.DefaultSecretName},
		Data:       map[string][]byte{undokey.KeysItem: keys, undokey.KindsItem: []byte(kinds)},
	}
	if err := c.Create(t.Context(), sec); err != nil {
		t.Fatal(err)
	}
}

func ringText(t *testing.T, r *undo.Ring) []byte {
	t.Helper()
	text, err := r.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	return text
}

func newRing(t *testing.T) *undo.Ring {
	t.Helper()
	r, err := undo.GenerateRing()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLoadFile(t *testing.T) {
	ring := newRing(t)
	secret := secretsOf(t, ring)[0]
	id := ring.IDs()[0]
	cases := []struct {
		name    string
		content string // "" : no file
		wantErr string
	}{
		{name: "a ring file loads", content: string(ringText(t, ring))},
		{name: "a missing file is an error naming it", wantErr: "keys"},
		{name: "a line with a third field is an error that names the line, not the secret", content: id + " " + secret + " extra\n", wantErr: "line 1"},
		{name: "a secret that is not base64 is an error without it", content: "# ring\n" + id + " " + secret + "!!\n", wantErr: "line 2"},
		{name: "a secret of the wrong length is an error without it", content: id + " " + secret[:40] + "\n", wantErr: "bytes"},
		{name: "an invalid key ID is an error without the secret", content: "Bad_ID " + secret + "\n", wantErr: "Bad_ID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "keys")
			if tc.content != "" {
				if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := undokey.LoadFile(path)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("LoadFile: %v", err)
				}
				if !got.Contains(ring) || !ring.Contains(got) {
					t.Errorf("loaded %v, want %v", got, ring)
				}
				return
			}
			if err == nil {
				t.Fatalf("LoadFile succeeded, want an error")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not name the file %s and %q", err, path, tc.wantErr)
			}
			checkNoSecret(t, "the error", err.Error(), []string{secret})
		})
	}
}

func TestStartCreatesTheSecretWhenAbsent(t *testing.T) {
	c, ns := hostNamespace(t)
	var logs testenv.LogSink
	keeper := undo.NewKeeper(nil)
	start(t, undokey.Options{Client: c, Namespace: ns, Keeper: keeper, Log: logs.Logger()})

	ring := keeper.Ring()
	if ring == nil || len(ring.IDs()) != 1 {
		t.Fatalf("keeper holds %v, want a new ring of one key", ring)
	}
	stored, kinds, err := storedRing(t, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	if !stored.Contains(ring) || !ring.Contains(stored) {
		t.Errorf("Secret holds %v, keeper %v", stored, ring)
	}
	if len(kinds) != 0 {
		t.Errorf("kinds %q, want none", kinds)
	}
	if _, err := logs.WaitFor(t.Context(), "created the undo key Secret", ring.IDs()[0]); err != nil {
		t.Error(err)
	}
	checkNoSecret(t, "the log", logs.String(), secretsOf(t, ring))
}

func TestStartUsesTheStoredKeysAndKinds(t *testing.T) {
	c, ns := hostNamespace(t)
	ring := newRing(t)
	createSecret(t, c, ns, ringText(t, ring), "v1/ConfigMap physical\napps/v1/Deployment virtual\n")
	keeper := undo.NewKeeper(nil)
	start(t, undokey.Options{Client: c, Namespace: ns, Keeper: keeper})

	if got := keeper.Ring(); got == nil || !got.Contains(ring) || !ring.Contains(got) {
		t.Fatalf("keeper holds %v, want the stored %v", got, ring)
	}
	want := []undo.Kind{
		{GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Side: undo.Virtual},
		{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Side: undo.Physical},
	}
	if got := keeper.SealedKinds(); !slices.Equal(got, want) {
		t.Errorf("SealedKinds %v, want %v", got, want)
	}
}

func TestStartsRacingAtOnceEndWithTheSameKeys(t *testing.T) {
	c, ns := hostNamespace(t)
	const replicas = 6
	var logs testenv.LogSink
	keepers := make([]*undo.Keeper, replicas)
	managers := make([]*undokey.Manager, replicas)
	errs := make([]error, replicas)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		for _, m := range managers {
			if m != nil {
				<-m.Done()
			}
		}
	})
	var wg sync.WaitGroup
	ready := make(chan struct{})
	for i := range replicas {
		keepers[i] = undo.NewKeeper(nil)
		wg.Go(func() {
			<-ready
			managers[i], errs[i] = undokey.Start(ctx, undokey.Options{Client: c, Namespace: ns, Keeper: keepers[i], Log: logs.Logger()})
		})
	}
	close(ready)
	wg.Wait()
	stored, _, err := storedRing(t, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.IDs()) != 1 {
		t.Errorf("Secret holds keys %v, want the one of the create that won", stored.IDs())
	}
	for i, k := range keepers {
		if errs[i] != nil {
			t.Errorf("replica %d: %v", i, errs[i])
			continue
		}
		if got := k.Ring(); got == nil || !got.Contains(stored) || !stored.Contains(got) {
			t.Errorf("replica %d holds %v, the Secret %v", i, got, stored)
		}
	}
	created, loaded := 0, 0
	for _, l := range logs.Lines() {
		created += strings.Count(l, "created the undo key Secret")
		loaded += strings.Count(l, "loaded the undo key ring from the Secret")
	}
	if created != 1 || loaded != replicas-1 {
		t.Errorf("%d replicas created the Secret and %d loaded it, want 1 and %d:\n%s", created, loaded, replicas-1, logs.String())
	}
}

func TestADeletedSecretIsWrittenBackWithTheSameKeys(t *testing.T) {
	c, ns := hostNamespace(t)
	var logs testenv.LogSink
	keeper := undo.NewKeeper(nil)
	start(t, undokey.Options{Client: c, Namespace: ns, Keeper: keeper, Log: logs.Logger(), ResyncPeriod: 50 * time.Millisecond})
	ring := keeper.Ring()
	keeper.NoteSealed(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, undo.Physical)
	testenv.Eventually(t, time.Minute, "the kind stored", func() error {
		_, kinds, err := storedRing(t, c, ns)
		if err == nil && !slices.Contains(kinds, "v1/Pod physical") {
			err = fmt.Errorf("kinds %q", kinds)
		}
		return err
	})

	sec, err := getSecret(t, c, ns, undokey.DefaultSecretName)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), sec); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the Secret written back", func() error {
		back, err := getSecret(t, c, ns, undokey.DefaultSecretName)
		if err != nil {
			return err
		}
		if back.UID == sec.UID {
			return errors.New("not deleted yet")
		}
		return nil
	})
	stored, kinds, err := storedRing(t, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(stored.IDs(), ring.IDs()) || !stored.Contains(ring) {
		t.Errorf("written back %v, want the keys in memory %v and no new one", stored, ring)
	}
	if got := keeper.Ring(); !slices.Equal(got.IDs(), ring.IDs()) {
		t.Errorf("keeper now holds %v, want %v", got, ring)
	}
	if !slices.Equal(kinds, []string{"v1/Pod physical"}) {
		t.Errorf("written back kinds %q, want the kind in memory", kinds)
	}
	if _, err := logs.WaitFor(t.Context(), "wrote it back", ring.IDs()[0]); err != nil {
		t.Error(err)
	}
	checkNoSecret(t, "the log", logs.String(), secretsOf(t, ring))
}

func TestKindsAreAddedWithoutDroppingAnotherReplicas(t *testing.T) {
	c, ns := hostNamespace(t)
	keeper := undo.NewKeeper(nil)
	start(t, undokey.Options{Client: c, Namespace: ns, Keeper: keeper, ResyncPeriod: time.Hour})

	// Another replica adds a kind (and a line a newer build wrote) behind this one's back.
	sec, err := getSecret(t, c, ns, undokey.DefaultSecretName)
	if err != nil {
		t.Fatal(err)
	}
	sec.Data[undokey.KindsItem] = []byte("apps/v1/Deployment virtual\nv1/Service elsewhere\n")
	if err := c.Update(t.Context(), sec); err != nil {
		t.Fatal(err)
	}
	keeper.NoteSealed(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, undo.Physical)

	want := []string{"apps/v1/Deployment virtual", "v1/Pod physical", "v1/Service elsewhere"}
	// The manager writes the Secret first and tells the keeper what it read after: wait for
	// both, not for the Secret and then read the keeper in the moment between.
	testenv.Eventually(t, time.Minute, "the kinds stored and known", func() error {
		_, kinds, err := storedRing(t, c, ns)
		if err == nil && !slices.Equal(kinds, want) {
			err = fmt.Errorf("kinds %q, want %q", kinds, want)
		}
		if got := keeper.SealedKinds(); err == nil && len(got) != 2 {
			err = fmt.Errorf("SealedKinds %v, want the Pod and the other replica's Deployment", got)
		}
		return err
	})
}

func TestRotationKeepsTheOldKeysAndReachesTheOtherReplicas(t *testing.T) {
	c, ns := hostNamespace(t)
	var logs testenv.LogSink
	a, b := undo.NewKeeper(nil), undo.NewKeeper(nil)
	ma := start(t, undokey.Options{Client: c, Namespace: ns, Keeper: a, Log: logs.Logger(), ResyncPeriod: time.Hour})
	start(t, undokey.Options{Client: c, Namespace: ns, Keeper: b, ResyncPeriod: 50 * time.Millisecond})
	old := a.Ring()

	if err := ma.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	rotated := a.Ring()
	if ids := rotated.IDs(); len(ids) != 2 || ids[0] != old.IDs()[0] || !rotated.Contains(old) {
		t.Fatalf("after Rotate the keeper holds %v, want %v and a new key", rotated, old)
	}
	stored, _, err := storedRing(t, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(stored.IDs(), rotated.IDs()) || !stored.Contains(rotated) {
		t.Errorf("Secret holds %v, want %v", stored, rotated)
	}
	testenv.Eventually(t, time.Minute, "the other replica takes up the new key", func() error {
		if got := b.Ring(); !slices.Equal(got.IDs(), rotated.IDs()) || !got.Contains(rotated) {
			return fmt.Errorf("replica b holds %v", got)
		}
		return nil
	})
	checkNoSecret(t, "the log", logs.String(), secretsOf(t, rotated))
}

func TestStartRefusesKeysThatDoNotParseAndLeavesThem(t *testing.T) {
	c, ns := hostNamespace(t)
	ring := newRing(t)
	secret := secretsOf(t, ring)[0]
	bad := []byte(ring.IDs()[0] + " " + secret + " trailing\n")
	createSecret(t, c, ns, bad, "")
	var fallbacks atomic.Int32
	keeper := undo.NewKeeper(nil)
	_, err := undokey.Start(t.Context(), undokey.Options{Client: c, Namespace: ns, Keeper: keeper, OnFallback: func() { fallbacks.Add(1) }})
	if err == nil {
		t.Fatal("Start succeeded on keys that do not parse")
	}
	if !strings.Contains(err.Error(), ns+"/"+undokey.DefaultSecretName) || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("error %q does not name the Secret and the line", err)
	}
	checkNoSecret(t, "the error", err.Error(), []string{secret})
	if n := fallbacks.Load(); n != 1 {
		t.Errorf("OnFallback called %d times, want 1", n)
	}
	if keeper.Ring() != nil {
		t.Errorf("keeper got %v", keeper.Ring())
	}
	sec, err := getSecret(t, c, ns, undokey.DefaultSecretName)
	if err != nil {
		t.Fatal(err)
	}
	if string(sec.Data[undokey.KeysItem]) != string(bad) {
		t.Error("Start changed keys it could not read")
	}
}

func TestRead(t *testing.T) {
	c, ns := hostNamespace(t)
	_, _, err := undokey.Read(t.Context(), c, ns, undokey.DefaultSecretName)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("Read of no Secret: %v, want NotFound", err)
	}
	ring := newRing(t)
	createSecret(t, c, ns, ringText(t, ring), "v1/Secret physical\n")
	got, kinds, err := undokey.Read(t.Context(), c, ns, undokey.DefaultSecretName)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Contains(ring) || !ring.Contains(got) {
		t.Errorf("Read %v, want %v", got, ring)
	}
	want := []undo.Kind{{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Side: undo.Physical}}
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
}
