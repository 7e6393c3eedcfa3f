package upnp

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// SOAP limits: a control request is a few hundred bytes; these bound
// what a hostile one costs.
const (
	maxSOAPBody   = 8 << 10
	maxSOAPTokens = 512
	maxSOAPDepth  = 8
	maxSOAPArgs   = 16
	maxArgLen     = 256
)

// Action is a parsed SOAP control request: the action's name and its
// arguments by name (UDA 1.1 section 3.2.1).
type Action struct {
	Name string
	Args map[string]string
}

// ErrSOAP is wrapped by ParseAction's errors.
var ErrSOAP = errors.New("upnp: bad SOAP request")

// ParseAction parses a SOAP envelope: Envelope, Body, then one action
// element whose child elements are the arguments. It refuses directives
// (DOCTYPE, so no entity games), more than maxSOAPTokens tokens, nesting
// deeper than maxSOAPDepth, more than maxSOAPArgs arguments and
// arguments longer than maxArgLen.
func ParseAction(b []byte) (Action, error) {
	var a Action
	if len(b) > maxSOAPBody {
		return a, fmt.Errorf("%w: %d bytes", ErrSOAP, len(b))
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.Strict = true
	var path []string
	var arg string
	var text strings.Builder
	for n := 0; ; n++ {
		if n >= maxSOAPTokens {
			return a, fmt.Errorf("%w: more than %d tokens", ErrSOAP, maxSOAPTokens)
		}
		tok, err := dec.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return a, fmt.Errorf("%w: %v", ErrSOAP, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(path) >= maxSOAPDepth {
				return a, fmt.Errorf("%w: nested deeper than %d", ErrSOAP, maxSOAPDepth)
			}
			path = append(path, t.Name.Local)
			switch len(path) {
			case 1:
				if t.Name.Local != "Envelope" {
					return a, fmt.Errorf("%w: root %q", ErrSOAP, t.Name.Local)
				}
			case 3:
				if path[1] == "Body" && a.Name == "" {
					a.Name, a.Args = t.Name.Local, map[string]string{}
				}
			case 4:
				if path[1] == "Body" && path[2] == a.Name {
					if len(a.Args) >= maxSOAPArgs {
						return a, fmt.Errorf("%w: more than %d arguments", ErrSOAP, maxSOAPArgs)
					}
					arg = t.Name.Local
					text.Reset()
				}
			}
		case xml.CharData:
			if arg != "" {
				if text.Len()+len(t) > maxArgLen {
					return a, fmt.Errorf("%w: argument %s longer than %d", ErrSOAP, arg, maxArgLen)
				}
				text.Write(t)
			}
		case xml.EndElement:
			if len(path) == 0 {
				return a, fmt.Errorf("%w: unbalanced", ErrSOAP)
			}
			if len(path) == 4 && arg != "" {
				a.Args[arg] = strings.TrimSpace(text.String())
				arg = ""
			}
			path = path[:len(path)-1]
		case xml.Directive:
			return a, fmt.Errorf("%w: directive", ErrSOAP)
		}
	}
	if len(path) != 0 || a.Name == "" {
		return a, fmt.Errorf("%w: no action", ErrSOAP)
	}
	return a, nil
}

const envelopeStart = `<?xml version="1.0"?>
<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/" s:encodingStyle="http://schemas.xmlsoap.org/soap/encoding/"><s:Body>`
const envelopeEnd = "</s:Body></s:Envelope>\r\n"

// actionResponse is the SOAP answer to action with the output
// arguments in order (name, value pairs).
func actionResponse(service, action string, out ...string) []byte {
	var b bytes.Buffer
	b.WriteString(envelopeStart)
	fmt.Fprintf(&b, `<u:%sResponse xmlns:u="%s">`, action, service)
	for i := 0; i+1 < len(out); i += 2 {
		fmt.Fprintf(&b, "<%s>", out[i])
		xml.EscapeText(&b, []byte(out[i+1]))
		fmt.Fprintf(&b, "</%s>", out[i])
	}
	fmt.Fprintf(&b, "</u:%sResponse>", action)
	b.WriteString(envelopeEnd)
	return b.Bytes()
}

// UPnP control errors (UDA 1.1 section 3.2.2, IGD WANIPConnection:1
// section 2.4).
const (
	errInvalidAction       = 401
	errInvalidArgs         = 402
	errActionFailed        = 501
	errNotAuthorized       = 606
	errArrayIndexInvalid   = 713
	errNoSuchEntry         = 714
	errWildCardExtPort     = 716
	errConflict            = 718
	errRemoteHostWildcard  = 726
	errNoPortMapsAvailable = 728
	errOnlyPermanentLeases = 725
)

var errText = map[int]string{
	errInvalidAction:       "Invalid Action",
	errInvalidArgs:         "Invalid Args",
	errActionFailed:        "Action Failed",
	errNotAuthorized:       "Action not authorized",
	errArrayIndexInvalid:   "SpecifiedArrayIndexInvalid",
	errNoSuchEntry:         "NoSuchEntryInArray",
	errWildCardExtPort:     "WildCardNotPermittedInExtPort",
	errConflict:            "ConflictInMappingEntry",
	errRemoteHostWildcard:  "RemoteHostOnlySupportsWildcard",
	errNoPortMapsAvailable: "NoPortMapsAvailable",
	errOnlyPermanentLeases: "OnlyPermanentLeasesSupported",
}

// faultResponse is the SOAP fault for UPnP error code.
func faultResponse(code int) []byte {
	return fmt.Appendf(nil, `%s<s:Fault><faultcode>s:Client</faultcode><faultstring>UPnPError</faultstring><detail><UPnPError xmlns="urn:schemas-upnp-org:control-1-0"><errorCode>%d</errorCode><errorDescription>%s</errorDescription></UPnPError></detail></s:Fault>%s`,
		envelopeStart, code, errText[code], envelopeEnd)
}
