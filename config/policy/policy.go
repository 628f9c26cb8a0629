// Package policy links policy hooks into a binary: import it for its side effect,
//
//	import _ "github.com/synchook/synchook/config/policy"
//
// and the binary's config may hold policy: and policyFile: entries (a Kubernetes
// MutatingAdmissionPolicy run as a hook; README, "Policies"). The synchook binary imports it.
// Without it, package config refuses such an entry, naming this package, and the binary links
// neither k8s.io/apiserver nor cel-go (about 9 MB less for a binary built on package plugin).
package policy

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	mapolicy "github.com/synchook/synchook/internal/policy"
	"github.com/synchook/synchook/internal/policyreg"
)

func init() { policyreg.Register(compile) }

// compile parses src's manifest (or file) and compiles it against src's scheme and kinds.
func compile(src policyreg.Source) (policyreg.Policy, error) {
	var (
		p   *admissionregistrationv1.MutatingAdmissionPolicy
		err error
	)
	if src.File != "" {
		p, err = mapolicy.ParseFile(src.File)
	} else {
		p, err = mapolicy.Parse(src.Manifest)
	}
	if err != nil {
		return nil, err
	}
	opts := mapolicy.Options{Scheme: src.Scheme, Kinds: src.Kinds}
	for i, data := range src.Bindings {
		b, err := mapolicy.ParseBinding(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at(src.BindingsAt, "bindings", i), err)
		}
		opts.Bindings = append(opts.Bindings, *b)
	}
	for i, data := range src.Params {
		o, err := mapolicy.ParseParam(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at(src.ParamsAt, "params", i), err)
		}
		opts.Params = append(opts.Params, o)
	}
	if src.HostParams != nil && len(src.ParamNamespaces) > 0 {
		opts.ParamSource = src.HostParams.In(src.ParamNamespaces)
	}
	compiled, err := mapolicy.CompileWithOptions(p, opts)
	if err != nil {
		return nil, err // not compiled, a nil *Policy: keep the interface nil
	}
	return compiled, nil
}

// at returns where the i-th of the entry's bindings or params (key) came from: labels[i], else
// key[i].
func at(labels []string, key string, i int) string {
	if i < len(labels) {
		return labels[i]
	}
	return fmt.Sprintf("%s[%d]", key, i)
}
