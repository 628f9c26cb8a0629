package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/hooks/hookstest"
)

func TestSecretHookAnnotatesKeyNames(t *testing.T) {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Data:       map[string][]byte{"user": []byte("app"), "password": []byte("hunter2")},
	}
	written := hookstest.RoundTrip(t, NewSecretHook("password"), hooks.CreatePhysical, secret)
	if got := written.Annotations[KeysAnnotation]; got != "password,user" {
		t.Errorf("annotation %s = %q, want password,user", KeysAnnotation, got)
	}
}

func TestSecretHookRefusesAnEmptyRequiredKeyWithoutItsMessage(t *testing.T) {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Data:       map[string][]byte{"user": []byte("hunter2"), "password": {}},
	}
	_, _, err := hookstest.Run(t, NewSecretHook("password"), hooks.CreatePhysical, secret)
	// synchook answers with the hook's name; the hook's own message is withheld on a Secret.
	if err == nil || !strings.Contains(err.Error(), `"secret-keys"`) || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "is empty") {
		t.Errorf("error %v, want one naming the hook and withholding its message", err)
	}
}
