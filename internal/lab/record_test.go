package lab

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestOldRecords: a result recorded before the registry, its kind's record
// under a key of its own, loads with that record in Record, and is written
// again with it there; a result with a Record keeps it.
func TestOldRecords(t *testing.T) {
	for _, key := range oldRecordKeys {
		old := `{"dut": "trestle:xdp", "rep": 1, "chain": 1, "test": "t", "param": "p", "value": 1, "unit": "frames", "` + key + `": {"kind": "sigkill", "events": [{"index": 1, "lost": 0}]}}`
		var r Result
		if err := json.Unmarshal([]byte(old), &r); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if string(r.Record) != `{"kind": "sigkill", "events": [{"index": 1, "lost": 0}]}` || r.DUT != "trestle:xdp" || r.Value != 1 {
			t.Errorf("%s: %+v, record %s", key, r, r.Record)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"record":{"kind":"sigkill"`) || strings.Contains(string(b), `"`+key+`":`) {
			t.Errorf("%s written again: %s", key, b)
		}
	}
	var r Result
	if err := json.Unmarshal([]byte(`{"test": "idle", "record": {"seconds": 3}, "restart": null}`), &r); err != nil {
		t.Fatal(err)
	}
	if string(r.Record) != `{"seconds": 3}` {
		t.Errorf("a result's own record: %s", r.Record)
	}
	if err := json.Unmarshal([]byte(`{"test": "idle", "restart": 3`), &r); err == nil {
		t.Error("a broken result loaded")
	}
}
