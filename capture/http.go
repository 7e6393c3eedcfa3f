package capture

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// HTTPHandler serves /api/capture?iface=…&count=…&seconds=…&snaplen=…&filter=…
// as a pcapng download. allow decides per request whether the caller may
// capture at all (the listener it came in on, a token); its error is the
// 403 answer. A capture in progress ends when the client goes away.
func HTTPHandler(m *Manager, allow func(*http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := allow(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		q := r.URL.Query()
		req := Request{Iface: q.Get("iface"), Filter: q.Get("filter")}
		for _, x := range []struct {
			name string
			v    *int
		}{{"count", &req.Count}, {"seconds", &req.Seconds}, {"snaplen", &req.Snaplen}} {
			s := q.Get(x.name)
			if s == "" {
				continue
			}
			n, err := strconv.Atoi(s)
			if err != nil {
				http.Error(w, fmt.Sprintf("capture: %s %q is not a number", x.name, s), http.StatusBadRequest)
				return
			}
			*x.v = n
		}
		start, _, err := m.Prepare(req)
		if err != nil {
			code := http.StatusBadRequest
			if errors.Is(err, ErrBusy) {
				code = http.StatusServiceUnavailable
			}
			http.Error(w, err.Error(), code)
			return
		}
		w.Header().Set("Content-Type", "application/x-pcapng")
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", req.Iface+".pcapng"))
		w.Header().Set("Cache-Control", "no-store")
		rc := http.NewResponseController(w)
		// The status server's write timeout is for pages, not for a
		// capture of up to MaxSeconds.
		secs := req.Seconds
		if secs == 0 {
			secs = DefaultSeconds
		}
		_ = rc.SetWriteDeadline(time.Now().Add(time.Duration(secs)*time.Second + 30*time.Second))
		fw := flushWriter{w: w, rc: rc}
		_, _ = start(r.Context(), fw)
	})
}

// flushWriter sends each pcapng write at once, so a live capture reaches
// the client as it happens.
type flushWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (f flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	if err == nil {
		_ = f.rc.Flush()
	}
	return n, err
}

// TokenFile is the file, in the run directory, whose content a request
// on a netstack listener must present to capture (TokenAllow).
const TokenFile = "capture.token"

// ErrNoToken is the refusal of a capture request on a listener that
// needs a token, when the token is missing, wrong, or the token file is
// absent or readable by others than its owner.
var ErrNoToken = errors.New("capture: refused: this listener needs the token from " + TokenFile + " (Authorization: Bearer TOKEN)")

// TokenAllow is an HTTPHandler allow function that wants the content of
// the file at path (mode 0600, owner only; read at each request, so it
// can be changed or removed while the router runs) as a bearer token.
func TokenAllow(path string) func(*http.Request) error {
	return func(r *http.Request) error {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm()&0o077 != 0 {
			return ErrNoToken
		}
		b, err := os.ReadFile(path)
		want := strings.TrimSpace(string(b))
		if err != nil || len(want) < 16 {
			return ErrNoToken
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return ErrNoToken
		}
		return nil
	}
}

// Refuse is an HTTPHandler allow function that refuses every request
// with err (a wan listener: nobody on the internet may capture).
func Refuse(err error) func(*http.Request) error {
	return func(*http.Request) error { return err }
}

// TrustOr is an HTTPHandler allow function that allows a request whose
// remote address trusted accepts (the machine itself) and leaves any
// other to other. Where a request comes from, not where the listener is
// bound, says who asks: a LAN host reaches a loopback-bound or host-TAP
// listener too, through the router's forwarding.
func TrustOr(trusted func(netip.Addr) bool, other func(*http.Request) error) func(*http.Request) error {
	return func(r *http.Request) error {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && trusted(ap.Addr().Unmap()) {
			return nil
		}
		return other(r)
	}
}
