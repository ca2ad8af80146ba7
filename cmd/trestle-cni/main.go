// Command trestle-cni is trestle's CNI plugin, installed as the plugin of
// type "trestle" (bin/cni/trestle, /opt/cni/bin/trestle): it attaches a
// container to a trestle bridge as a run-time port of the daemon, through
// its control socket. docs/containers-and-vms.md "Containers: the CNI
// plugin" is its manual.
package main

import (
	"runtime"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"
)

// version is set by the build (make build: git describe).
var buildVersion = "dev"

func init() {
	// Namespace operations act on one OS thread: main's must stay the
	// process's first (the plugins' convention, pkg/ns).
	runtime.LockOSThread()
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    cmdAdd,
		Del:    cmdDel,
		Check:  cmdCheck,
		Status: cmdStatus,
		GC:     cmdGC,
	}, version.All, "trestle CNI plugin "+buildVersion)
}
