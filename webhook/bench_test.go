package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/webhook"
)

// podReviewBody is an AdmissionReview for the ~5 KiB benchmark Pod.
func podReviewBody() []byte {
	raw := fixtures.JSON(fixtures.Pod("ns", "web"))
	return fixtures.JSON(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "bench", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: "ns", Name: "web",
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
		},
	})
}

func keepAliveClient(ts *httptest.Server) *http.Client {
	tr := ts.Client().Transport.(*http.Transport).Clone()
	tr.ForceAttemptHTTP2 = false
	tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
	tr.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: tr}
}

func roundTrip(b *testing.B, hc *http.Client, url string, body []byte) []byte {
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	return out
}

// BenchmarkTransport measures one AdmissionReview of the 5 KiB Pod with one label hook, over
// HTTPS (HTTP/1.1 keep-alive) and over the unix socket, against floor (b): the same bytes to a
// handler that only reads the body and echoes it, on the same kind of connection.
func BenchmarkTransport(b *testing.B) {
	body := podReviewBody()
	reg := engine.NewRegistry(nil)
	reg.MustRegister(testHook("labels", func(_ context.Context, o client.Object) (client.Object, error) {
		o.GetLabels()["synchook.io/hooked"] = "true"
		return o, nil
	}))
	s, err := webhook.NewServer(engine.NewRunner(reg, engine.RunnerOptions{}), webhook.Options{})
	if err != nil {
		b.Fatal(err)
	}
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, _ := io.ReadAll(r.Body)
		_, _ = w.Write(in)
	})

	b.Run("floor-https-echo", func(b *testing.B) {
		ts := httptest.NewTLSServer(echo)
		defer ts.Close()
		hc := keepAliveClient(ts)
		b.ReportAllocs()
		for b.Loop() {
			roundTrip(b, hc, ts.URL, body)
		}
	})
	b.Run("https-admission", func(b *testing.B) {
		ts := httptest.NewUnstartedServer(s.Handler())
		ts.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		ts.StartTLS()
		defer ts.Close()
		hc := keepAliveClient(ts)
		b.ReportAllocs()
		for b.Loop() {
			out := roundTrip(b, hc, ts.URL+"/mutate/CreatePhysical", body)
			var review admissionv1.AdmissionReview
			if err := json.Unmarshal(out, &review); err != nil || review.Response.Patch == nil {
				b.Fatalf("%v %s", err, out)
			}
		}
	})
	b.Run("unix-admission", func(b *testing.B) {
		sock := filepath.Join(b.TempDir(), "s.sock")
		us, err := webhook.NewServer(engine.NewRunner(reg, engine.RunnerOptions{}), webhook.Options{SocketPath: sock, DisableTCP: true, ProbeBindAddress: "0"})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(b.Context())
		defer cancel()
		go func() { _ = us.Start(ctx) }()
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
		testenv.Eventually(b, 10*time.Second, "/healthz over the socket", func() error {
			resp, err := hc.Get("http://s/healthz")
			if err == nil {
				resp.Body.Close()
			}
			return err
		})
		b.ReportAllocs()
		for b.Loop() {
			roundTrip(b, hc, "http://s/mutate/CreatePhysical", body)
		}
	})
}
