package config_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/undo"
	"github.com/synchook/synchook/patch"
)

// undoReason is the why of the refusal of hooks of one chain that disagree on undo.
const undoReason = "undo is per chain: a hook's change would be left on the read by another hook's undo: false; set the same undo on both or split them"

// undoChainConfig is a labels hook (team-label) and an image hook (mirror) with the given
// types, resources and undo lines.
func undoChainConfig(labelsTypes, labelsResources, labelsUndo, imageTypes, imageUndo string) string {
	return `
hooks:
  - name: team-label
    resources: ` + labelsResources + `
    types: ` + labelsTypes + `
    labels: {labels: {team: a}}
` + labelsUndo + `
  - name: mirror
    resources: [{apiVersion: v1, kind: Pod}]
    types: ` + imageTypes + `
    image:
      rules: [{from: docker.io, to: registry.internal/dockerhub}]
` + imageUndo + `
`
}

const (
	pod         = "[{apiVersion: v1, kind: Pod}]"
	undoOff     = "    undo: false"
	undoOn      = "    undo: true"
	undoDefault = ""
)

func TestHooksOfOneChainMustAgreeOnUndo(t *testing.T) {
	for _, tt := range []struct {
		name   string
		config string
		want   []string // parts of the error; none: accepted
	}{
		{
			name:   "a labels hook with undo false and an image hook on the same Pod CreatePhysical are refused, naming both",
			config: undoChainConfig("[CreatePhysical]", pod, undoOff, "[CreatePhysical]", undoDefault),
			want: []string{
				`hooks[1].undo: Invalid value: true: hook "mirror" (hooks[1]) has undo unset (true) and hook "team-label" (hooks[0]) has undo: false, in the chain of v1 Pod CreatePhysical: ` + undoReason,
			},
		},
		{
			name:   "an explicit undo true disagrees with undo false as the default does",
			config: undoChainConfig("[CreatePhysical]", pod, undoOff, "[CreatePhysical]", undoOn),
			want:   []string{`hook "mirror" (hooks[1]) has undo: true and hook "team-label" (hooks[0]) has undo: false, in the chain of v1 Pod CreatePhysical`},
		},
		{
			name:   "the undo false after the default is refused at the later hook",
			config: undoChainConfig("[CreatePhysical]", pod, undoDefault, "[CreatePhysical]", undoOff),
			want:   []string{`hooks[1].undo: Invalid value: false: hook "mirror" (hooks[1]) has undo: false and hook "team-label" (hooks[0]) has undo unset (true)`},
		},
		{
			name:   "hooks with several types and resources disagree on the chains they share, named once",
			config: undoChainConfig("[CreatePhysical, UpdatePhysical]", "[{apiVersion: v1, kind: Service}, {apiVersion: v1, kind: Pod}]", undoOff, "[CreatePhysical, UpdatePhysical, GetPhysical]", undoDefault),
			want:   []string{`hook "mirror" (hooks[1]) has undo unset (true) and hook "team-label" (hooks[0]) has undo: false, in the chain of v1 Pod CreatePhysical, v1 Pod UpdatePhysical: ` + undoReason},
		},
		{
			name:   "the same two hooks both with undo false are accepted",
			config: undoChainConfig("[CreatePhysical]", pod, undoOff, "[CreatePhysical]", undoOff),
		},
		{
			name:   "the same two hooks with undo true and unset are accepted",
			config: undoChainConfig("[CreatePhysical]", pod, undoOn, "[CreatePhysical]", undoDefault),
		},
		{
			name:   "hooks on different hook types may differ",
			config: undoChainConfig("[UpdatePhysical]", pod, undoOff, "[CreatePhysical]", undoDefault),
		},
		{
			name:   "hooks on different kinds may differ",
			config: undoChainConfig("[CreatePhysical]", "[{apiVersion: v1, kind: Service}]", undoOff, "[CreatePhysical]", undoDefault),
		},
		{
			name:   "hooks on a read type may differ: undo means nothing there",
			config: undoChainConfig("[GetPhysical]", pod, undoOff, "[GetPhysical]", undoDefault),
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tt.config))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if err := cfg.Build(engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true})); err != nil {
					t.Fatalf("Build refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want an error with %q%s", tt.want, consequence(t, cfg))
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\nlacks\n%s", err, w)
				}
			}
			if n := strings.Count(err.Error(), "undo is per chain"); n != 1 {
				t.Errorf("the disagreement is reported %d times, want once: %v", n, err)
			}
		})
	}
}

// consequence says what the accepted cfg does: whether the image hook's rewrite of a Pod on
// CreatePhysical carries a synchook.io/undo (without one, the read gives the syncer the
// mirror's images and vcluster writes the tenant's back on every sync).
func consequence(t *testing.T, cfg *config.Config) string {
	t.Helper()
	ring, err := undo.GenerateRing()
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: undo.NewKeeper(ring)})
	if err := cfg.Build(reg); err != nil {
		return "; Build refused it: " + err.Error()
	}
	raw, _ := json.Marshal(&corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
	})
	res, err := reg.Mutate(t.Context(), corev1.SchemeGroupVersion.WithKind("Pod"), hooks.CreatePhysical, raw)
	if err != nil {
		return "; CreatePhysical failed: " + err.Error()
	}
	written, err := patch.Apply(raw, res.Patch)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(written), "registry.internal/dockerhub") {
		return "; the image was not rewritten: " + string(written)
	}
	if strings.Contains(string(written), undo.Annotation) {
		return "; the image rewrite records an undo"
	}
	return "; and with it the image rewrite is written with no " + undo.Annotation + ": the read gives the syncer the mirror's images (" + string(written) + ")"
}
