package config

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
)

// Listeners default to loopback: neither the metrics
// endpoint nor the application API has authentication, so an address that
// other hosts can reach needs an explicit opt-in (metrics_allow_remote,
// app_api_allow_remote) and is announced with a warning at every start
// (WarnExposed).

// listenAddress checks and normalizes the listen address of listener what
// (a setting name, for messages): a missing host ("", ":9116") means
// 127.0.0.1; "localhost" means 127.0.0.1; anything but a loopback IP
// address (0.0.0.0, ::, a host's address, a host name) is refused unless
// allowRemote.
func listenAddress(what, addr string, allowRemote bool) (string, error) {
	if addr == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		// A bare port number.
		if _, perr := netip.ParseAddrPort("127.0.0.1:" + addr); perr != nil {
			return "", fmt.Errorf("%s %q: want [IP]:PORT: %w", what, addr, err)
		}
		host, port = "", addr
	}
	if _, err := netip.ParseAddrPort("127.0.0.1:" + port); err != nil {
		return "", fmt.Errorf("%s %q: bad port %q", what, addr, port)
	}
	switch strings.ToLower(host) {
	case "", "localhost":
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	ip, err := netip.ParseAddr(host)
	if err == nil && ip.Unmap().IsLoopback() {
		return net.JoinHostPort(ip.Unmap().String(), port), nil
	}
	if !allowRemote {
		return "", fmt.Errorf("%s %q: not a loopback address; this listener has no authentication, so exposing it needs %s_allow_remote = true (-%s-allow-remote)",
			what, addr, what, strings.ReplaceAll(what, "_", "-"))
	}
	return addr, nil
}

// isLoopbackListen reports whether a normalized listen address is loopback.
func isLoopbackListen(addr string) bool {
	ap, err := netip.ParseAddrPort(addr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// WarnExposed logs, loudly, that a listener without authentication is
// reachable from the network (the operator opted in).
func WarnExposed(log *slog.Logger, what, addr string) {
	if isLoopbackListen(addr) {
		return
	}
	log.Warn("!!! LISTENER EXPOSED BEYOND LOOPBACK: anyone who can reach this address can use it, it has no authentication; restrict it with a firewall or listen on 127.0.0.1",
		"listener", what, "addr", addr)
}
