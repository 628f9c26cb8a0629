package capture

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
)

// Defaults of Options.
const (
	DefaultSample   = 0.01
	DefaultMaxBytes = 100 << 20
	DefaultBuffer   = 256
)

// Options configures a Writer.
type Options struct {
	// Dir is where the files go; created (mode 0700) when missing. Required. New refuses a Dir
	// that is a symbolic link, is writable by group or others, or is owned by another user
	// than the process's: whoever else can write it could plant or replace capture files.
	Dir string
	// Sample is the fraction of requests captured, in (0, 1]. 0 means DefaultSample (1 %).
	Sample float64
	// MaxBytes bounds the total size of the capture files in Dir (those from earlier runs
	// included): before a file that would pass it is written, the oldest are deleted. A record
	// larger than MaxBytes on its own is dropped. 0 means DefaultMaxBytes (100 MiB).
	MaxBytes int64
	// Buffer is how many sampled requests may wait for the writer goroutine; when it is full
	// a sample is dropped rather than slowing the request. 0 means DefaultBuffer.
	Buffer int
	// Version is the synchook version written in every record (plugin.Version()).
	Version string
	// Registry names the hooks of each chain in the records (Capabilities). May be nil.
	Registry *engine.Registry
	// Log receives write errors and drops at V(1). Default logr.Discard().
	Log logr.Logger
}

// sample is a sampled request, as Capture copied it.
type sample struct {
	time       time.Time
	hookType   hooks.HookType
	gvk        schema.GroupVersionKind
	raw, patch []byte
	hooksRun   int
	err        string
}

type file struct {
	name string
	size int64
}

// Writer samples requests (Capture, on the request path: a random draw, two copies and a
// channel send that never blocks) and writes them to Dir on its own goroutine (Run).
type Writer struct {
	opts    Options
	names   map[engine.Key][]string
	ch      chan sample
	stop    chan struct{}
	once    sync.Once
	dropped atomic.Int64

	// mu is held by Run while it runs, and by Close while it writes what Run left: it guards
	// the fields below.
	mu    sync.Mutex
	files []file // in name order: oldest first
	total int64
	seq   uint64
	last  time.Time
}

// New checks o, creates Dir (0700) when missing, refuses a Dir that others could write (see
// Options.Dir; the error names its mode and owner and what to do) and reads the sizes of the
// capture files already in it (deleting leftover temporary files). Start the writer with Run.
func New(o Options) (*Writer, error) {
	if o.Dir == "" {
		return nil, errors.New("capture: no directory")
	}
	o.Sample = cmp.Or(o.Sample, DefaultSample)
	if !(o.Sample > 0 && o.Sample <= 1) {
		return nil, fmt.Errorf("capture: sample %v: want a fraction in (0, 1]", o.Sample)
	}
	o.MaxBytes = cmp.Or(o.MaxBytes, DefaultMaxBytes)
	if o.MaxBytes < 0 {
		return nil, fmt.Errorf("capture: max bytes %d: want > 0", o.MaxBytes)
	}
	o.Buffer = cmp.Or(max(o.Buffer, 0), DefaultBuffer)
	if err := prepareDir(o.Dir); err != nil {
		return nil, err
	}
	w := &Writer{
		opts: o, names: chainNames(o.Registry),
		ch: make(chan sample, o.Buffer), stop: make(chan struct{}),
	}
	entries, err := os.ReadDir(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	for _, e := range entries { // ReadDir sorts by name
		switch {
		case e.Type().IsRegular() && fileName.MatchString(e.Name()):
			info, err := e.Info()
			if err != nil {
				continue
			}
			w.files = append(w.files, file{e.Name(), info.Size()})
			w.total += info.Size()
		case e.Type().IsRegular() && strings.HasPrefix(e.Name(), tmpPrefix):
			_ = os.Remove(filepath.Join(o.Dir, e.Name()))
		}
	}
	return w, nil
}

// tmpPrefix starts the name of a file being written; it is renamed when complete, so a reader
// (replay, kubectl cp) never sees half a record.
const tmpPrefix = ".tmp-"

// Capture samples one request; it has the signature of engine.RunnerOptions.Capture. It never
// blocks: when the writer is behind, the sample is dropped. Chains that failed on a deadline
// or cancellation are not captured (their outcome depends on load, not on the hooks).
func (w *Writer) Capture(t hooks.HookType, gvk schema.GroupVersionKind, raw []byte, res engine.Result, err error) {
	if w.opts.Sample < 1 && rand.Float64() >= w.opts.Sample {
		return
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, failure.ErrOverloaded) {
		return
	}
	s := sample{time: time.Now(), hookType: t, gvk: gvk, raw: bytes.Clone(raw), hooksRun: res.Hooks}
	if err != nil {
		s.err = err.Error()
	} else {
		s.patch = bytes.Clone(res.Patch)
	}
	select {
	case w.ch <- s:
	default:
		w.dropped.Add(1)
	}
}

// Run writes the samples until ctx ends or Close is called, then writes those already waiting
// and returns.
func (w *Writer) Run(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		select {
		case s := <-w.ch:
			w.write(s)
		case <-ctx.Done():
			w.drain()
			return
		case <-w.stop:
			w.drain()
			return
		}
	}
}

