// Command secret-hook is synchook with a Go hook on secrets that never logs their data: it
// marks every secret vcluster syncs to the host with the keys it carries (names only, never
// values) and refuses a secret whose value is empty under a key that must be set.
//
//	go build -o secret-hook . && ./secret-hook mutate --type CreatePhysical -f secret.yaml
//
// synchook itself never logs object data, and it never lets a hook's error or panic message on
// a Secret out (it answers with the hook's name and a keyed hash of the message instead); this
// hook also keeps the values out of its own errors and logs.
package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/plugin"
)

// KeysAnnotation lists the secret's data keys, comma-separated and sorted.
const KeysAnnotation = "example.com/secret-keys"

// NewSecretHook returns the hook that annotates host secrets with their key names and refuses
// a secret with an empty value under one of the required keys.
func NewSecretHook(required ...string) hooks.FuncHook {
	return hooks.Typed("secret-keys", []hooks.HookType{hooks.CreatePhysical}, func(ctx context.Context, secret *corev1.Secret) error {
		keys := make([]string, 0, len(secret.Data))
		for k, v := range secret.Data {
			if len(v) == 0 && slices.Contains(required, k) {
				// The key's name only: a value never goes into an error or a log line.
				return fmt.Errorf("secret %s/%s: key %q is empty", secret.Namespace, secret.Name, k)
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		secret.Annotations[KeysAnnotation] = strings.Join(keys, ",")
		log.FromContext(ctx).V(1).Info("annotated secret", "namespace", secret.Namespace, "name", secret.Name, "keys", len(keys))
		return nil
	})
}

func main() {
	plugin.MustInit()
	plugin.MustRegister(NewSecretHook("password"))
	plugin.MustStart()
}
