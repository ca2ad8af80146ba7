// Package labbpf holds the lab's eBPF objects (the generator, the sink and the
// floor, from bpf/lab/) and the Go types generated from bpf/lab/types.h. They
// are the lab's, not the switch's: the switch's object and bindings are in
// internal/bpf. Nothing here is written by hand except this file: run
// `make generate` after changing anything under bpf/lab/, and commit the
// result (`make check-generate` fails when the committed bindings are stale).
package labbpf

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -go-package labbpf -type tr_gen_tmpl -type tr_gen_cpu Gen ../../../bpf/lab/gen.c -- -I../../../bpf/include -I/usr/include/x86_64-linux-gnu
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -go-package labbpf -type tr_sink_flow -type tr_sink_stats Sink ../../../bpf/lab/sink.c -- -I../../../bpf/include -I/usr/include/x86_64-linux-gnu
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -go-package labbpf Floor ../../../bpf/lab/floor.c -- -I../../../bpf/include -I/usr/include/x86_64-linux-gnu
