package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestTenConfigChangesReplayOfflineWithTheKey replays, with `synchook mutate --undo-key-file`,
// what vcluster does across ten config changes (a label value): each read of the stored pod
// gives the pod without any hook trace, each tenant update reaches the stored pod with the
// newest value, and the sealed undo stays small (it never nests an older one).
func TestTenConfigChangesReplayOfflineWithTheKey(t *testing.T) {
	dir := t.TempDir()
	code, keys, errOut := runCLI(t, "undo-key")
	if code != exitOK || !strings.Contains(keys, "the last one seals") {
		t.Fatalf("undo-key: exit %d, %s", code, errOut)
	}
	keyFile := filepath.Join(dir, "keys")
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("keys", keys)
	mutate := func(cfg, typ, obj string) string {
		t.Helper()
		code, out, errOut := runCLI(t, "mutate", "--undo-key-file", keyFile, "--config", cfg, "--type", typ, "-f", obj, "-o", "yaml")
		if code != exitOK {
			t.Fatalf("mutate %s: exit %d: %s", typ, code, errOut)
		}
		return write("object.yaml", out)
	}
	config := func(value string) string {
		return write("config.yaml", "hooks:\n- name: team\n  resources: [{apiVersion: v1, kind: Pod}]\n  types: [CreatePhysical, UpdatePhysical]\n  labels: {labels: {team: \""+value+"\"}}\n")
	}
	read := func(path string) *corev1.Pod {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var p corev1.Pod
		if err := yaml.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		return &p
	}
	stored := mutate(config("v0"), "CreatePhysical", "../examples/pod.yaml")
	for i := 1; i <= 10; i++ {
		value := "v" + strings.Repeat("1", i)
		cfg := config(value)
		view := read(mutate(cfg, "GetPhysical", stored))
		if _, ok := view.Labels["team"]; ok || len(view.Annotations) > 0 && view.Annotations["synchook.io/undo"] != "" {
			t.Fatalf("change %d: the view carries a hook trace: labels %v annotations %v", i, view.Labels, view.Annotations)
		}
		view.Labels["rev"] = value // the tenant's update
		data, _ := json.Marshal(view)
		stored = mutate(cfg, "UpdatePhysical", write("update.json", string(data)))
		host := read(stored)
		if host.Labels["team"] != value || host.Labels["rev"] != value {
			t.Fatalf("change %d: stored labels %v", i, host.Labels)
		}
		if n := len(host.Annotations["synchook.io/undo"]); n == 0 || n > 2048 {
			t.Fatalf("change %d: stored undo of %d bytes", i, n)
		}
	}
}

// Regression (issue 25): offline mutate changed numbers through its YAML step
// (12345678901234567890123 → 1.2345678901234568e+22, 1E400 → a string); JSON input is taken
// as it is, as the server takes it.
func TestMutateKeepsJSONNumbersExact(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pod.json")
	obj := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"ns"},"spec":{"containers":[{"name":"c","image":"nginx"}],"overhead":{"x":12345678901234567890123},"priority":1E400}}`
	if err := os.WriteFile(file, []byte(obj), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "mutate", "--type", "CreatePhysical", "-f", file, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{`"x":12345678901234567890123`, `"priority":1E400`} {
		if !strings.Contains(out, want) {
			t.Errorf("the result lacks %s: %s", want, out)
		}
	}
}
