package datapath

import tbpf "github.com/trestle/trestle/internal/bpf"

// TableMarks are a bridge's marks of fairness (issue 29), as the datapath
// computes them (bpf/lib/fdb.h, tr_table_refuses): past highWater learned
// addresses, a port that holds fair or more learns no new source, so the
// room up to maxEntries is for the ports under their share.
func TableMarks(maxEntries uint32, nports int) (highWater, fair int) {
	headroom := (maxEntries + uint32(tbpf.FDBHeadroom) - 1) / uint32(tbpf.FDBHeadroom)
	f := maxEntries
	if nports > 0 {
		f = maxEntries / uint32(nports)
	}
	return int(maxEntries - headroom), int(max(f, 1))
}
