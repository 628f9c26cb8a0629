package hooks

// Undoer is implemented by hooks that choose whether their change is taken back on the way up
// (automatic undo, on in the synchook binary): Undo returning false means the tenant should see
// it, and then the chains the hook is in record no undo (a chain is undone whole or not at all).
// Every hook of a write chain (one kind and one Create or Update hook type) must give the same
// answer: registering one that differs from a hook already in the chain fails, naming both.
type Undoer interface {
	Undo() bool
}
