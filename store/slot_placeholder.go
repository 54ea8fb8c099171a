package store

// PLACEHOLDER until the sandbox branch lands: the types only.

// Shape is what one statement of a slot file must be and may do.
type Shape struct {
	Kind      string
	Table     string
	Params    []string
	SelectsID bool
}

// Slot is the place in a lesson's statement set that a file fills.
type Slot struct {
	Name      string
	Shapes    []Shape
	Schema    []Migration
	CheckRows string
	Samples   map[string]any `json:"-"`
}

// ClaimSlot is the claim.
var ClaimSlot = Slot{Name: "claim"}

// ClaimCheckRows placeholder.
var ClaimCheckRows = claimCheckRows

// SlotFile is an untrusted file's statements for a slot.
type SlotFile struct {
	Slot  Slot
	Texts []string
}
