package metrics_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/synchook/synchook/internal/metrics"
	"github.com/synchook/synchook/internal/sidecar"
)

// documentedMetrics returns the synchook_ metric names that docs/sidecar.md's "Metrics and
// logs" section names.
func documentedMetrics(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/sidecar.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Metrics and logs\n")
	if !ok {
		t.Fatal(`docs/sidecar.md has no "## Metrics and logs" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var names []string
	for _, m := range regexp.MustCompile("`(synchook_[a-z_]+)").FindAllStringSubmatch(section, -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		t.Fatal("docs/sidecar.md names no metric")
	}
	slices.Sort(names)
	return names
}

// Every counter docs/sidecar.md documents is served from the start, at zero, by a recorder
// of a fresh registry (before any request), and every counter served is documented: a
// counter that appears only at its first event makes a rate miss that event and cannot be
// told from one that is not collected.
func TestEveryDocumentedCounterIsServedFromTheStartAndEveryServedOneDocumented(t *testing.T) {
	config := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(config, []byte(`hooks:
  - name: team
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical, GetPhysical]
    labels: {labels: {team: a}}
  - name: mirror
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical]
    image: {rules: [{from: docker.io, to: registry.internal/dockerhub}]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := sidecar.BuildRegistry(t.Context(), sidecar.RegistryConfig{ConfigFile: config, NoDefaultConfig: true})
	if err != nil {
		t.Fatal(err)
	}
	metrics.New(reg, logr.Discard())
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "synchook_") && f.GetType() == dto.MetricType_COUNTER {
			served = append(served, f.GetName())
		}
	}
	documented := documentedMetrics(t)
	for _, name := range documented {
		if strings.HasSuffix(name, "_total") && !slices.Contains(served, name) {
			t.Errorf("docs/sidecar.md documents the counter %s, which /metrics does not serve before it first counts", name)
		}
	}
	for _, name := range served {
		if !slices.Contains(documented, name) {
			t.Errorf("/metrics serves the counter %s, which docs/sidecar.md does not document", name)
		}
	}
}
