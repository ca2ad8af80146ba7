/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The optional stages, and the builds of the programs they make: the one
 * description of the matrix (docs/performance.md, "The builds", mirrors it).
 *
 * A stage no bridge uses costs nothing: it is not in the programs attached
 * (architecture.md rule 6). Each is gated one way, at load: a constant below,
 * which the control plane sets before it loads the programs
 * (internal/datapath, loadStage; 0 in the object), and the verifier removes
 * every line behind a 0. Within a build that has a stage, a bridge's (or a
 * port's) flag says whether its frames take it: that is configuration, read
 * from the maps, not a gate of the build.
 *
 *   stage    constant     in the build while          then taken by the frames of
 *   -------  -----------  --------------------------  ------------------------------
 *   VLAN     vlan_aware   some bridge is VLAN-aware   bridges with TR_BRIDGE_VLAN
 *   filter   filter_on    some bridge filters         bridges with TR_BRIDGE_FILTER
 *                                                     (TR_BRIDGE_FILTER_OUT: copy by copy)
 *   capture  capture_on   a capture runs              the captured port's bridge
 *                                                     (and those patched to it)
 *
 * Eight builds (2 x 2 x 2), each an XDP and a tc entry point, each loaded
 * when its mode is first needed in its build (and again, for a larger table
 * or a shorter refresh, by a resize); the two devmap programs
 * (trestle_vlan_egress, trestle_patch_egress) are loaded by their first
 * use, and have no stage.
 *
 *   build (vlan, filter, capture)   XDP entry            tc entry            memo
 *   0 0 0, 1 0 0                    trestle_xdp          trestle_tc          yes
 *   0 0 1, 1 0 1                    trestle_xdp          trestle_tc          no
 *   0 1 x, 1 1 x                    trestle_xdp_filter   trestle_tc_filter   no
 *
 * The filter's constant has entry points of its own to go with it (the
 * daemon loads trestle_*_filter exactly when it sets filter_on): the code
 * inlined in an entry point is compiled with the stage as a C constant, so
 * the programs without it are compiled as if it did not exist. A test of
 * filter_on there instead cost a forwarded frame 2.5 to 5 ns of the
 * compiler's register allocation (docs/performance.md, issue 14), and in
 * tr_run it took the tc build with the VLAN stage over the verifier's limit
 * (issue 27). The global functions (verified once, shared by both kinds of
 * entry point) test filter_on itself.
 *
 * Always in every build, gated by configuration alone: patch ports
 * (TR_BRIDGE_PATCH), mirrors (TR_BRIDGE_MIRROR), port policies
 * (TR_BRIDGE_POLICY), storm control (TR_PORT_STORM); and the decision memo
 * (lib/memo.h) in the builds without the filter or capture.
 */
#ifndef TRESTLE_STAGES_H
#define TRESTLE_STAGES_H

#include <linux/types.h>

const volatile __u8 vlan_aware = 0;
const volatile __u8 filter_on = 0;
const volatile __u8 capture_on = 0;

#endif
