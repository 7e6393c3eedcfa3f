// Package firewall is the zone and rule model of the router's stateful
// firewall, after OpenWrt's firewall4: zones group interfaces and carry an
// input, forward and output policy; rules match new flows by zone pair,
// family, protocol, ports, addresses (IPv6 by suffix too), ICMP type and a
// rate limit, and accept, drop or reject them.
//
// Compile turns a Policy into a Ruleset, an immutable index evaluated once
// per new flow (the NAT engine's flow creation); packets of existing flows
// never reach it, so the fast path stays a table lookup. Evaluation does
// not allocate.
//
// Chains, as fw4 builds them: a flow from zone A to the router is A's
// input chain (rules with src A and no dest), from the router to zone B
// B's output chain (rules with no src and dest B), from A to B the
// forward chain (rules with src A and dest B; "*" is any zone). The first
// rule that matches decides; with none, a forwarded flow that a redirect
// (DNAT) opened is accepted (fw4 "Accept port redirections"), and any
// other takes the policy of its zone: A's input policy, B's output
// policy, A's forward policy (for flows leaving A towards any zone).
package firewall
