// Package dnsforward is the router's DNS forwarder: it answers the LAN's
// queries from a cache, from its local names, or by asking the upstream
// resolvers, over UDP and TCP on the sockets the caller hands it.
//
// It never imports netstack or the router's config: the caller gives it
// listening sockets (Serve, ServeTCP: one per LAN address, several at
// once) or the functions that open them (Config.ListenUDP,
// Config.ListenTCP, so that SetListen can change the addresses while it
// runs, cache and all), dial functions for the upstream side
// (Config.DialUDP, Config.DialTCP), a clock and a random source. The router passes gonet
// sockets of its netstack; the tests and the benchmark pass kernel
// sockets.
//
// # Hot path
//
// A query is read as bytes (parseQuery): header, one uncompressed
// question and an optional OPT record. Its cache key is the lower-cased
// wire name, type, class and the DO and CD bits. A cache hit copies the
// cached answer's bytes into a per-goroutine buffer and patches the ID,
// flags, the question's case and each TTL (counted down by the seconds
// since it was stored) in place, then adds an OPT record for an EDNS
// client: no allocation on *net.UDPConn, whose ReadFromUDPAddrPort and
// WriteToUDPAddrPort take none either. Anything else (compressed
// questions, other opcodes, EDNS versions, malformed messages) goes to a
// slow path that unpacks with github.com/miekg/dns and answers FORMERR,
// NOTIMP, REFUSED or BADVERS, or drops it, counted.
//
// miekg/dns's Server is not used: it unpacks every query into a dns.Msg
// (a dozen allocations) and packs every reply, which is the cost this
// path avoids; the library stays the wire format of everything else (the
// slow path, upstream queries and answers, cache entries, local answers).
//
// # Cache
//
// Answers are kept whole, by question, in 16 shards of a map and an LRU
// list, bounded by Config.MaxEntries and Config.MaxBytes. TTLs are
// clamped to [Config.MinTTL, Config.MaxTTL] (a TTL of 0 is not cached,
// RFC 1035 §3.2.1); an answer lives as long as its shortest TTL.
// Negative answers (NXDOMAIN, NODATA) are cached for min(SOA TTL, SOA
// MINIMUM) capped by Config.NegativeMaxTTL (RFC 2308 §5), and only with
// an SOA. SERVFAIL and other errors are not cached.
//
// # Upstreams
//
// A miss becomes a call: identical questions in flight wait for the same
// upstream answer (coalescing), at most Config.MaxInFlight questions at
// once. Each attempt sends from a random source port (optionally
// reserved with Config.ReservePort) with a random ID (RFC 5452 §9.2) and
// EDNS0 with a UDP size of 1232, and accepts only an answer from the
// server's address with that ID and question (case-insensitively, or
// exactly with Config.Use0x20); everything else is counted and ignored,
// so a spoofed answer never reaches the cache. A truncated answer is
// asked again over TCP. Upstreams are tried in turn, starting with the
// last that answered; when none answers, clients get SERVFAIL.
//
// # Local names
//
// HOST.DOMAIN (Config.Domain) and the bare HOST of SetHosts are answered
// A and AAAA, and their addresses PTR. The rest of the local domain and
// of the local reverse zones (the RFC 6303 private ranges and
// Config.LocalPrefixes) gets NXDOMAIN (or NODATA for names that exist)
// locally with a synthesised SOA, so such names never leak upstream.
// localhost. and invalid. are answered as RFC 6761 §6.3 and §6.4 say.
package dnsforward
