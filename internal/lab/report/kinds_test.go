package report

// The golden reports are made with every kind registered, as `trestle lab`
// has them.
import _ "github.com/trestle/trestle/internal/lab/kinds/all"
