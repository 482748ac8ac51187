package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/config"
)

func TestSNMPSettings(t *testing.T) {
	s, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if s.AgentX != config.DefaultAgentX || s.SNMPReceivers != 10 || s.SNMPInstances != 3 || len(s.StaticCollectors()) != 1 {
		t.Fatalf("defaults %+v", s)
	}

	file := filepath.Join(t.TempDir(), "c.conf")
	if err := os.WriteFile(file, []byte("agentx = \"tcp:127.0.0.1:705\"\nsnmp_receivers = 4\nsnmp_instances = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err = loadArgs(t, "-config", file, "-snmp-instances", "5", "-collector", "none"); err != nil {
		t.Fatal(err)
	}
	if s.AgentX != "tcp:127.0.0.1:705" || s.SNMPReceivers != 4 || s.SNMPInstances != 5 || len(s.StaticCollectors()) != 0 {
		t.Fatalf("got %+v", s)
	}

	for _, c := range []struct {
		v, network, addr string
		ok               bool
	}{
		{"unix:/run/agentx.sock", "unix", "/run/agentx.sock", true},
		{"tcp:127.0.0.1:705", "tcp", "127.0.0.1:705", true},
		{"off", "", "", true},
		{"unix:", "", "", false},
		{"tcp:127.0.0.1", "", "", false},
		{"/var/agentx/master", "", "", false},
	} {
		n, a, err := config.ParseAgentX(c.v)
		if (err == nil) != c.ok || n != c.network || a != c.addr {
			t.Errorf("config.ParseAgentX(%q) = %q %q %v", c.v, n, a, err)
		}
	}

	for _, args := range [][]string{
		{"-collector", "none", "-collector", "198.18.0.1"},
		{"-snmp-receivers", "0"},
		{"-snmp-instances", "70000"},
		{"-agentx", "udp:1.2.3.4:5"},
	} {
		if _, err := loadArgs(t, args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
