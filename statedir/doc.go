// Package statedir keeps the router's state on disk and its locks: files
// written atomically (a temporary file, fsync, rename, fsync of the
// directory), so that a crash or a power cut leaves either the old or the
// new content, never a torn one; and exclusive locks (flock) that name the
// process holding them, so that a second router refuses clearly instead of
// taking over what the first one owns.
//
// # Directories
//
// The state directory (config key state_dir, default /var/lib/gvrouter) keeps what
// must survive a restart: the record of what a port takeover changed in
// the kernel (hw/takeover), leases, DUIDs and MACsec PN high-water marks.
// The run directory (DefaultRunDir) keeps what must not survive a reboot:
// the pidfile and the per-port locks. A lock dies with the process that
// holds it (the kernel releases a flock when the last descriptor closes),
// so a crashed router never leaves a stale lock behind.
package statedir
