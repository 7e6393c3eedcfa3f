// Package config reads and checks the router's config.yaml.
//
// # Pipeline
//
// [Parse] is a pure function from bytes to a [*Config]. It walks the
// yaml.v3 node tree itself rather than decoding into structs, because a
// custom UnmarshalYAML that calls node.Decode loses KnownFields
// (go-yaml/yaml#460) and because every node carries its line and column.
// Parse reports every problem it finds at once, each as
// "file:line:column: message", joined with [errors.Join]: unknown keys
// (with the nearest known key when one is close), duplicate keys, wrong
// types, bad values and broken references between sections. A config with
// any error is never returned, so a bad config applies nothing.
//
// Every top-level key is implemented: hardware, ports, interfaces, routes,
// status and state_dir (parse.go), nat and firewall (nat.go), dns and host
// (services.go), an interface's ipv6 (ipv6.go), and macsec, the SecYs with
// static keys or MKA (macsec.go, mka.go; the SecY itself is package macsec,
// MKA package mka).
//
// [Config.Validate] holds the checks that do not need YAML (ranges,
// references, overlaps). Parse runs it; code that builds a Config by hand
// (the lab) can run it too.
//
// # Positions
//
// Every item keeps the position of its YAML mapping in Pos, and
// [Config.Errorf] builds an [*Error] that names the config line, so errors
// found later, while applying the config, still point at the file.
//
// # Limits
//
// A config may expand to at most [MaxNodes] YAML nodes and
// [MaxValueBytes] bytes of values, counting an alias's anchor each time it
// is used, so a few KB of nested aliases cannot cost seconds and GB; the
// error names the alias that passed the limit. Messages quote at most 80
// bytes of a value ("aaaa…" (10485760 bytes)) and list the first 50
// problems by position, then "and N more problems from here on".
//
// # Syntax errors
//
// yaml.v3 reports a syntax error's line without a column, often one line
// early or at the start of the enclosing block; Parse finds the problem's
// line and column by reparsing prefixes of the file (syntax.go).
package config
