package config

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Bounds on what a config file may cost to read. A config is a few KB of
// YAML; these keep a hostile or broken file from costing the router more
// than a fraction of a second and a few tens of MB, on a 256 MB board.
const (
	// MaxNodes bounds the YAML nodes of a config as the decoder sees them:
	// an alias counts its target's nodes each time it is used, since
	// decoding walks the target again. 65,536 holds 4,094 VLAN interfaces
	// (~12 nodes each) or 5,000 port forwards (~9 nodes each) with room to
	// spare, while a few KB of nested aliases (`a: &a [..]`, `b: &b [*a,
	// *a, ..]`, ...) would otherwise expand to millions of SAs.
	MaxNodes = 1 << 16
	// MaxValueBytes bounds the bytes of all scalar values, aliases
	// expanded likewise: a value may reach an error message once per use.
	// 16 MiB lets one oversized value through to an error that names it.
	MaxValueBytes = 16 << 20

	// maxEcho is how many bytes of a value an error message quotes; longer
	// values are cut, with an ellipsis and their length. 80 keeps each
	// problem on one terminal line.
	maxEcho = 80
	// maxErrors is how many problems an error lists; the rest are counted
	// ("and 12 more problems"). A person fixes a config from the top, and
	// a file that makes every node a problem must not make an error of
	// millions of lines.
	maxErrors = 50
)

// cost is what a node costs to decode: its nodes and value bytes, aliases
// expanded. Both saturate just past the limits.
type cost struct{ nodes, bytes int64 }

func (c cost) over() bool { return c.nodes > MaxNodes || c.bytes > MaxValueBytes }

func (c cost) plus(o cost) cost {
	return cost{min(c.nodes+o.nodes, MaxNodes+1), min(c.bytes+o.bytes, MaxValueBytes+1)}
}

// budget walks a document in order, counting every node as the decoder
// will visit it (aliases expanded), and reports the first node where the
// count passes MaxNodes or MaxValueBytes. Subtree costs are memoized, so
// the walk itself is linear in the file however far aliases expand.
type budget struct {
	memo  map[*yaml.Node]cost
	busy  map[*yaml.Node]bool // on the current path: an alias to one is a cycle
	total cost
	cycle *yaml.Node // the first alias found inside its own anchor, or nil
}

// checkBudget reports whether root is within the limits; if not, it
// reports the node (usually an alias) where the limit was passed.
func (d *decoder) checkBudget(root *yaml.Node) bool {
	b := &budget{memo: make(map[*yaml.Node]cost), busy: make(map[*yaml.Node]bool)}
	n := b.walk(root)
	if n == nil {
		return true
	}
	what := fmt.Sprintf("%d nodes", MaxNodes)
	if b.total.bytes > MaxValueBytes {
		what = fmt.Sprintf("%d bytes of values", MaxValueBytes)
	}
	if b.cycle != nil {
		d.errorf(b.cycle, "yaml: alias *%s is inside its own anchor", echo(b.cycle.Value))
		return false
	}
	if n.Kind == yaml.AliasNode {
		d.errorf(n, "yaml: alias *%s expands the config past %s (an alias counts its anchor's content each time it is used)", echo(n.Value), what)
		return false
	}
	d.errorf(n, "yaml: the config is larger than %s", what)
	return false
}

// walk adds n and its content to b.total in document order and returns
// the node at which the total went over a limit, or nil.
func (b *budget) walk(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.AliasNode {
		b.total = b.total.plus(b.cost(n))
		if b.total.over() {
			return n
		}
		return nil
	}
	b.total = b.total.plus(cost{1, int64(len(n.Value))})
	if b.total.over() {
		return n
	}
	b.busy[n] = true
	defer delete(b.busy, n)
	for _, c := range n.Content {
		if at := b.walk(c); at != nil {
			return at
		}
	}
	return nil
}

// cost returns what n costs, aliases expanded; an alias cycle costs more
// than any limit.
func (b *budget) cost(n *yaml.Node) cost {
	if n == nil {
		return cost{1, 0}
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil || b.busy[n.Alias] {
			if b.cycle == nil && n.Alias != nil {
				b.cycle = n
			}
			return cost{MaxNodes + 1, 0}
		}
		return cost{1, 0}.plus(b.cost(n.Alias))
	}
	if c, ok := b.memo[n]; ok {
		return c
	}
	b.busy[n] = true
	c := cost{1, int64(len(n.Value))}
	for _, k := range n.Content {
		if c = c.plus(b.cost(k)); c.over() {
			break
		}
	}
	delete(b.busy, n)
	b.memo[n] = c
	return c
}

// quote returns s quoted as %q does, cut to maxEcho bytes (at a character
// boundary) with an ellipsis and its length when it is longer:
// "aaaa…" (10485760 bytes).
func quote(s string) string {
	if len(s) <= maxEcho {
		return strconv.Quote(s)
	}
	return strconv.Quote(cut(s)) + fmt.Sprintf("… (%d bytes)", len(s))
}

// echo is quote without the quotes, for values printed bare (integers,
// anchor names): 999…9… (100 bytes).
func echo(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", cut(s), len(s))
}

// cut returns the longest prefix of s of at most maxEcho bytes that ends
// at a character boundary.
func cut(s string) string {
	i := min(len(s), maxEcho)
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// shorten cuts every quoted string in msg that is longer than maxEcho, as
// quote does. errorList.add applies it to every message, so the many
// messages that quote a value with %q (directly or through an error from a
// value parser) stay short.
func shorten(msg string) string {
	if len(msg) <= maxEcho+2 {
		return msg // no room for a quoted string longer than maxEcho
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		j := strings.IndexByte(msg[i:], '"')
		if j < 0 {
			b.WriteString(msg[i:])
			break
		}
		b.WriteString(msg[i : i+j])
		i += j
		q, err := strconv.QuotedPrefix(msg[i:])
		if err != nil {
			b.WriteByte('"')
			i++
			continue
		}
		if s, err := strconv.Unquote(q); err == nil && len(s) > maxEcho {
			b.WriteString(quote(s))
		} else {
			b.WriteString(q)
		}
		i += len(q)
	}
	return b.String()
}

// shortError is an error whose message was shortened; it unwraps to the
// original.
type shortError struct {
	msg string
	err error
}

func (e *shortError) Error() string { return e.msg }
func (e *shortError) Unwrap() error { return e.err }
