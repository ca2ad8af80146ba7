package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/trestle/trestle/internal/config"
)

// A VLAN list is written as the config file writes it, and read from that
// form or from the string daemons of earlier releases sent.
func TestVLANListJSON(t *testing.T) {
	for _, c := range []struct {
		v    VLANList
		json string
	}{
		{nil, `[]`},
		{VLANList{10}, `[10]`},
		{VLANList{10, 11, 12, 20, 30, 31}, `["10-12",20,"30-31"]`},
		{VLANList{1, 3, 5, 4094}, `[1,3,5,4094]`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || string(b) != c.json {
			t.Errorf("%v: %s %v, want %s", c.v, b, err, c.json)
		}
		var back VLANList
		if err := json.Unmarshal(b, &back); err != nil || len(back) != len(c.v) || back.String() != c.v.String() {
			t.Errorf("%s read back as %v, %v", b, back, err)
		}
	}
	var old VLANList
	if err := json.Unmarshal([]byte(`"10-12,20"`), &old); err != nil || !reflect.DeepEqual(old, VLANList{10, 11, 12, 20}) {
		t.Errorf("the string form: %v, %v", old, err)
	}
	for _, bad := range []string{`["x"]`, `["20-10"]`, `[true]`, `{}`, `"10,x"`, `[5000]`, `[0]`, `["0-3"]`} {
		var v VLANList
		if err := json.Unmarshal([]byte(bad), &v); err == nil {
			t.Errorf("%s read as %v", bad, v)
		}
	}
	// Lists are [] when empty, never null; booleans are always there.
	b, _ := json.Marshal(PortStatus{Name: "p1"})
	for _, want := range []string{`"allowed_macs":[]`, `"allowed_ips":[]`, `"trunk":[]`, `"locked":false`, `"ip_guard":false`, `"qinq":false`, `"native_tagged":false`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("a port in JSON has no %s: %s", want, b)
		}
	}
}

// A configuration the daemon refuses comes back whole: Call returns its
// problems as config.Errors, one by one, as the daemon found them.
func TestRefusalOverTheSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.sock")
	srv, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	refusal := config.Errors{
		{File: "/etc/trestle.toml", Line: 3, Field: "bridge[0].aging", Msg: "out of range"},
		{File: "/etc/trestle.toml", Line: 9, Field: "bridge[0].port[1].mode", Msg: `"fast" is not one of auto, xdp, tc`},
	}
	go srv.Serve(ctx, func(_ context.Context, req Request) (any, error) {
		if req.Cmd == CmdReload {
			return nil, refusal
		}
		return nil, errors.New("apply failed")
	})
	err = Call(path, Request{Cmd: CmdReload}, nil)
	var got config.Errors
	if !errors.As(err, &got) || len(got) != 2 || *got[0] != *refusal[0] || *got[1] != *refusal[1] {
		t.Errorf("reload: %#v, want the daemon's refusal", err)
	}
	err = Call(path, Request{Cmd: CmdShow}, nil)
	var daemonErr *DaemonError
	if !errors.As(err, &daemonErr) || err.Error() != "apply failed" || errors.As(err, &got) {
		t.Errorf("show: %#v, want the daemon's error", err)
	}
}

// No daemon is ErrNoDaemon, said in words: no socket, or one that no
// process listens on.
func TestNoDaemon(t *testing.T) {
	dir := t.TempDir()
	err := Call(filepath.Join(dir, "none.sock"), Request{Cmd: CmdShow}, nil)
	if !errors.Is(err, ErrNoDaemon) || err.Error() != "no trestle daemon answers at "+dir+"/none.sock: there is no socket there" {
		t.Errorf("no socket: %v", err)
	}
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	err = Call(stale, Request{Cmd: CmdShow}, nil)
	if !errors.Is(err, ErrNoDaemon) || !strings.Contains(err.Error(), "nothing listens on the socket") || errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("stale socket: %v", err)
	}
	if _, err := FDB(stale, ""); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("fdb show, stale socket: %v", err)
	}
}
