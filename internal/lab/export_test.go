package lab

// What the core's external tests (package lab_test, the *_kinds_test.go
// files: those that need the registered kinds, which they import through
// internal/lab/kinds/all, and which the core's own package cannot) use of
// the core's unexported code and of its internal tests' helpers.

var (
	RequireRoot         = requireRoot
	Ours                = ours
	RunPrefix           = runPrefix
	TrestleBinary       = trestleBinary
	MustSpec            = mustSpec
	Plan                = plan
	EstimateUnit        = estimate
	Single              = single
	RequireTrestleVLANs = requireTrestleVLANs
	TrestleTakesFilters = trestleTakesFilters
	TrestleTakesMirrors = trestleTakesMirrors
)

// ForUnit is s as unit u runs it.
func (s Scenario) ForUnit(u unit) Scenario { return s.forUnit(u) }

// Shape is the topology of s for DUT v in a chain of chain bridges.
func (s Scenario) Shape(v Spec, chain int) Shape { return s.shape(v, chain) }

// Rep, Size and DUT are a unit's repetition, frame size and DUT.
func (u unit) Rep() int        { return u.rep }
func (u unit) Size() FrameSize { return u.size }
func (u unit) DUT() Spec       { return u.dut }
