package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Pos is a position in a config file. Line and Col count from 1; the zero
// Pos means "unknown" (a Config built in code).
type Pos struct {
	Line int // 12
	Col  int // 5
}

// IsValid reports whether p names a position.
func (p Pos) IsValid() bool { return p.Line > 0 }

// String returns "line:col", e.g. "12:5".
func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Error is one config problem at one position. Its text is
// "file:line:col: message", e.g. "config.yaml:12:5: vlan: not supported by
// this version". Parse and Validate return several of them joined with
// errors.Join; use errors.As to get at one.
type Error struct {
	File string // "config.yaml"; "" for a Config built in code
	Pos  Pos    // where in File; zero if unknown
	Err  error  // the problem, without position
}

// Error implements error.
func (e *Error) Error() string {
	switch {
	case e.File != "" && e.Pos.IsValid():
		return fmt.Sprintf("%s:%d:%d: %v", e.File, e.Pos.Line, e.Pos.Col, e.Err)
	case e.Pos.IsValid():
		return fmt.Sprintf("%d:%d: %v", e.Pos.Line, e.Pos.Col, e.Err)
	case e.File != "":
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return e.Err.Error()
}

// Unwrap returns the underlying problem.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error at pos in c's file, for problems found after
// parsing (for example while applying the config):
//
//	c.Errorf(ifc.Pos, "interface %s: %w", ifc.Name, err)
func (c *Config) Errorf(pos Pos, format string, args ...any) error {
	return &Error{File: c.File, Pos: pos, Err: fmt.Errorf(format, args...)}
}

// errorList collects problems in one file. It keeps the maxErrors first
// problems by position and counts the rest, so a file with millions of
// problems costs no more than one with fifty.
type errorList struct {
	file string
	errs []listed // at most maxErrors, in the order found
	n    int      // problems found, kept or not
	// worst indexes the kept problem that sorts last; valid iff
	// len(errs) == maxErrors.
	worst int
	// dropped is the position of the first problem not kept.
	dropped Pos
}

// listed is a kept problem; seq orders problems at one position as found.
type listed struct {
	e   *Error
	seq int
}

func before(a, b Pos) bool {
	return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
}

func (l *errorList) add(pos Pos, format string, args ...any) {
	l.n++
	if len(l.errs) == maxErrors && !before(pos, l.errs[l.worst].e.Pos) {
		l.drop(pos)
		return // not formatted: it would not be shown
	}
	err := fmt.Errorf(format, args...)
	if msg := err.Error(); len(msg) > maxEcho+2 {
		if short := shorten(msg); len(short) < len(msg) {
			err = &shortError{short, err}
		}
	}
	e := listed{&Error{File: l.file, Pos: pos, Err: err}, l.n}
	if len(l.errs) < maxErrors {
		l.errs = append(l.errs, e)
		if len(l.errs) == maxErrors {
			l.findWorst()
		}
		return
	}
	l.drop(l.errs[l.worst].e.Pos)
	l.errs[l.worst] = e
	l.findWorst()
}

func (l *errorList) drop(pos Pos) {
	if l.n-len(l.errs) == 1 || before(pos, l.dropped) {
		l.dropped = pos
	}
}

func (l *errorList) findWorst() {
	l.worst = 0
	for i, e := range l.errs {
		w := l.errs[l.worst]
		if before(w.e.Pos, e.e.Pos) || w.e.Pos == e.e.Pos && e.seq > w.seq {
			l.worst = i
		}
	}
}

// err returns the kept problems sorted by position, then, if some were
// not kept, "and N more problems" at the first of those; joined, or nil.
func (l *errorList) err() error {
	if l.n == 0 {
		return nil
	}
	slices.SortFunc(l.errs, func(a, b listed) int {
		if c := cmp.Compare(a.e.Pos.Line, b.e.Pos.Line); c != 0 {
			return c
		}
		if c := cmp.Compare(a.e.Pos.Col, b.e.Pos.Col); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	errs := make([]error, 0, len(l.errs)+1)
	for _, e := range l.errs {
		errs = append(errs, e.e)
	}
	if more := l.n - len(l.errs); more > 0 {
		errs = append(errs, &Error{File: l.file, Pos: l.dropped,
			Err: fmt.Errorf("and %d more %s from here on (only the first %d are listed)", more, plural(more, "problem"), maxErrors)})
	}
	return errors.Join(errs...)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
