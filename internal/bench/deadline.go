package bench

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/internal/fixtures"
)

// DeadlineOptions configures Deadline: the slowest request of BenchmarkCostAgainstSize (a
// strip of /spec/tolerations/0 on a Pod of Tolerations tolerations, 64,000 ≈ 2.5 MB) sent
// Parallel times at once over HTTPS to `synchook serve --request-timeout T
// --max-concurrent-hooks Slots`, for each T of RequestTimeouts, Rounds times.
type DeadlineOptions struct {
	Binary          string          // the synchook binary; default: this executable
	Tolerations     int             // default 64,000
	Parallel        int             // requests sent at once; default 4
	Slots           int             // --max-concurrent-hooks; default 2
	RequestTimeouts []time.Duration // default 2s (the work fits) and 300ms (it does not)
	Rounds          int             // default 3
	// Grace is how long past its request timeout an answer may come; default 500ms.
	Grace time.Duration
	Out   io.Writer
}

// DeadlineAnswer is one request's answer: the HTTP status (429: refused, no slot), the
// AdmissionResponse's result code (200 allowed, 504 past the deadline) and the time to it.
type DeadlineAnswer struct {
	HTTPStatus int
	Code       int32
	Latency    time.Duration
}

// ran reports whether the request took a slot (it was not refused with 429).
func (a DeadlineAnswer) ran() bool { return a.HTTPStatus != http.StatusTooManyRequests }

// DeadlineRound is one round: every answer of the requests sent at once.
type DeadlineRound struct {
	RequestTimeout time.Duration
	Answers        []DeadlineAnswer
}

// Deadline runs the rounds and writes one line per round to opts.Out. It returns an error
// naming the first round where more than Slots requests ran or an answer came later than its
// request timeout + Grace, after all rounds ran. "Ran" counts the requests not refused with
// 429: it bounds how many ran at once only while each request outlasts the spread of their
// arrivals (the default 2.5 MB object); with a small object and more requests than slots, one
// may end before another arrives, and the round fails although no limit was broken.
func Deadline(ctx context.Context, opts DeadlineOptions) ([]DeadlineRound, error) {
	if opts.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		opts.Binary = exe
	}
	opts.Tolerations = cmp.Or(opts.Tolerations, 64000)
	opts.Parallel = cmp.Or(opts.Parallel, 4)
	opts.Slots = cmp.Or(opts.Slots, 2)
	opts.Rounds = cmp.Or(opts.Rounds, 3)
	opts.Grace = cmp.Or(opts.Grace, 500*time.Millisecond)
	if len(opts.RequestTimeouts) == 0 {
		opts.RequestTimeouts = []time.Duration{2 * time.Second, 300 * time.Millisecond}
	}
	opts.Out = cmp.Or(opts.Out, io.Discard)
	pod := fixtures.Pod("ns", "web")
	for i := range opts.Tolerations {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: fmt.Sprintf("key-%d", i), Operator: corev1.TolerationOpExists})
	}
	review := reviewFor(fixtures.JSON(pod))
	fmt.Fprintf(opts.Out, "strip /spec/tolerations/0 of a %d-toleration Pod (%.1f MB review), %d at once, --max-concurrent-hooks %d\n",
		opts.Tolerations, float64(len(review))/1e6, opts.Parallel, opts.Slots)

	var rounds []DeadlineRound
	var problems []string
	for _, timeout := range opts.RequestTimeouts {
		sc, err := startSidecar(ctx, opts.Binary, deadlineConfig,
			"--request-timeout", timeout.String(), "--max-concurrent-hooks", fmt.Sprint(opts.Slots))
		if err != nil {
			return nil, err
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: sc.pool}, MaxIdleConnsPerHost: opts.Parallel}}
		url := "https://" + sc.httpsAddr + "/mutate/CreatePhysical"
		for r := range opts.Rounds {
			// The work of the last round's requests answered at their deadline may still hold
			// slots until its next step: wait until a small request gets one.
			if err := waitForSlot(ctx, hc, url); err != nil {
				sc.stop()
				return rounds, err
			}
			round := DeadlineRound{RequestTimeout: timeout, Answers: make([]DeadlineAnswer, opts.Parallel)}
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make([]error, opts.Parallel)
			for i := range opts.Parallel {
				wg.Go(func() {
					<-start
					round.Answers[i], errs[i] = sendReview(ctx, hc, url, review)
				})
			}
			close(start)
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				sc.stop()
				return rounds, err
			}
			rounds = append(rounds, round)
			ran, slowest := 0, time.Duration(0)
			var parts []string
			for _, a := range round.Answers {
				if a.ran() {
					ran++
				}
				slowest = max(slowest, a.Latency)
				parts = append(parts, fmt.Sprintf("%d/%d %s", a.HTTPStatus, a.Code, a.Latency.Round(time.Millisecond)))
			}
			slices.Sort(parts)
			fmt.Fprintf(opts.Out, "--request-timeout %-6s round %d: %d ran, slowest answer %s  [%s]\n",
				timeout, r+1, ran, slowest.Round(time.Millisecond), strings.Join(parts, ", "))
			if ran > opts.Slots || slowest > timeout+opts.Grace {
				problems = append(problems, fmt.Sprintf("--request-timeout %s round %d: %d ran (limit %d), slowest answer %s (limit %s)",
					timeout, r+1, ran, opts.Slots, slowest.Round(time.Millisecond), timeout+opts.Grace))
			}
		}
		sc.stop()
	}
	if len(problems) > 0 {
		return rounds, errors.New(strings.Join(problems, "; "))
	}
	return rounds, nil
}

// deadlineConfig is the sidecar's config for Deadline: the strip of BenchmarkCostAgainstSize.
const deadlineConfig = `hooks:
  - name: strip-first-toleration
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical]
    strip:
      paths: [/spec/tolerations/0]
`

// waitForSlot sends a small Pod's review until it is not refused with 429 (every 50 ms, for
// at most 30 s).
func waitForSlot(ctx context.Context, hc *http.Client, url string) error {
	small := reviewFor(fixtures.JSON(fixtures.Pod("ns", "probe")))
	for range 600 {
		a, err := sendReview(ctx, hc, url, small)
		if err == nil && a.ran() {
			return nil
		}
		if err != nil && a.HTTPStatus == 0 {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("the sidecar's slots stayed busy for 30 s after a round")
}

// sendReview posts one AdmissionReview and returns its answer (HTTP status, result code, time).
func sendReview(ctx context.Context, hc *http.Client, url string, review []byte) (DeadlineAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(review)))
	if err != nil {
		return DeadlineAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	began := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return DeadlineAnswer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	a := DeadlineAnswer{HTTPStatus: resp.StatusCode, Latency: time.Since(began)}
	if err != nil || resp.StatusCode != http.StatusOK {
		return a, err
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &out); err != nil {
		return a, fmt.Errorf("answer is not an AdmissionReview: %w", err)
	}
	if out.Response == nil {
		return a, errors.New("answer is an AdmissionReview without a response")
	}
	a.Code = http.StatusOK
	if out.Response.Result != nil && out.Response.Result.Code != 0 {
		a.Code = out.Response.Result.Code
	}
	if out.Response.Allowed && len(out.Response.Patch) == 0 {
		return a, errors.New("allowed without a patch: the strip did not run")
	}
	return a, nil
}
