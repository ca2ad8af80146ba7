package ctl

import "time"

// CaptureFrame is a line of `trestle capture --json`: a captured frame,
// written by the CLI and read by the end-to-end tests, so its JSON names
// are a contract.
type CaptureFrame struct {
	Time      time.Time `json:"time"`
	Port      string    `json:"port"`
	Direction string    `json:"direction"` // "in" or "out"
	Length    uint32    `json:"length"`    // on the wire; data may hold less (--snaplen)
	Verdict   string    `json:"verdict"`   // "forwarded", "flooded" or "dropped"
	Reason    string    `json:"reason,omitempty"`
	// BeyondPatchPort: dropped in a bridge beyond a patch port (counted on
	// the patch port it entered that bridge by).
	BeyondPatchPort bool   `json:"beyond_patch_port,omitempty"`
	Egress          string `json:"egress,omitempty"` // forwarded: the port it left by
	Data            string `json:"data"`             // hex
}
