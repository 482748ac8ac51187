package main

import (
	"strings"
	"testing"
)

// TestListenersDefaultToLoopback: a listen
// address without a host binds loopback, a non-loopback one is refused
// unless its listener's allow_remote opt-in is set.
func TestListenersDefaultToLoopback(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		metrics     string
		appAPI      string
		errContains string
	}{
		{args: []string{"-metrics", ":9116"}, metrics: "127.0.0.1:9116"},
		{args: []string{"-metrics", "9116"}, metrics: "127.0.0.1:9116"},
		{args: []string{"-metrics", "localhost:9116"}, metrics: "127.0.0.1:9116"},
		{args: []string{"-metrics", "[::1]:9116"}, metrics: "::1:9116"},
		{args: []string{"-metrics", "127.0.0.2:9116"}, metrics: "127.0.0.2:9116"},
		{args: []string{"-metrics", "0.0.0.0:9116"}, errContains: "metrics_allow_remote"},
		{args: []string{"-metrics", "[::]:9116"}, errContains: "metrics_allow_remote"},
		{args: []string{"-metrics", "198.18.0.1:9116"}, errContains: "-metrics-allow-remote"},
		{args: []string{"-metrics", "switch.example:9116"}, errContains: "not a loopback address"},
		{args: []string{"-metrics", "0.0.0.0:9116", "-metrics-allow-remote"}, metrics: "0.0.0.0:9116"},
		{args: []string{"-metrics", "127.0.0.1:x"}, errContains: "bad port"},
		{args: []string{"-app-api", ":36343"}, appAPI: "127.0.0.1:36343"},
		{args: []string{"-app-api", "0.0.0.0:36343"}, errContains: "app_api_allow_remote"},
		{args: []string{"-app-api", "0.0.0.0:36343", "-app-api-allow-remote"}, appAPI: "0.0.0.0:36343"},
		// The opt-in of one listener does not open the other.
		{args: []string{"-app-api", "0.0.0.0:36343", "-metrics-allow-remote"}, errContains: "app_api_allow_remote"},
		{args: []string{"-app-api", "localhost:36343"}, appAPI: "127.0.0.1:36343"},
	} {
		s, err := loadArgs(t, append(tc.args, "-collector", "198.18.0.9")...)
		if tc.errContains != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errContains) {
				t.Errorf("%q: error %v, want one mentioning %q", tc.args, err, tc.errContains)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if tc.metrics != "" && s.Metrics != strings.Replace(tc.metrics, "::1:", "[::1]:", 1) {
			t.Errorf("%q: metrics %q, want %q", tc.args, s.Metrics, tc.metrics)
		}
		if tc.appAPI != "" && s.AppAPI != tc.appAPI {
			t.Errorf("%q: app_api %q, want %q", tc.args, s.AppAPI, tc.appAPI)
		}
	}
}
