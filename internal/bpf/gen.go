// Package bpf holds the switch's eBPF objects and the Go types generated from
// bpf/types.h. Nothing here is written by hand except this file and types.go:
// run `make generate` after changing anything under bpf/, and commit the result
// (`make check-generate` fails when the committed bindings are stale).
package bpf

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -go-package bpf -type tr_port_stats -type tr_fdb_key -type tr_fdb_val -type tr_port -type tr_bridge -type tr_bridge_port -type tr_capture_rec -type tr_filter_key -type tr_filter_hit -type tr_filter_set -type tr_filter_count -type tr_state_key -type tr_state Trestle ../../bpf/trestle.c -- -I../../bpf/include -I/usr/include/x86_64-linux-gnu
