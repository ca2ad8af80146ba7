package datapath

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// kernelHZ is the kernel's tick rate (CONFIG_HZ), from its config in
// /proc/config.gz or /boot/config-RELEASE; 0 when neither says.
var kernelHZ = sync.OnceValue(func() int {
	var uts unix.Utsname
	release := ""
	if unix.Uname(&uts) == nil {
		release = unix.ByteSliceToString(uts.Release[:])
	}
	for _, f := range []string{"/proc/config.gz", "/boot/config-" + release} {
		if hz, err := configHZ(f); err == nil && hz > 0 {
			return hz
		}
	}
	return 0
})

func configHZ(file string) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(file, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return 0, err
		}
		defer gz.Close()
		r = gz
	}
	return parseHZ(r)
}

func parseHZ(r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CONFIG_HZ="); ok {
			hz, err := strconv.Atoi(v)
			if err != nil || hz < 1 {
				return 0, fmt.Errorf("CONFIG_HZ=%s", v)
			}
			return hz, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no CONFIG_HZ")
}
