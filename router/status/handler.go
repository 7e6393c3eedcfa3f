package status

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newHandler builds the read-only handler: three exact paths, GET and HEAD
// only, with headers that forbid caching, sniffing and framing.
func (s *Server) newHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", s.servePage)
	mux.HandleFunc("/api/status", s.serveJSON)
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
		ErrorLog:      promLogger{s.log},
		ErrorHandling: promhttp.ContinueOnError,
	}))
	return readOnly(mux)
}

// readOnly rejects every method but GET and HEAD and sets the headers every
// response carries.
func readOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		// The page has inline CSS only: no scripts, images or fetches.
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, s.current()); err != nil {
		s.log.Error("status: rendering page", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

func (s *Server) serveJSON(w http.ResponseWriter, r *http.Request) {
	b, err := json.MarshalIndent(s.current(), "", "  ")
	if err != nil {
		s.log.Error("status: encoding json", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}
