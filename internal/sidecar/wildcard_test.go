package sidecar_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/synchook/synchook/internal/testenv"
)

// podReview returns an AdmissionReview (CREATE) of a Pod named name with n copies of the
// toleration element.
func podReview(name string, n int, element string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":%q,`+
		`"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},`+
		`"namespace":"tenant","name":%q,"operation":"CREATE","userInfo":{},"object":{"apiVersion":"v1","kind":"Pod",`+
		`"metadata":{"name":%q,"namespace":"tenant","labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx"}],"tolerations":[`,
		name, name, name)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(element)
	}
	b.WriteString(`]}}}}`)
	return []byte(b.String())
}

// answer is what a review got: the HTTP status, the AdmissionResponse (HTTP 200) and when.
type answer struct {
	status   int
	response *admissionv1.AdmissionResponse
	err      error
	after    time.Duration // from the moment the reviews were sent
}

// send posts review to url and returns its answer, timed from sent.
func send(hc *http.Client, url string, review []byte, sent time.Time) answer {
	resp, err := hc.Post(url, "application/json", bytes.NewReader(review))
	if err != nil {
		return answer{err: err, after: time.Since(sent)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, err: err, after: time.Since(sent)}
	if err == nil && resp.StatusCode == http.StatusOK {
		var out admissionv1.AdmissionReview
		if a.err = json.Unmarshal(body, &out); a.err == nil {
			a.response = out.Response
		}
	}
	return a
}

// late reports whether a is the answer given at the deadline (504), whose work may go on until
// its next step boundary.
func (a answer) late() bool {
	return a.response != nil && a.response.Result != nil && a.response.Result.Code == http.StatusGatewayTimeout
}

func (a answer) String() string {
	switch {
	case a.err != nil:
		return fmt.Sprintf("%v after %s", a.err, a.after)
	case a.response == nil:
		return fmt.Sprintf("HTTP %d after %s", a.status, a.after)
	case a.response.Result != nil:
		return fmt.Sprintf("HTTP %d, allowed %v, code %d %q after %s", a.status, a.response.Allowed, a.response.Result.Code, a.response.Result.Message, a.after)
	}
	return fmt.Sprintf("HTTP %d, allowed %v, patch of %d bytes after %s", a.status, a.response.Allowed, len(a.response.Patch), a.after)
}

// Issue 42 through `synchook serve --max-concurrent-hooks 2 --request-timeout 2s`: two Pods
// of 40,000 tolerations sent at once to a labels + wildcard strip chain (typed: not the
// document path) each get their answer within the request timeout and a generous slack for a
// loaded machine — the strip done (the undo of so many removals is then refused as too large,
// 422), or the deadline passed (504) — and a small Pod sent after those answers is served, at
// once where the big ones' work had finished, else once that work stopped at its next step
// boundary. Before the fix the two strips rebuilt the tolerations once per removed element and
// held both slots for about 100 s after their answers at the deadline, while every other
// request got 429. Both shapes of a wildcard strip: every element, and a field in every
// element.
func TestServeBoundsTwoHugeWildcardStripsByTheRequestTimeout(t *testing.T) {
	const (
		tolerations    = 40000
		requestTimeout = 2 * time.Second
		slack          = 20 * time.Second // decoding and answering a 1–2 MB review on a busy 2-core machine
	)
	for _, tt := range []struct{ name, path, element string }{
		{"every element", "/spec/tolerations/*", `{"operator":"Exists"}`},
		{"a field in every element", "/spec/tolerations/*/tolerationSeconds", `{"operator":"Exists","tolerationSeconds":300}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			config := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(config, []byte(`hooks:
  - name: team
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    labels:
      labels: {team: a}
  - name: strip-tolerations
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    strip:
      paths: [`+tt.path+`]
`), 0o600); err != nil {
				t.Fatal(err)
			}
			opts := localOpts(t, filepath.Join(t.TempDir(), "certs"))
			opts.ConfigFile = config
			opts.MaxConcurrentHooks = 2
			opts.Webhook.RequestTimeout = requestTimeout
			s := startServe(t, opts)
			hc := s.waitReady(t)
			hc.Timeout = requestTimeout + slack // a guard: past it the answer is late, and the test says so
			url := "https://" + opts.Webhook.BindAddress + "/mutate/CreatePhysical"

			big := []answer{{}, {}}
			var wg sync.WaitGroup
			start := make(chan struct{})
			var sent time.Time
			for i := range big {
				review := podReview(fmt.Sprintf("big-%d", i), tolerations, tt.element)
				wg.Go(func() {
					<-start
					big[i] = send(hc, url, review, sent)
				})
			}
			sent = time.Now()
			close(start)
			wg.Wait()
			for i, a := range big {
				// answered: the strip done (the undo of 40,000 removals is refused as too large:
				// 422) or stopped at its deadline (504); not refused for want of a slot
				if a.err != nil || a.response == nil || a.after > requestTimeout+slack {
					t.Errorf("big pod %d: %s; want an AdmissionReview within %s", i, a, requestTimeout+slack)
				}
				t.Logf("big pod %d: %s", i, a)
			}
			if t.Failed() {
				t.FailNow()
			}

			// The big ones' slots are free once their work ends: before the answer when it
			// finished, else at the strip's next step boundary after the deadline (or at the
			// end of a step that cannot be interrupted, a decode or a diff).
			var small answer
			refused := 0
			answered := time.Now()
			testenv.Eventually(t, slack, "a small pod served after the big ones were answered", func() error {
				if small = send(hc, url, podReview("small", 1, tt.element), time.Now()); small.status == http.StatusTooManyRequests {
					refused++
					return errors.New(small.String())
				}
				return nil
			})
			if small.err != nil || small.response == nil || !small.response.Allowed || len(small.response.Patch) == 0 {
				t.Fatalf("small pod: %s; want it served (allowed, with a patch)", small)
			}
			t.Logf("small pod: %s, refused %d times before, within %s of the big ones' answers", small, refused, time.Since(answered))
			if !big[0].late() && !big[1].late() && refused > 0 {
				t.Errorf("both big pods' work finished before their answers, yet the small pod was refused %d times after them", refused)
			}
		})
	}
}
