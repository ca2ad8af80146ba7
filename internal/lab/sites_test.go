package lab

import (
	"os"
	"strings"
	"testing"
)

// TestLinuxVNIDoc: docs/overlay.md's Linux host of a mixed fabric is set
// up with the commands LinuxVNI gives (the overlay kind's stand-in and
// tests/overlay's Linux site), in their order, for the doc's VNI 1000 on
// host C: the doc cannot drift from what is tested.
func TestLinuxVNIDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/overlay.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## A mixed fabric\n")
	if !ok {
		t.Fatal(`docs/overlay.md has no "## A mixed fabric"`)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	var want strings.Builder
	for _, c := range (LinuxVNI{VNI: 1000, Bridge: "br0", VXLAN: "vxlan1000", MTU: 1450, Ports: []string{"port-h1"}}).Commands("10.255.0.3") {
		want.WriteString(strings.Join(c, " ") + "\n")
	}
	if !strings.Contains(sec, "```sh\n"+want.String()+"```\n") {
		t.Errorf("docs/overlay.md, \"A mixed fabric\": no block of the Linux host's commands as LinuxVNI gives them:\n%s", want.String())
	}
}
