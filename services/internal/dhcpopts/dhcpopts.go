// Package dhcpopts checks the option areas of a DHCPv4 message before
// the wire library reads it. github.com/insomniacslk/dhcp accepts
// options without the end option and never looks at the sname and file
// fields an option overload (52) puts options in, so a message whose
// options are cut short or overflow their field would be served as if it
// were whole; the router's DHCP server and client drop those instead.
package dhcpopts

import "errors"

// Offsets in a BOOTP message (RFC 951, RFC 2131 §2).
const (
	snameAt   = 44
	fileAt    = 108
	optionsAt = 240 // after the 236-byte header and the magic cookie
)

// Option codes.
const (
	pad      = 0
	overload = 52
	end      = 255
)

// Errors WellFormed returns.
var (
	ErrShort    = errors.New("dhcpopts: shorter than a BOOTP header and magic cookie")
	ErrOverrun  = errors.New("dhcpopts: an option runs past the end of its field")
	ErrNoEnd    = errors.New("dhcpopts: options without the end option")
	ErrOverload = errors.New("dhcpopts: option overload (52) is not 1, 2 or 3")
)

// WellFormed reports whether msg (a whole DHCP message, the magic cookie
// already checked) has well-formed options: every option inside its
// field, the options field ended by the end option (RFC 2132 §3.2), and,
// under an option overload, the file and sname fields holding well-formed
// options ended by the end option too (RFC 2131 §4.1).
func WellFormed(msg []byte) error {
	if len(msg) < optionsAt {
		return ErrShort
	}
	ov, err := walk(msg[optionsAt:])
	if err != nil {
		return err
	}
	switch ov {
	case 0:
		return nil
	case 1, 2, 3:
	default:
		return ErrOverload
	}
	if ov&1 != 0 { // file
		if _, err := walk(msg[fileAt : optionsAt-4]); err != nil {
			return err
		}
	}
	if ov&2 != 0 { // sname
		if _, err := walk(msg[snameAt:fileAt]); err != nil {
			return err
		}
	}
	return nil
}

// walk checks one option field and returns the value of an option
// overload in it (0 if none; -1 if its length is not 1).
func walk(b []byte) (int, error) {
	ov := 0
	for i := 0; i < len(b); {
		code := b[i]
		switch code {
		case pad:
			i++
			continue
		case end:
			return ov, nil
		}
		if i+1 >= len(b) || i+2+int(b[i+1]) > len(b) {
			return 0, ErrOverrun
		}
		n := int(b[i+1])
		if code == overload {
			ov = -1
			if n == 1 {
				ov = int(b[i+2])
			}
		}
		i += 2 + n
	}
	return 0, ErrNoEnd
}
