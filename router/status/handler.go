package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newHandler builds the read-only handler: three exact paths, GET and HEAD
// only, with headers that forbid caching, sniffing and framing.
func (s *Server) newHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", s.servePage)
	mux.HandleFunc("/api/status", s.serveJSON)
	mux.HandleFunc("/api/conntrack", s.serveConntrack)
	mux.HandleFunc("/api/history", s.serveHistory)
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
		// The page has inline CSS and one inline script, allowed by its
		// hash (so no injected script could run), which may fetch from
		// this server only. Nothing else: no images, frames or forms
		// elsewhere.
		h.Set("Content-Security-Policy", pageCSP)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// pageTableAuto is the most flows for which the page shows the conntrack
// table unasked. Past it the page links to it (?table=1): without
// JavaScript the page reloads every 2 s, and sorting a full 65,536-flow
// table for each reload would keep a BCM47094 core busy. (The script never
// reloads the table: it is a query, shown as of the page's load.)
const pageTableAuto = 1000

// pageData is what the page template renders: the latest sample and, when
// the router tracks connections, one page of the conntrack table.
type pageData struct {
	*Snapshot
	Table      *ConntrackPage
	TableError string
}

// HostName returns the name of the DHCP lease of the host with the MAC
// address mac, "" when it has none.
func (d pageData) HostName(mac string) string {
	for _, srv := range d.DHCPServers {
		for _, l := range srv.Leases {
			if l.MAC.String() == mac && l.Hostname != "" {
				return l.Hostname
			}
		}
	}
	return ""
}

// TableHidden reports whether the page leaves the table out until asked.
func (d pageData) TableHidden() bool {
	return d.Conntrack != nil && d.Table == nil && d.TableError == ""
}

func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	d := pageData{Snapshot: s.current()}
	uq := r.URL.Query()
	asked := uq.Has("table") || uq.Has("addr") || uq.Has("page")
	if d.Conntrack != nil && (asked || d.Conntrack.Flows <= pageTableAuto) {
		q, err := ParseTableQuery(uq.Get("addr"), uq.Get("page"))
		if err == nil {
			d.Table, err = s.table(q)
		}
		if err != nil && !errors.Is(err, errNoConntrack) {
			d.TableError = err.Error()
		}
	}
	if err := pageTemplate.Execute(&buf, d); err != nil {
		s.log.Error("status: rendering page", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

func (s *Server) serveJSON(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, s.current())
}

// serveConntrack serves one page of the conntrack table:
// /api/conntrack?addr=192.168.1.10&page=2.
func (s *Server) serveConntrack(w http.ResponseWriter, r *http.Request) {
	q, err := ParseTableQuery(r.URL.Query().Get("addr"), r.URL.Query().Get("page"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p, err := s.table(q)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	s.writeJSON(w, p)
}

// serveHistory serves the rates of the last HistoryLen samples, or of
// those after one the client has: /api/history?since=5120.
func (s *Server) serveHistory(w http.ResponseWriter, r *http.Request) {
	after, err := parseSince(r.URL.Query().Get("since"))
	if err != nil {
		http.Error(w, "since: want a sample number", http.StatusBadRequest)
		return
	}
	s.current() // a fresh sample when Run is not running
	// Compact: 900 points a series would be mostly indentation.
	b, err := json.Marshal(s.hist.since(after, s.interval))
	if err != nil {
		s.log.Error("status: encoding history", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}

func (s *Server) writeJSON(w http.ResponseWriter, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		s.log.Error("status: encoding json", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}
