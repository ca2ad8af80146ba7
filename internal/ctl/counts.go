package ctl

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Count is one named counter.
type Count struct {
	Name  string
	Value uint64
}

// Counts are a port's or a VLAN's counters in the datapath's order (the
// enums of bpf/types.h). In JSON they are plain fields of the object that
// holds them, "rx_packets": 12, so the wire format names each counter as
// the C enum does and gains a field when the enum gains a counter.
type Counts []Count

// Get is the named counter's value; 0 if there is none of that name (as a
// daemon of an older build would have).
func (c Counts) Get(name string) uint64 {
	for _, x := range c {
		if x.Name == name {
			return x.Value
		}
	}
	return 0
}

// Has says whether the counter is there at all.
func (c Counts) Has(name string) bool {
	for _, x := range c {
		if x.Name == name {
			return true
		}
	}
	return false
}

// objectWriter writes one JSON object field by field, in order.
type objectWriter struct {
	buf bytes.Buffer
	err error
}

func (w *objectWriter) field(name string, v any) {
	if w.err != nil {
		return
	}
	if w.buf.Len() == 0 {
		w.buf.WriteByte('{')
	} else {
		w.buf.WriteByte(',')
	}
	k, _ := json.Marshal(name)
	w.buf.Write(k)
	w.buf.WriteByte(':')
	b, err := json.Marshal(v)
	if err != nil {
		w.err = fmt.Errorf("field %s: %w", name, err)
		return
	}
	w.buf.Write(b)
}

func (w *objectWriter) counts(c Counts) {
	for _, x := range c {
		w.field(x.Name, x.Value)
	}
}

func (w *objectWriter) done() ([]byte, error) {
	if w.buf.Len() == 0 {
		w.buf.WriteByte('{')
	}
	w.buf.WriteByte('}')
	return w.buf.Bytes(), w.err
}

// readObject reads a JSON object field by field, in order: known fields go
// to their targets, every other field whose value is a number becomes a
// counter, in the order it came; anything else is ignored, as
// encoding/json ignores unknown fields.
func readObject(data []byte, known map[string]any, counts *Counts) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil {
		return err
	} else if d, ok := t.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("counters: want an object, got %v", t)
	}
	*counts = nil
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("field %s: %w", name, err)
		}
		if target, ok := known[name]; ok {
			if err := json.Unmarshal(raw, target); err != nil {
				return fmt.Errorf("field %s: %w", name, err)
			}
			continue
		}
		var v uint64
		if json.Unmarshal(raw, &v) == nil {
			*counts = append(*counts, Count{name, v})
		}
	}
	_, err := dec.Token()
	return err
}

func (p PortStats) MarshalJSON() ([]byte, error) {
	var w objectWriter
	w.field("bridge", p.Bridge)
	w.field("port", p.Port)
	w.field("mode", p.Mode)
	w.counts(p.Counters)
	drops := p.Drops
	if drops == nil {
		drops = map[string]uint64{}
	}
	w.field("drops", drops)
	return w.done()
}

func (p *PortStats) UnmarshalJSON(data []byte) error {
	*p = PortStats{}
	return readObject(data, map[string]any{"bridge": &p.Bridge, "port": &p.Port, "mode": &p.Mode, "drops": &p.Drops}, &p.Counters)
}

func (v VLANStats) MarshalJSON() ([]byte, error) {
	var w objectWriter
	w.field("bridge", v.Bridge)
	w.field("vlan", v.VLAN)
	ports := v.Ports
	if ports == nil {
		ports = []string{}
	}
	w.field("ports", ports)
	w.counts(v.Counters)
	return w.done()
}

func (v *VLANStats) UnmarshalJSON(data []byte) error {
	*v = VLANStats{}
	return readObject(data, map[string]any{"bridge": &v.Bridge, "vlan": &v.VLAN, "ports": &v.Ports}, &v.Counters)
}
