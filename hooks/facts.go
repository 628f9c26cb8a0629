package hooks

// Side is the cluster the objects of a hook type live in. Its values are the strings synchook's
// sealed undo uses for a side (internal/undo's Side), so the engine converts by type conversion.
type Side string

const (
	// Physical is the host cluster: CreatePhysical, UpdatePhysical, DeletePhysical and
	// GetPhysical.
	Physical Side = "physical"
	// Virtual is the virtual (tenant) cluster: CreateVirtual, UpdateVirtual, DeleteVirtual and
	// GetVirtual.
	Virtual Side = "virtual"
)

// Op is what the syncer does with the object of a hook type: a write (Create, Update, Delete),
// whose hooks run before it, or a read (Get, a List per item), whose hooks run after it. Its
// values are the hook type's prefix.
type Op string

// The four operations.
const (
	OpCreate Op = "Create"
	OpUpdate Op = "Update"
	OpDelete Op = "Delete"
	OpGet    Op = "Get"
)

// fact is what is known of one hook type: its side, its operation, the read of its side that
// undoes it ("" unless op is Create or Update: a Delete leaves nothing to read back) and the
// Update type of its side.
type fact struct {
	side   Side
	op     Op
	read   HookType
	update HookType
}

// facts is the one table of hook-type facts; every function below reads it. Its keys are
// exactly AllHookTypes (TestFacts).
var facts = map[HookType]fact{
	CreatePhysical: {Physical, OpCreate, GetPhysical, UpdatePhysical},
	UpdatePhysical: {Physical, OpUpdate, GetPhysical, UpdatePhysical},
	DeletePhysical: {Physical, OpDelete, "", UpdatePhysical},
	GetPhysical:    {Physical, OpGet, "", UpdatePhysical},
	CreateVirtual:  {Virtual, OpCreate, GetVirtual, UpdateVirtual},
	UpdateVirtual:  {Virtual, OpUpdate, GetVirtual, UpdateVirtual},
	DeleteVirtual:  {Virtual, OpDelete, "", UpdateVirtual},
	GetVirtual:     {Virtual, OpGet, "", UpdateVirtual},
}

// Side returns the cluster the objects of t live in (Physical or Virtual), "" when t is not
// one of the eight hook types.
func (t HookType) Side() Side { return facts[t].side }

// Op returns what the syncer does with the object of t (OpCreate, OpUpdate, OpDelete or
// OpGet), "" when t is not one of the eight hook types.
func (t HookType) Op() Op { return facts[t].op }

// Reads reports whether t runs after the syncer reads an object (GetPhysical, GetVirtual).
func (t HookType) Reads() bool { return facts[t].op == OpGet }

// ReadOf returns the read hook type that undoes what a write of t stored: GetPhysical for
// CreatePhysical and UpdatePhysical, GetVirtual for CreateVirtual and UpdateVirtual. ok is
// false for every other t (a Delete, a Get, an unknown type).
func (t HookType) ReadOf() (read HookType, ok bool) {
	read = facts[t].read
	return read, read != ""
}

// UpdateOf returns the Update hook type of t's side (UpdatePhysical or UpdateVirtual), "" when
// t is not one of the eight hook types.
func (t HookType) UpdateOf() HookType { return facts[t].update }

// HookTypeOf returns the hook type of op on side (HookTypeOf(Virtual, OpGet) is GetVirtual), ""
// when either is not one of the constants.
func HookTypeOf(side Side, op Op) HookType {
	for _, e := range hookTypeTable {
		if f := facts[e.typ]; f.side == side && f.op == op {
			return e.typ
		}
	}
	return ""
}
