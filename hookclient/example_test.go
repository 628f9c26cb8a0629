package hookclient_test

import (
	"context"
	"log"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/synchook/synchook/hookclient"
)

// A syncer wraps its host client once; every read and write of a hooked kind then passes
// through the sidecar that runs next to it.
func ExampleWrap() {
	ctx := context.Background()
	hc, err := hookclient.New(hookclient.Options{
		URL:    "https://127.0.0.1:9443",
		CAFile: "/var/run/synchook/ca.crt", // the sidecar's --cert-dir, on a volume shared with the syncer
	})
	if err != nil {
		log.Fatal(err)
	}
	defer hc.Close()
	if err := hc.Refresh(ctx); err != nil { // optional: fail fast when the sidecar is not there
		log.Print(err)
	}

	plain, err := client.New(config.GetConfigOrDie(), client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	host := hookclient.Wrap(plain, hc, hookclient.Physical)

	pod := &corev1.Pod{} // translated from the virtual pod
	// CreatePhysical runs first; when the sidecar is down (policy Fail) nothing is written.
	if err := host.Create(ctx, pod); err != nil {
		log.Print(err)
	}
	// GetPhysical runs on every listed pod, in one request.
	pods := &corev1.PodList{}
	if err := host.List(ctx, pods, client.InNamespace("vcluster-1")); err != nil {
		log.Print(err)
	}
}
