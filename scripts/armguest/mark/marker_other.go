//go:build !arm

package main

func marker() {}
