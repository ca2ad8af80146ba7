package snoop

import (
	"testing"

	"github.com/trestle/trestle/tests/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
