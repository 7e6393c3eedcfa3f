package config

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// yaml.v3 gives a syntax error's line but no column, and the line is not
// always the problem's: a parser error names the line where the enclosing
// block or flow collection starts, counted from 0 ("did not find expected
// key" for a line 40 of a mapping that starts at line 2 says "line 1"); a
// scanner error names the token's first line, counted from 1; an unknown
// anchor has no line at all. The scanner and parser stream, so a prefix of
// the file fails with the same message once it holds the problem, and
// not (or with another message) before: syntaxPos searches for the
// shortest such prefix, first by lines, then within the line.

// maxLocate bounds the files whose syntax errors are located by reparsing
// prefixes: about 2·log2(size) parses, 0.1 s at the limit on the
// development VM. Configs are a few KB; a larger file gets yaml.v3's own
// line.
const maxLocate = 64 << 10

var yamlMsgRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// syntaxMessage splits a yaml.v3 error into the line it names (0 if none)
// and its message without position.
func syntaxMessage(err error) (line int, msg string, ok bool) {
	m := yamlMsgRE.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, "", false
	}
	if m[1] != "" {
		line, _ = strconv.Atoi(m[1])
	}
	return line, m[2], true
}

// firstSyntaxError returns the message of the first error yaml.v3 finds
// in data, decoding every document as Parse does, or "".
func firstSyntaxError(data []byte) string {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return ""
		}
		if err != nil {
			if _, msg, ok := syntaxMessage(err); ok {
				return msg
			}
			return err.Error()
		}
	}
}

// syntaxPos returns the position of the syntax error msg that yaml.v3
// reported at line (0 if it named none) in data.
func syntaxPos(data []byte, line int, msg string) Pos {
	if len(data) > maxLocate {
		return Pos{max(line, 1), 1}
	}
	fails := func(n int) bool { return firstSyntaxError(data[:n]) == msg }
	// ends[k] is the length of the first k+1 lines with their newlines.
	var ends []int
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	// The problem is at or after the line yaml.v3 names (which is one
	// less than the enclosing collection's 1-based line, or the token's).
	lo, hi := max(line, 1)-1, len(ends)-1
	if lo > hi {
		lo = hi
	}
	if !fails(ends[hi]) {
		return Pos{max(line, 1), 1} // not reproducible: keep yaml.v3's line
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if fails(ends[mid]) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	start := 0
	if lo > 0 {
		start = ends[lo-1]
	}
	text := strings.TrimRight(string(data[start:ends[lo]]), "\r\n")
	pos := Pos{lo + 1, firstCol(text)}
	// Within the line: the shortest prefix that fails ends with the
	// character where the problem was found.
	clo, chi := start+1, start+len(text)
	if chi < clo || !fails(chi) {
		return pos
	}
	for clo < chi {
		mid := (clo + chi) / 2
		if fails(mid) {
			chi = mid
		} else {
			clo = mid + 1
		}
	}
	col := clo - start // the last byte of the prefix, counted from 1
	if name, ok := strings.CutPrefix(msg, "unknown anchor '"); ok {
		// Found at the alias's last character; point at its '*'.
		name, _, _ = strings.Cut(name, "'")
		if i := strings.LastIndex(text[:col], "*"+name); i >= 0 {
			col = i + 1
		}
	}
	if text[col-1] == ':' && (msg == "did not find expected key" || msg == "did not find expected '-' indicator") {
		// A key is a key only once its ':' is seen, but the problem is
		// the key where a '-' (or a key at another indentation) belongs.
		col = firstCol(text)
	}
	pos.Col = col
	return pos
}

// firstCol returns the 1-based column of the first character of line
// that is not a space, or 1.
func firstCol(line string) int {
	if i := strings.IndexFunc(line, func(r rune) bool { return r != ' ' }); i >= 0 {
		return i + 1
	}
	return 1
}
