package portscale

// What the external tests (preset_test.go, which import kinds/all for the
// port-scale preset) use of the kind's unexported code.

// Counts are k's port counts, the default's without its own.
func (k Kind) Counts() []int { return k.counts() }

// Sinks is how many hosts count the frames.
const Sinks = portScaleSinks
