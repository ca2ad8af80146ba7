package lab

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
)

// TestVariantDefine: the variant's build option makes another switch
// program over the same maps: every map as in the build without it, and
// the programs' instructions different (its table's memos are gone).
func TestVariantDefine(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the switch program twice (half a minute)")
	}
	if _, err := exec.LookPath("clang"); err != nil {
		t.Skip("needs clang")
	}
	root, err := sourceTree()
	if err != nil {
		t.Skip(err)
	}
	src := filepath.Join(root, "bpf")
	build := func(obj string, extra ...string) (*ebpf.CollectionSpec, error) {
		args := append([]string{"-O2", "-g", "-Wall", "-Werror"}, extra...)
		args = append(args, "-target", "bpfel", "-I"+filepath.Join(src, "include"), "-I"+src, "-I/usr/include/"+multiarch(), "-c", filepath.Join(src, "trestle.c"), "-o", obj)
		if out, err := exec.CommandContext(context.Background(), "clang", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("clang %v: %v\n%s", extra, err, out)
		}
		return ebpf.LoadCollectionSpec(obj)
	}
	// The two builds side by side: each is one clang of 20 s on one core,
	// and this test is the longest of its package.
	var (
		plain, variant *ebpf.CollectionSpec
		errPlain       error
		done           = make(chan struct{})
	)
	dir := t.TempDir()
	go func() {
		defer close(done)
		plain, errPlain = build(filepath.Join(dir, "plain.o"))
	}()
	variant, err = build(filepath.Join(dir, "variant.o"), variantDefine)
	<-done
	if err := errors.Join(errPlain, err); err != nil {
		t.Fatal(err)
	}
	names := func(m map[string]*ebpf.MapSpec) []string {
		var out []string
		for n := range m {
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	if a, b := names(plain.Maps), names(variant.Maps); !slices.Equal(a, b) {
		t.Errorf("the variant's maps %v, the build's %v", b, a)
	}
	for n, m := range plain.Maps {
		if v := variant.Maps[n]; v.Type != m.Type || v.KeySize != m.KeySize || v.ValueSize != m.ValueSize || v.MaxEntries != m.MaxEntries {
			t.Errorf("map %s: the variant's %+v, the build's %+v", n, v, m)
		}
	}
	differ := 0
	for n, p := range plain.Programs {
		v, ok := variant.Programs[n]
		if !ok {
			t.Errorf("the variant has no program %s", n)
			continue
		}
		if len(v.Instructions) != len(p.Instructions) {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("%s changed no program of %d: the variant would be the same build", variantDefine, len(plain.Programs))
	}
}
