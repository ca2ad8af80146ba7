package config

import (
	"fmt"
	"slices"
	"strings"
)

// patchPort is a patch port of a named bridge, for the checks across
// bridges.
type patchPort struct {
	from, peer string // bridge names
	field      string // bridge[0].port[1].patch
	line       int    // of its patch key
	ok         bool   // no error about the port
	aware      bool   // its bridge is VLAN-aware
	port       *Port
}

// vlanRule says how a patch port carries VLANs, for messages.
func (p *patchPort) vlanRule() string {
	switch {
	case !p.aware:
		return "no VLANs (the bridge is not VLAN-aware)"
	case p.port.IsTrunk() && p.port.Native != 0:
		return fmt.Sprintf("trunk %s, native %d", VLANRanges(p.port.Trunk), p.port.Native)
	case p.port.IsTrunk():
		return "trunk " + VLANRanges(p.port.Trunk)
	}
	return fmt.Sprintf("access VLAN %d", p.port.VLAN)
}

// patchGraph checks the patch ports of every bridge against each other:
// names is every bridge name, the first bridge that has it. Each peer is
// another bridge, which declares one patch back (both sides declare the
// pair, as with Open vSwitch's peer option). A pair joins its two bridges;
// the pair whose second port, in file order, would close a cycle or make a
// chain longer than MaxPatchChain bridges, or a tree of more, is refused,
// so the pairs accepted always form a forest of small trees. A frame keeps
// its VLAN across a patch: the two ends must carry the same VLANs the same
// way, and their bridges be both VLAN-aware or both not.
func (c *checker) patchGraph(names map[string]int) {
	type pair struct{ from, to string }
	first := map[pair]*patchPort{} // the first patch of a bridge to a peer
	order := map[*patchPort]int{}
	for i, p := range c.patches {
		order[p] = i
		k := pair{p.from, p.peer}
		_, known := names[p.peer]
		prev, dup := first[k]
		switch {
		case p.peer == p.from:
			c.errorf(p.line, p.field, "%q is this bridge: a patch joins two bridges", p.peer)
		case !known:
			c.errorf(p.line, p.field, "no bridge is named %q", p.peer)
		case dup:
			c.errorf(p.line, p.field, "bridge %s already has a patch to %s at line %d: two bridges are joined by one patch at most", p.from, p.peer, prev.line)
		default:
			first[k] = p
			continue
		}
		p.ok = false
	}
	var g forest
	for _, p := range c.patches {
		if first[pair{p.from, p.peer}] != p {
			continue
		}
		back := first[pair{p.peer, p.from}]
		switch {
		case back == nil:
			c.errorf(p.line, p.field, "bridge %s has no patch back to %s: declare patch = %q in bridge %s too", p.peer, p.from, p.from, p.peer)
			p.ok = false
			continue
		case order[back] > order[p]:
			continue // the pair is complete at back
		}
		// p completes the pair: it closes the cycle, or makes the chain,
		// that the pair would.
		if a, b := back.vlanRule(), p.vlanRule(); a != b && p.ok && back.ok {
			c.errorf(p.line, p.field, "the ends of the patch %s - %s carry VLANs differently (%s: %s; %s: %s): a patch does not translate VLANs, so both ends carry the same VLANs the same way", p.peer, p.from, p.peer, a, p.from, b)
			p.ok, back.ok = false, false
			continue
		}
		if path := g.path(p.peer, p.from); path != nil {
			c.errorf(p.line, p.field, "%s -> %s closes the cycle %s", p.from, p.peer, strings.Join(append(path, p.peer), " -> "))
			p.ok, back.ok = false, false
			continue
		}
		chain := g.farthest(p.peer)
		slices.Reverse(chain)
		chain = append(chain, g.farthest(p.from)...)
		if len(chain) > MaxPatchChain {
			c.errorf(p.line, p.field, "%s -> %s makes a chain of %d bridges: %s; at most %d may be joined by patches", p.from, p.peer, len(chain), strings.Join(chain, " -> "), MaxPatchChain)
			p.ok, back.ok = false, false
			continue
		}
		if tree, _ := g.walk(p.peer); len(tree)+len(g.nodes(p.from)) > MaxPatchChain {
			all := append(tree, g.nodes(p.from)...)
			c.errorf(p.line, p.field, "%s -> %s joins %d bridges by patches: %s; at most %d may be", p.from, p.peer, len(all), strings.Join(all, ", "), MaxPatchChain)
			p.ok, back.ok = false, false
			continue
		}
		g.join(p.from, p.peer)
	}
}

// nodes returns the bridges of b's tree, b first.
func (g forest) nodes(b string) []string {
	visited, _ := g.walk(b)
	return visited
}

// forest is the bridges joined by accepted patches, which have no cycle.
type forest map[string][]string // bridge -> its neighbours, in the order joined

func (g *forest) join(a, b string) {
	if *g == nil {
		*g = forest{}
	}
	(*g)[a] = append((*g)[a], b)
	(*g)[b] = append((*g)[b], a)
}

// walk visits the tree of from breadth first, and returns the bridges in
// the order visited and the bridge each was reached from.
func (g forest) walk(from string) (visited []string, parent map[string]string) {
	parent = map[string]string{from: ""}
	visited = []string{from}
	for i := 0; i < len(visited); i++ {
		for _, n := range g[visited[i]] {
			if _, seen := parent[n]; !seen {
				parent[n] = visited[i]
				visited = append(visited, n)
			}
		}
	}
	return visited, parent
}

// trail returns the bridges from the root of a walk to b, in that order.
func trail(parent map[string]string, b string) []string {
	var t []string
	for ; b != ""; b = parent[b] {
		t = append(t, b)
	}
	slices.Reverse(t)
	return t
}

// path returns the bridges from a to b, or nil when they are not joined.
func (g forest) path(a, b string) []string {
	_, parent := g.walk(a)
	if _, joined := parent[b]; !joined {
		return nil
	}
	return trail(parent, b)
}

// farthest returns the longest path from b within its tree, b first.
func (g forest) farthest(b string) []string {
	visited, parent := g.walk(b)
	return trail(parent, visited[len(visited)-1])
}
