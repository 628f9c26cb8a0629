package hooks

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/plugin"
)

// NewSecretHook returns the hook that adds a key to every secret the tenant creates in the
// virtual cluster from the host (CreateVirtual); it never reads or logs the existing values.
func NewSecretHook() plugin.ClientHook { return &secretHook{} }

type secretHook struct{}

func (s *secretHook) Name() string { return "secret-hook" }

func (s *secretHook) Resource() client.Object { return &corev1.Secret{} }

var _ plugin.MutateCreateVirtual = &secretHook{}

func (s *secretHook) MutateCreateVirtual(_ context.Context, obj client.Object) (client.Object, error) {
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return nil, fmt.Errorf("object %T is not a secret", obj)
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data["created-by-plugin"] = []byte("secret-hook")
	return secret, nil
}
