package config

import "gopkg.in/yaml.v3"

// Helpers that read yaml.v3 nodes and report problems at their position.

// deref follows aliases to the node they name.
func (d *decoder) deref(n *yaml.Node) *yaml.Node {
	orig := n
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i == 8 {
			d.errorf(orig, "alias chain too long")
			return nil
		}
		n = n.Alias
	}
	if n == nil {
		d.errorf(orig, "alias to nothing")
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return quote(n.Value)
	}
	return "an unexpected node"
}

// entry is one key: value pair of a mapping.
type entry struct{ key, val *yaml.Node }

// mapping checks n's keys and returns the known ones by name. It reports
// non-string keys, merge keys, duplicate keys, unsupported keys and
// unknown keys (with a suggestion). what names the mapping in messages.
func (d *decoder) mapping(n *yaml.Node, what string, known, unsupported []string) map[string]entry {
	out := make(map[string]entry)
	seen := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		v := d.deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, "%s: keys must be plain names, got %s", what, kindName(k))
			continue
		}
		if k.Tag == "!!merge" {
			d.errorf(k, "%s: merge keys (<<) are not supported", what)
			continue
		}
		name := k.Value
		if prev, ok := seen[name]; ok {
			d.errorf(k, "%s: duplicate key %q (first at line %d)", what, name, prev.Line)
			continue
		}
		seen[name] = k
		switch {
		case contains(known, name):
			if v != nil {
				out[name] = entry{k, v}
			}
		case contains(unsupported, name):
			d.errorf(k, "%s: %s", name, errNotSupportedSuffix)
		default:
			d.errorf(k, "%s: unknown key %q%s", what, name, hint(name, known))
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// str decodes a scalar as a string. ok is false (and a problem reported)
// for lists, mappings and null.
func (d *decoder) str(e entry, what string) (string, bool) {
	if e.val.Kind != yaml.ScalarNode || isNull(e.val) {
		d.errorf(e.val, "%s: %s: want a string, got %s", what, e.key.Value, kindName(e.val))
		return "", false
	}
	return e.val.Value, true
}

// int decodes a scalar tagged !!int.
func (d *decoder) int(e entry, what string) (int, bool) {
	if e.val.Kind != yaml.ScalarNode || e.val.Tag != "!!int" {
		d.errorf(e.val, "%s: %s: want an integer, got %s", what, e.key.Value, kindName(e.val))
		return 0, false
	}
	var v int64
	if err := e.val.Decode(&v); err != nil || v < -1<<31 || v > 1<<31-1 {
		d.errorf(e.val, "%s: %s: integer %s out of range", what, e.key.Value, echo(e.val.Value))
		return 0, false
	}
	return int(v), true
}

// list returns the items of a sequence; null is the empty list.
func (d *decoder) list(e entry, what string) ([]*yaml.Node, bool) {
	if isNull(e.val) {
		return nil, true
	}
	if e.val.Kind != yaml.SequenceNode {
		d.errorf(e.val, "%s: %s: want a list, got %s", what, e.key.Value, kindName(e.val))
		return nil, false
	}
	items := make([]*yaml.Node, 0, len(e.val.Content))
	for _, it := range e.val.Content {
		if it = d.deref(it); it != nil {
			items = append(items, it)
		}
	}
	return items, true
}

// object checks that n is a mapping.
func (d *decoder) object(n *yaml.Node, what string) bool {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, "%s: want a mapping, got %s", what, kindName(n))
		return false
	}
	return true
}

// objects decodes the list under key in m, if there is one, calling
// decode for each item that is a mapping; section names the list's
// parent and what an item in errors.
func objects[T any](d *decoder, m map[string]entry, key, section, what string, decode func(*yaml.Node) T) []T {
	e, ok := m[key]
	if !ok {
		return nil
	}
	items, _ := d.list(e, section)
	var out []T
	for _, it := range items {
		if d.object(it, what) {
			out = append(out, decode(it))
		}
	}
	return out
}

// strKey decodes the string under key in m into *dst and records where it
// was written in s. A value of the wrong type is reported and its key
// marked bad, so later checks do not report it again. ok is true iff *dst
// was set.
func (d *decoder) strKey(m map[string]entry, key, what string, s *src, dst *string) (ok bool) {
	e, found := m[key]
	if !found {
		return false
	}
	s.set(key, posOf(e.val))
	v, ok := d.str(e, what)
	if !ok {
		s.markBad(key)
		return false
	}
	*dst = v
	return true
}

// intKey is strKey for integers.
func (d *decoder) intKey(m map[string]entry, key, what string, s *src, dst *int) (ok bool) {
	e, found := m[key]
	if !found {
		return false
	}
	s.set(key, posOf(e.val))
	v, ok := d.int(e, what)
	if !ok {
		s.markBad(key)
		return false
	}
	*dst = v
	return true
}
