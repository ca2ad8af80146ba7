package main

import (
	"strings"
	"testing"
)

// `trestle events` refuses bad input before it calls the daemon, and says
// so when there is none.
func TestEventsCLIErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"events", "-n", "-1"}, "--last -1: a number of events of at least 0"},
		{[]string{"events", "extra"}, `trestle events takes no arguments (given: extra)`},
		{[]string{"events", "--socket", dir + "/none.sock"}, "no trestle daemon answers at " + dir + "/none.sock: there is no socket there"},
		{[]string{"events", "--follow", "--socket", dir + "/none.sock"}, "no trestle daemon answers at"},
	} {
		var out, errb strings.Builder
		code := run(c.args, strings.NewReader(""), &out, &errb, func(string) string { return "" })
		if code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("trestle %s: exit %d, stderr %q, want an error with %q", strings.Join(c.args, " "), code, errb.String(), c.want)
		}
	}
}
