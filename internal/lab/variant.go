package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// module is the source tree BuildVariant looks for.
const module = "github.com/trestle/trestle"

// variantDefine is the build option that makes the switch program the
// variant: its table's memos (bpf/lib/fdb.h) never used, a different
// program over the same maps, as cmd/trestle's persistence tests make "a
// newer build".
const variantDefine = "-DTR_LAB_VARIANT"

// BuildVariant builds another trestle for the restart test's upgrade events
// when none is given: the switch program of the source tree with its memos
// disabled (variantDefine), compiled with clang and embedded with `go build
// -overlay`, in dir. It needs the source tree (found upward from the
// working directory or the lab's binary), clang and go; without them it
// says what is missing.
func BuildVariant(ctx context.Context, dir, version string) (TrestleBuild, error) {
	root, err := sourceTree()
	if err != nil {
		return TrestleBuild{}, err
	}
	for _, tool := range []string{"clang", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			return TrestleBuild{}, fmt.Errorf("build the variant: %s is not on PATH", tool)
		}
	}
	src := filepath.Join(root, "bpf")
	if err := os.RemoveAll(dir); err != nil {
		return TrestleBuild{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return TrestleBuild{}, err
	}
	// The flags of internal/bpf's go:generate line, and the variant's.
	obj := filepath.Join(dir, "trestle_bpfel.o")
	cc := exec.CommandContext(ctx, "clang", "-O2", "-g", "-Wall", "-Werror", variantDefine, "-target", "bpfel",
		"-I"+filepath.Join(src, "include"), "-I"+src, "-I/usr/include/"+multiarch(), "-c", filepath.Join(src, "trestle.c"), "-o", obj)
	if out, err := cc.CombinedOutput(); err != nil {
		return TrestleBuild{}, fmt.Errorf("build the variant: clang: %v: %s", err, strings.TrimSpace(string(out)))
	}
	ov, err := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(root, "internal", "bpf", "trestle_bpfel.o"): obj}})
	if err != nil {
		return TrestleBuild{}, err
	}
	overlay := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		return TrestleBuild{}, err
	}
	if version == "" {
		version = "dev"
	}
	bin := filepath.Join(dir, "trestle-variant")
	gb := exec.CommandContext(ctx, "go", "build", "-overlay", overlay, "-trimpath", "-ldflags", "-X main.version="+version+"+lab-variant", "-o", bin, "./cmd/trestle")
	gb.Dir = root
	if out, err := gb.CombinedOutput(); err != nil {
		return TrestleBuild{}, fmt.Errorf("build the variant: go build in %s: %v: %s", root, err, strings.TrimSpace(string(out)))
	}
	return TrestleBuild{Path: bin, Label: fmt.Sprintf("%s (%s+lab-variant), a variant built by the lab from %s: its switch program with the memos disabled (another program over the same maps)", bin, version, root)}, nil
}

// sourceTree finds trestle's source tree upward from the working directory
// or from the directory of the running binary (bin/trestle).
func sourceTree() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, d := range starts {
		for {
			if isSourceTree(d) {
				return d, nil
			}
			up := filepath.Dir(d)
			if up == d {
				break
			}
			d = up
		}
	}
	return "", errors.New("build the variant: no trestle source tree (go.mod of " + module + " with bpf/trestle.c) above the working directory or the lab's binary")
}

func isSourceTree(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "bpf", "trestle.c")); err != nil {
		return false
	}
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == module
		}
	}
	return false
}

// multiarch is Debian's include directory of the machine's architecture,
// where asm/types.h is.
func multiarch() string {
	switch runtime.GOARCH {
	case "arm64":
		return "aarch64-linux-gnu"
	}
	return "x86_64-linux-gnu"
}
