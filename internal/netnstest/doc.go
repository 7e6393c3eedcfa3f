// Package netnstest holds the helpers that the Linux lab tests of package
// hw and package lab/vswitch, and the services' interop tests, share: a
// network namespace per test, raw AF_PACKET sockets inside one, the
// privileged check and the Ethernet frame builders those tests inject and
// look for.
//
// It is for tests only. It imports package testing and reports every
// failure through a testing.TB, so no production code may import it; it
// is an ordinary package, not a _test.go file, only because test files
// cannot be shared between packages. It lives under internal/ so that
// nothing outside this module can import it and it never becomes part of
// gvrouter's API.
//
// The rules the helpers keep, so that a test cannot harm the machine it
// runs on: every namespace is named PREFIX-PID-N, with a prefix per test
// package ("hwt", "vsw"), so that leftovers are recognisable; a cleanup
// registered before anything else can fail deletes that namespace, and
// only it, even when the test fails; and everything a test does to
// interfaces it does inside its own namespaces, never to the machine's.
package netnstest
