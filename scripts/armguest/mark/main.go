// Command mark executes one marker instruction that the payload plugin
// (scripts/armguest/payload.c) logs its counters at: scripts/armguest.sh
// --payload runs it before and after each measured case, so that the
// host takes the case's window as the difference of two marks. On
// anything but 32-bit ARM it does nothing.
package main

func main() { marker() }
