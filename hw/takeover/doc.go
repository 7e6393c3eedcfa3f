// Package takeover is the on-disk record of what a router changed in the
// kernel's settings when it took a port over, so that the settings from
// before the first takeover come back even after the router crashed: a
// router started after a crash adopts the record (and its own leftovers,
// such as its ingress drop), and its clean stop or `gvrouter restore` puts
// back what the record says.
//
// # What is recorded, and when
//
// The port's owner (hw) saves the record before each change it makes, with
// the value the kernel had before: a crash between the save and the change
// leaves a record that restores a value the kernel still has, which is
// harmless, while the other order could lose a value for good. Restoring is
// idempotent for the same reason.
//
// # Format
//
// One JSON file per port, <state_dir>/ports/<ifname>.json, written
// atomically (statedir.WriteFile). It describes settings in the kernel's
// own terms, not in those of the tool that changed them: addresses as
// address, prefix length, flags, scope and lifetimes (what rtnetlink's
// ifaddrmsg carries), offload features by their netdev feature names
// ("rx-gro"), the disable_ipv6 sysctl's value, nftables tables by family
// and name and tc qdiscs and filters by their handles. A move to other
// netlink or nftables libraries, or to AF_XDP, therefore keeps reading it.
// The record carries a version: a router refuses a version it does not
// know instead of guessing, and a corrupt or truncated file is reported
// and set aside, never fatal.
package takeover
