package builtin

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
)

// StripHook is the strip hook of one resource: a hooks.FuncHook (its MutateFuncs strip a
// typed object, StripFunc) that also tells its paths and filter (StripPaths), so that a chain
// made only of strip hooks can remove them from the object's JSON without decoding it (the
// registry's document path). Create it with NewStripHook.
type StripHook struct {
	hooks.FuncHook
	paths   [][]string
	matches func(namespace string, labels map[string]string) bool
}

// NewStripHook returns the strip hook named name for resource and types: s's paths, behind the
// filter f. Errors: those of StripFunc and Filtered (a bad path, an invalid selector).
func NewStripHook(name string, resource client.Object, types []hooks.HookType, s Strip, f Filter) (*StripHook, error) {
	fn, err := StripFunc(s)
	if err != nil {
		return nil, err
	}
	if fn, err = Filtered(f, fn); err != nil {
		return nil, err
	}
	matches, err := f.matcher()
	if err != nil {
		return nil, err
	}
	h := &StripHook{FuncHook: hooks.NewFunc(name, resource, types, fn), matches: matches}
	for _, p := range s.Paths {
		tokens, err := parseStripPath(p)
		if err != nil {
			return nil, err
		}
		h.paths = append(h.paths, tokens)
	}
	return h, nil
}

// StripPaths returns the paths the hook removes, as reference tokens in order, and whether it
// applies to an object with a namespace and labels (as they are when it runs); matches is nil
// when it applies to every object.
func (h *StripHook) StripPaths() (paths [][]string, matches func(namespace string, labels map[string]string) bool) {
	return h.paths, h.matches
}
