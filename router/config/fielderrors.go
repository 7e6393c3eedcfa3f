package config

import "github.com/gvrouter/gvrouter/services/svcconfig"

// A service's rules live in its package, as its Config's Validate (see
// services/svcconfig). The checks below cover only what the service
// cannot see: the interface it runs on, the other sections, and keys
// written but unusable. addFieldErrors turns the service's field errors
// into file:line:col errors at the keys that set them.

// keyPositions says where a service section's keys were written.
type keyPositions interface {
	// keyPos returns where the key path (e.g. "static.1.address") was
	// written: the key itself, else its list element, else the section.
	keyPos(key string) Pos
	// decodeFailed reports whether key was already reported while
	// decoding (a value of the wrong form, or a required key missing),
	// so that the service's complaint about the zero it left would only
	// repeat that.
	decodeFailed(key string) bool
}

// addFieldErrors adds the *svcconfig.FieldError problems of err, each at
// its key's position, as "WHAT: KEY: problem". Other errors in err are
// added at the section's position.
func addFieldErrors(l *errorList, err error, what string, sec keyPositions) {
	if err == nil {
		return
	}
	for _, fe := range svcconfig.Fields(err) {
		if sec.decodeFailed(fe.Key) {
			continue
		}
		msg := fe.Msg
		if fe.Other != "" {
			msg += atLine(sec.keyPos(fe.Other))
		}
		if fe.Key == "" {
			l.add(sec.keyPos(""), "%s: %s", what, msg)
			continue
		}
		l.add(sec.keyPos(fe.Key), "%s: %s: %s", what, fe.Key, msg)
	}
	for _, e := range svcconfig.Others(err) {
		l.add(sec.keyPos(""), "%s: %v", what, e)
	}
}
