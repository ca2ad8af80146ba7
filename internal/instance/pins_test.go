package instance

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLinkFileRoundTrip(t *testing.T) {
	for _, c := range []struct {
		ifindex int
		mode    string
	}{{1, "xdp"}, {4096, "tc"}} {
		idx, m, ok := ParseLinkFile(LinkFile(c.ifindex, c.mode))
		if !ok || idx != c.ifindex || m != c.mode {
			t.Errorf("ParseLinkFile(LinkFile(%d, %q)) = %d, %q, %v", c.ifindex, c.mode, idx, m, ok)
		}
	}
	for _, name := range []string{"port-1-auto", "port-x-xdp", "port-1", "links", "port-1-xdp-2", ""} {
		if _, _, ok := ParseLinkFile(name); ok {
			t.Errorf("ParseLinkFile(%q) accepted a name LinkFile does not make", name)
		}
	}
}

func TestNameIsPerNamespaceAndSocket(t *testing.T) {
	a := Name(7, "/run/trestle/trestle.sock")
	if a != Name(7, "/run/trestle/trestle.sock") {
		t.Fatal("Name is not stable")
	}
	if a == Name(8, "/run/trestle/trestle.sock") || a == Name(7, "/run/trestle/other.sock") {
		t.Fatal("two instances share a name")
	}
	if want := "ns7-"; a[:len(want)] != want {
		t.Fatalf("Name(7, ...) = %q, want the prefix %q that DownNetns sweeps by", a, want)
	}
}

// Down on a directory without links removes every file in it and in its
// links/ (what is there is ours), then the directories; twice is no error.
func TestDownRemovesTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Name(1, "s"))
	if err := os.MkdirAll(filepath.Join(dir, LinksDir), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(dir, "layouts"), filepath.Join(dir, "fdb-0123"), filepath.Join(dir, LinksDir, "stray")} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	did, err := Down(dir)
	if err != nil || len(did) != 0 {
		t.Fatalf("Down = %v, %v; want nothing detached and no error", did, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s is still there (%v)", dir, err)
	}
	if _, err := Down(dir); err != nil {
		t.Fatalf("Down of a gone directory: %v", err)
	}
	if n, err := Holding(dir); n != 0 || err != nil {
		t.Fatalf("Holding of a gone directory = %d, %v", n, err)
	}
}
