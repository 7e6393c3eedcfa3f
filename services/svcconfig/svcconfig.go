// Package svcconfig is what a service's Config.Validate returns: field
// errors that name the config key they are about, so that router/config
// can point at the line of config.yaml that set it (file:line:col).
//
// A service's Config is the one place its rules live. The router decodes
// the service's YAML section, builds that Config and calls Validate; it
// restates none of the checks. Keys are the YAML keys of the service's
// section, dot-separated, list elements by index ("range",
// "static.1.address", "cache.max_ttl"); a field no config key sets is
// named by its Go name in snake case ("server_addr").
package svcconfig

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FieldError is one problem Validate found, with the key it is about.
type FieldError struct {
	// Service names the service package, e.g. "dhcp4server".
	Service string
	// Key is the key path below the service's section, e.g.
	// "static.1.address"; "" for the section as a whole.
	Key string
	// Other is the key this one clashes with, e.g. "static.0.mac" for a
	// MAC listed twice; "" when none.
	Other string
	// Msg says what is wrong without naming the key, e.g.
	// "192.168.1.150 lies inside the range 192.168.1.100-192.168.1.199".
	Msg string
}

// Error implements error: "dhcp4server: static.1.address: ...".
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.Service)
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Other != "" {
		b.WriteString(" (also " + e.Other + ")")
	}
	return b.String()
}

// List collects a Validate's problems in the order found. The zero List
// is ready; it is not safe for concurrent use.
type List struct {
	service string
	errs    []*FieldError
}

// NewList returns a List whose errors name service.
func NewList(service string) *List { return &List{service: service} }

// Add records a problem of key.
func (l *List) Add(key, format string, args ...any) {
	l.errs = append(l.errs, &FieldError{Service: l.service, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// AddClash records a problem of key that repeats other.
func (l *List) AddClash(key, other, format string, args ...any) {
	l.errs = append(l.errs, &FieldError{Service: l.service, Key: key, Other: other, Msg: fmt.Sprintf(format, args...)})
}

// Err returns the problems joined (errors.Join; each one a *FieldError),
// or nil.
func (l *List) Err() error {
	errs := make([]error, len(l.errs))
	for i, e := range l.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// Key joins a key path: Key("static", 1, "address") = "static.1.address".
func Key(parts ...any) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		switch v := p.(type) {
		case int:
			s[i] = strconv.Itoa(v)
		default:
			s[i] = fmt.Sprint(v)
		}
	}
	return strings.Join(s, ".")
}

// Fields returns the FieldErrors in err (as Validate returns it, or
// wrapped), in order.
func Fields(err error) []*FieldError {
	fields, _ := split(err)
	return fields
}

// Others returns the errors in err that hold no FieldError, e.g. a
// wrapped I/O error, in order.
func Others(err error) []error {
	_, others := split(err)
	return others
}

func split(err error) (fields []*FieldError, others []error) {
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *FieldError:
			fields = append(fields, e)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		default:
			var fe *FieldError
			switch u, ok := err.(interface{ Unwrap() error }); {
			case !errors.As(err, &fe):
				others = append(others, err)
			case ok:
				walk(u.Unwrap()) // a wrapped List.Err
			default:
				fields = append(fields, fe)
			}
		}
	}
	walk(err)
	return fields, others
}

// Duration writes d as config files do, without zero units: "8760h",
// "1h30m", "10s".
func Duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// Split returns the first element of a key path and the rest:
// Split("static.1.address") = "static", "1.address".
func Split(key string) (first, rest string) {
	first, rest, _ = strings.Cut(key, ".")
	return first, rest
}

// Index returns the list index at the start of rest ("1.address" -> 1,
// "address"); ok is false when rest does not start with one.
func Index(rest string) (i int, sub string, ok bool) {
	n, sub, _ := strings.Cut(rest, ".")
	i, err := strconv.Atoi(n)
	return i, sub, err == nil && i >= 0
}
