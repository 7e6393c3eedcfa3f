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

// errorList collects problems in one file.
type errorList struct {
	file string
	errs []*Error
}

func (l *errorList) add(pos Pos, format string, args ...any) {
	l.errs = append(l.errs, &Error{File: l.file, Pos: pos, Err: fmt.Errorf(format, args...)})
}

// err returns all problems sorted by position, joined, or nil.
func (l *errorList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(l.errs, func(a, b *Error) int {
		if c := cmp.Compare(a.Pos.Line, b.Pos.Line); c != 0 {
			return c
		}
		return cmp.Compare(a.Pos.Col, b.Pos.Col)
	})
	errs := make([]error, len(l.errs))
	for i, e := range l.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}
