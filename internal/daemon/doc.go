// Package daemon is `trestle run`: it turns a validated config into datapath
// state, keeps it there while interfaces come and go, ages the learning table,
// answers the control socket, reloads on SIGHUP, and, when it stops, detaches
// what it attached, or with persist leaves the datapath forwarding for the
// next daemon to adopt.
//
// # The contract: plan, commit, finalize
//
// Start, reload, adoption and every batch of link events go through one
// apply (reconcile.go), which moves the running switch to a config:
//
//  1. plan builds the next model (bridge ids, port slots) and changes
//     nothing; a config that does not fit is refused here.
//  2. commit makes every dataplane change that can fail, each with its undo
//     in a journal; the first failure undoes them all, last first, and the
//     switch runs as it was.
//  3. finalize does what cannot be undone and need not fail (detaching
//     programs no port uses, giving veth peers their settings back,
//     flushing the entries of what went) and swaps the next model in.
//
// A port that cannot come up is no failure of the apply: it is down, with
// the reason, until a later apply.
//
// # Who owns what
//
// The daemon owns its model (model.go): bridges and ports, what it last
// wrote of each, the static entries it wrote, and, by ifindex, the
// attachments and veth peer fixes, so that a port that moves hands its
// interface over without a detach. Bridge ids and port slots belong to the
// allocator (alloc.go), which alone writes them and never gives out one
// whose entries may still be in the table. The model, and every dataplane
// write it records, changes only under Daemon.mu: in an apply, in a
// command of the control socket (static entries, rules, capture, flushes),
// or in the sweep. The datapath owns the learned entries and the tracked
// connections (the daemon only deletes them: flushes, aging) and the
// counters (the daemon only reads them).
// What must outlive the process is on disk in the state directory
// (state.go) and, with persist, pinned in the BPF filesystem; adopt.go
// takes it over, down.go removes it.
//
// # The seams
//
// The daemon sees the kernel through two seams that the unit tests replace
// with fakes: System (system.go: interfaces, link events, veth peers) and
// the dataplane, split into the roles its parts use (dataplane.go):
// Topology (the port and bridge maps), Table (the learning table), Stages
// (the programs' optional stages), Counters, Conntrack (the filter's
// connections), Attacher (programs on interfaces) and Pins (what outlives
// the daemon). Each part calls only its roles; Dataplane, all of them,
// is only what the daemon is wired with.
//
// # Files
//
// Each file of the package is named here (TestDocNamesEveryFile):
//
//   - the process: daemon.go (start, the event loop, stop), notify.go
//     (systemd's notifications);
//   - the apply: reconcile.go (plan, commit, finalize), attach.go (the
//     commit's ports: each port's mode decided and its program attached,
//     the veth peers prepared), model.go (the model) and alloc.go (its ids
//     and slots), peers.go (the veth peers' settings);
//   - the ports added at run time: desired.go (their merge with the
//     file's into the desired state), scoped.go (applies that look at
//     their own port alone), portstore.go (their record, ports.json),
//     portcmds.go (the control socket's port.add, port.del, port.list),
//     settle.go (the waits of the next port command taken ahead);
//   - the table: aging.go (aging), fair.go (its fair share between ports),
//     macowner.go (the one port that holds a bound address), mobility.go
//     (addresses that move past mac_move_limit, frozen), neigh.go (the
//     neighbour table's static entries, neigh show), neighlearn.go (its
//     learned entries: the snoop ring's ARP, ND and DHCP copies checked
//     against their ports, aged, adopted after a restart);
//   - multicast: snoop.go (multicast_snooping: the snoop ring's IGMP and
//     MLD messages read into memberships, router ports and queriers, the
//     group table written from them, mdb show), querier.go
//     (multicast_querier: the bridge's own IGMP and MLD queries, their
//     election against the queriers heard, the queriers show lists);
//   - loops at the edge: edge.go (ports blocked by bpdu_guard and
//     loop_detect, the loop probes, port.enable);
//   - overlay ports: overlay.go (their VNIs' kernel objects and the loop
//     that keeps the table and FRR in step), overlayneigh.go (MAC+IP
//     routes: the neighbour table's entries to FRR and back), encap.go
//     (their encapsulation in the datapath, XDP and tc), bgp.go (bgpd
//     asked which BGP session carried a withdrawn VTEP, and whether it
//     went);
//   - the control socket: control.go (its commands), filter.go (the
//     filter's), capture.go (capture's);
//   - what outlives the process: state.go (the instance and its state
//     directory), adopt.go (taking over a pinned datapath), down.go
//     (removing one);
//   - what the daemon tells: events.go, moves.go and episodes.go (the
//     events it logs), metrics.go (the Prometheus collector and its
//     endpoint), metricsconns.go (the endpoint's connection limit);
//   - the seams: system.go and dataplane.go.
package daemon
