package paramsource

// NewFor returns a Host over client, whose own host namespace (the vcluster's, never read) is
// hostNamespace ("" for none).
func NewFor(client Client, hostNamespace string, opts Options) *Host {
	h := New(opts)
	h.client, h.hostNamespace = &client, hostNamespace
	return h
}
