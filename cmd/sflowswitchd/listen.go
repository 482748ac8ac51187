package main

import (
	"log/slog"
	"net/netip"
)

// Listeners default to loopback (issue 10, defect 8; config.ListenAddress):
// an address that other hosts can reach needs an explicit opt-in and is
// announced with a warning at every start.

// isLoopbackListen reports whether a normalized listen address is loopback.
func isLoopbackListen(addr string) bool {
	ap, err := netip.ParseAddrPort(addr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// warnExposed logs, loudly, that a listener without authentication is
// reachable from the network (the operator opted in).
func warnExposed(log *slog.Logger, what, addr string) {
	if isLoopbackListen(addr) {
		return
	}
	log.Warn("!!! LISTENER EXPOSED BEYOND LOOPBACK: anyone who can reach this address can use it, it has no authentication; restrict it with a firewall or listen on 127.0.0.1",
		"listener", what, "addr", addr)
}