func (w *Writer) drain() {
	for {
		select {
		case s := <-w.ch:
			w.write(s)
		default:
			if n := w.dropped.Swap(0); n > 0 {
				w.opts.Log.V(1).Info("capture samples dropped: the writer was behind", "dropped", n)
			}
			return
		}
	}
}

// Close stops Run and returns when the samples captured before it are written (by Run, or by
// Close itself when Run is not running). Samples captured afterwards are dropped. It is safe
// to call more than once.
func (w *Writer) Close() error {
	w.once.Do(func() { close(w.stop) })
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drain()
	return nil
}

// write turns s into a record file, deleting the oldest files first when the bound needs it.
// Errors are logged at V(1): capture never fails a request.
func (w *Writer) write(s sample) {
	log := w.opts.Log.V(1)
	if n := w.dropped.Swap(0); n > 0 {
		log.Info("capture samples dropped: the writer was behind", "dropped", n)
	}
	b, err := w.encode(s)
	if err != nil {
		log.Info("capture sample not written", "hookType", s.hookType, "gvk", s.gvk.String(), "error", err.Error())
		return
	}
	size := int64(len(b))
	if size > w.opts.MaxBytes {
		log.Info("capture sample not written: larger than the capture bound", "bytes", size, "maxBytes", w.opts.MaxBytes)
		return
	}
	for len(w.files) > 0 && w.total+size > w.opts.MaxBytes {
		old := w.files[0]
		if err := os.Remove(filepath.Join(w.opts.Dir, old.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Info("cannot delete an old capture file", "file", old.name, "error", err.Error())
		}
		w.files = slices.Delete(w.files, 0, 1)
		w.total -= old.size
	}
	now := time.Now().UTC()
	if !now.After(w.last) { // keep names in write order even if the clock steps back
		now = w.last.Add(time.Nanosecond)
	}
	w.last = now
	w.seq++
	name := nameFor(now, w.seq)
	if err := writeFile(w.opts.Dir, name, b); err != nil {
		log.Info("cannot write a capture file", "file", name, "error", err.Error())
		return
	}
	w.files = append(w.files, file{name, size})
	w.total += size
}

// encode returns the record of s as JSON, Secret values redacted.
func (w *Writer) encode(s sample) ([]byte, error) {
	if !json.Valid(s.raw) {
		return nil, errors.New("the object is not valid JSON")
	}
	var obj bytes.Buffer
	if err := json.Compact(&obj, s.raw); err != nil {
		return nil, err
	}
	object, err := mapObject(s.gvk, obj.Bytes(), redactMapper)
	if err != nil {
		return nil, fmt.Errorf("redact the object: %w", err)
	}
	p, err := mapPatch(s.gvk, s.patch, redactMapper)
	if err != nil {
		return nil, fmt.Errorf("redact the patch: %w", err)
	}
	apiVersion, kind := s.gvk.ToAPIVersionAndKind()
	rec := Record{
		Format: FormatVersion, Time: s.time.UTC(), SynchookVersion: w.opts.Version,
		HookType: s.hookType, APIVersion: apiVersion, Kind: kind,
		Hooks: namesFor(w.names, s.gvk, s.hookType), HooksRun: s.hooksRun,
		Object: object, Patch: p, Error: scrub(s.err, secretTexts(s.gvk, s.raw)),
	}
	return encodeJSON(rec)
}

// writeFile writes b to dir/name (mode 0600) through a temporary file renamed at the end.
func writeFile(dir, name string, b []byte) error {
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // no-op after the rename
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}
