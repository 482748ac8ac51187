package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TsharkFields writes frames to a pcap, has tshark (Wireshark's dissector:
// an independent sFlow decoder) decode UDP port as sFlow and returns, per
// packet, every value of each requested field (e.g. "sflow_5.sampletype"),
// in order.
func TsharkFields(t testing.TB, frames []PcapFrame, port uint16, fields ...string) []map[string][]string {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Fatalf("tshark is needed for this test (Debian package tshark; `make deps` installs it): %v", err)
	}
	dir := t.TempDir()
	pcap := filepath.Join(dir, "sflow.pcap")
	if err := os.WriteFile(pcap, Pcap(frames), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-n", "-r", pcap, "-d", fmt.Sprintf("udp.port==%d,sflow", port), "-T", "fields",
		"-E", "occurrence=a", "-E", "separator=/t", "-E", "aggregator=|"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(tshark, args...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v: %s", err, stderr.String())
	}
	var res []map[string][]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		cols := strings.Split(line, "\t")
		m := map[string][]string{}
		for i, f := range fields {
			if i < len(cols) && cols[i] != "" {
				m[f] = strings.Split(cols[i], "|")
			}
		}
		res = append(res, m)
	}
	return res
}
