package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/testutil"
)

// sharedTestdata is the folder of golden datagrams built by hand from the
// spec texts.
func sharedTestdata(t *testing.T) string { return testutil.GoldenDir(t) }

func readShared(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sharedTestdata(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// validDatagrams are the shared datagrams with an sflowtool reading.
var validDatagrams = []string{"flow_core", "flow_app", "counters_if", "counters_host", "counters_app", "expanded"}

// malformedDatagrams maps each shared malformed datagram to the structure
// and offset its error must name (derived by hand in
// sflow/malformed_test.go).
var malformedDatagrams = []struct {
	file      string
	structure string
	offset    int
}{
	{"bad_version.bin", "datagram", 0},
	{"bad_samplelen.bin", "datagram.sample[0].counters_sample", 32},
	{"truncated.bin", "datagram.sample[0].flow_sample", 32},
	{"bad_nsamples.bin", "datagram", 204},
	{"trailing.bin", "datagram", 204},
	{"bad_reclen.bin", "datagram.sample[0].counters_sample.record[0].if_counters", 140},
}

// buildBinary builds sflowswitchd into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sflowswitchd")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// makePcap writes the payloads as UDP datagrams from 198.18.0.1:50000 to
// 198.18.0.2:6343 into a pcap file with Wireshark's text2pcap.
func makePcap(t *testing.T, payloads [][]byte) string {
	t.Helper()
	text2pcap, err := exec.LookPath("text2pcap")
	if err != nil {
		t.Fatalf("text2pcap (Debian package wireshark-common) is needed: %v", err)
	}
	var dump strings.Builder
	for _, p := range payloads {
		for off := 0; off < len(p); off += 16 {
			fmt.Fprintf(&dump, "%06x ", off)
			for _, c := range p[off:min(off+16, len(p))] {
				fmt.Fprintf(&dump, " %02x", c)
			}
			dump.WriteString("\n")
		}
	}
	dir := t.TempDir()
	txt, pcap := filepath.Join(dir, "dump.txt"), filepath.Join(dir, "d.pcap")
	if err := os.WriteFile(txt, []byte(dump.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(text2pcap, "-q", "-F", "pcap", "-4", "198.18.0.1,198.18.0.2", "-u", "50000,6343", txt, pcap).CombinedOutput()
	if err != nil {
		t.Fatalf("text2pcap: %v\n%s", err, out)
	}
	return pcap
}

// jsonLines parses newline-delimited JSON objects.
func jsonLines(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	var res []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("output line is not a JSON object: %q: %v", line, err)
		}
		res = append(res, v)
	}
	return res
}

// num renders a JSON number as sflowtool writes it.
func num(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatUint(uint64(f), 10)
	}
	return fmt.Sprint(v)
}

// checkAgainstSflowtool compares one decoded datagram line with the
// independent decoder sflowtool's reading of the same datagram.
func checkAgainstSflowtool(t *testing.T, name string, got map[string]any) {
	t.Helper()
	var ref map[string]any
	if err := json.Unmarshal(readShared(t, name+".sflowtool.json"), &ref); err != nil {
		t.Fatal(err)
	}
	eq := func(what string, ours, theirs any) {
		t.Helper()
		if fmt.Sprint(ours) != fmt.Sprint(theirs) {
			t.Errorf("%s %s: ours %v, sflowtool %v", name, what, ours, theirs)
		}
	}
	eq("version", num(got["version"]), ref["datagramVersion"])
	eq("sub_agent_id", num(got["sub_agent_id"]), ref["agentSubId"])
	eq("sequence_number", num(got["sequence_number"]), ref["packetSequenceNo"])
	eq("uptime_ms", num(got["uptime_ms"]), ref["sysUpTime"])
	if a := net.ParseIP(fmt.Sprint(ref["agent"])); a == nil || fmt.Sprint(got["agent_address"]) != a.String() {
		t.Errorf("%s agent_address: ours %v, sflowtool %v", name, got["agent_address"], ref["agent"])
	}
	samples, _ := got["samples"].([]any)
	refSamples, _ := ref["samples"].([]any)
	if len(samples) != len(refSamples) {
		t.Fatalf("%s: %d samples, sflowtool %d", name, len(samples), len(refSamples))
	}
	for i := range samples {
		s, rs := samples[i].(map[string]any), refSamples[i].(map[string]any)
		eq(fmt.Sprintf("sample[%d].sequence_number", i), num(s["sequence_number"]), rs["sampleSequenceNo"])
		src, _ := s["source_id"].(map[string]any)
		eq(fmt.Sprintf("sample[%d].source_id", i), num(src["type"])+":"+num(src["index"]), rs["sourceId"])
		tag := "counterBlock_tag"
		if strings.HasPrefix(fmt.Sprint(s["type"]), "flow_sample") {
			tag = "flowBlock_tag"
			eq(fmt.Sprintf("sample[%d].sampling_rate", i), num(s["sampling_rate"]), rs["meanSkipCount"])
			eq(fmt.Sprintf("sample[%d].sample_pool", i), num(s["sample_pool"]), rs["samplePool"])
		}
		recs, _ := s["records"].([]any)
		refRecs, _ := rs["elements"].([]any)
		if len(recs) != len(refRecs) {
			t.Errorf("%s sample[%d]: %d records, sflowtool %d", name, i, len(recs), len(refRecs))
			continue
		}
		for j := range recs {
			eq(fmt.Sprintf("sample[%d].record[%d].format", i, j), recs[j].(map[string]any)["format"], refRecs[j].(map[string]any)[tag])
		}
	}
}

func checkErrorLine(t *testing.T, e map[string]any, structure string, offset int, source string) {
	t.Helper()
	if e["structure"] != structure || num(e["offset"]) != strconv.Itoa(offset) || e["source"] != source {
		t.Errorf("error %v: want structure %s offset %d source %s", e, structure, offset, source)
	}
	if msg, _ := e["error"].(string); msg == "" {
		t.Errorf("error %v has no message", e)
	}
}

func TestDecodePcap(t *testing.T) {
	bin := buildBinary(t)
	var payloads [][]byte
	for _, n := range validDatagrams {
		payloads = append(payloads, readShared(t, n+".bin"))
	}
	for _, m := range malformedDatagrams {
		payloads = append(payloads, readShared(t, m.file))
	}
	pcap := makePcap(t, payloads)

	cmd := exec.Command(bin, "decode", "-pcap", pcap)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v (want status 1 for malformed datagrams)\nstderr: %s", err, stderr.String())
	}
	lines := jsonLines(t, stdout.Bytes())
	if len(lines) != len(validDatagrams) {
		t.Fatalf("%d datagrams on stdout, want %d:\n%s", len(lines), len(validDatagrams), stdout.String())
	}
	for i, n := range validDatagrams {
		if lines[i]["source"] != "198.18.0.1:50000" {
			t.Errorf("%s: source %v", n, lines[i]["source"])
		}
		checkAgainstSflowtool(t, n, lines[i])
	}
	errs := jsonLines(t, stderr.Bytes())
	if len(errs) != len(malformedDatagrams) {
		t.Fatalf("%d errors on stderr, want %d:\n%s", len(errs), len(malformedDatagrams), stderr.String())
	}
	for i, m := range malformedDatagrams {
		checkErrorLine(t, errs[i], m.structure, m.offset, "198.18.0.1:50000")
		if num(errs[i]["frame"]) != strconv.Itoa(len(validDatagrams)+i+1) {
			t.Errorf("%s: frame %v, want %d", m.file, errs[i]["frame"], len(validDatagrams)+i+1)
		}
	}

	// Only valid datagrams: exit 0. -count stops early.
	good := makePcap(t, payloads[:len(validDatagrams)])
	out, err := exec.Command(bin, "decode", "-pcap", good, "-count", "2").Output()
	if err != nil {
		t.Fatalf("valid capture: %v", err)
	}
	if n := len(jsonLines(t, out)); n != 2 {
		t.Errorf("-count 2 printed %d datagrams", n)
	}
}

func TestDecodeUsage(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"decode", "-h"}, 0, "-listen"},
		{[]string{"decode", "-bogus"}, 2, "flag provided but not defined"},
		{[]string{"decode", "-listen", ":0", "-pcap", "x"}, 2, "exclude each other"},
		{[]string{"decode", "-pcap", filepath.Join(t.TempDir(), "missing.pcap")}, 1, "no such file"},
		{[]string{"help"}, 0, "decode"},
	} {
		cmd := exec.Command(bin, tc.args...)
		var stderr bytes.Buffer // usage goes to stdout for "help"
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		err := cmd.Run()
		status := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			status = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if status != tc.status || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%v: status %d, stderr %q; want %d and %q", tc.args, status, stderr.String(), tc.status, tc.stderr)
		}
	}
}

// freeUDPPort returns a loopback UDP port that was free a moment ago.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// linesOf sends each line of r, as it arrives, to the returned channel.
func linesOf(r *os.File) <-chan string {
	ch := make(chan string, 100)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

func TestDecodeListen(t *testing.T) {
	bin := buildBinary(t)
	port := freeUDPPort(t)
	cmd := exec.Command(bin, "decode", "-listen", fmt.Sprintf("127.0.0.1:%d", port))
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	errW.Close()
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGKILL) // no-op error if it already exited
		<-exited
		outR.Close()
		errR.Close()
	})
	stdout, stderr := linesOf(outR), linesOf(errR)

	conn, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	source := conn.LocalAddr().String()

	// Wait until the decoder listens: send a probe (flow_core with its
	// sequence number changed to a marker) until it is printed.
	const probeSeq = 0xfffffff0
	probe := readShared(t, "flow_core.bin")
	binary.BigEndian.PutUint32(probe[16:], probeSeq) // sequence_number, after an IPv4 agent address
	ready := false
	for deadline := time.Now().Add(20 * time.Second); !ready && time.Now().Before(deadline); {
		if _, err := conn.Write(probe); err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatal(err)
		}
		select {
		case line := <-stdout:
			ready = strings.Contains(line, fmt.Sprintf(`"sequence_number":%d`, uint32(probeSeq)))
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !ready {
		t.Fatal("decoder did not print the probe datagram")
	}

	for _, n := range validDatagrams {
		if _, err := conn.Write(readShared(t, n+".bin")); err != nil {
			t.Fatal(err)
		}
	}
	bad := malformedDatagrams[0]
	if _, err := conn.Write(readShared(t, bad.file)); err != nil {
		t.Fatal(err)
	}

	next := func(ch <-chan string, what string) map[string]any {
		t.Helper()
		select {
		case line, ok := <-ch:
			if !ok {
				t.Fatalf("%s closed", what)
			}
			return jsonLines(t, []byte(line))[0]
		case <-time.After(20 * time.Second):
			t.Fatalf("no line on %s", what)
		}
		return nil
	}
	for i := 0; i < len(validDatagrams); {
		line := next(stdout, "stdout")
		if num(line["sequence_number"]) == strconv.Itoa(probeSeq) {
			continue // a late copy of the probe
		}
		if line["source"] != source {
			t.Errorf("source %v, want %s", line["source"], source)
		}
		checkAgainstSflowtool(t, validDatagrams[i], line)
		i++
	}
	checkErrorLine(t, next(stderr, "stderr"), bad.structure, bad.offset, source)

	// The decoder keeps running after a malformed datagram.
	if _, err := conn.Write(readShared(t, "counters_if.bin")); err != nil {
		t.Fatal(err)
	}
	checkAgainstSflowtool(t, "counters_if", next(stdout, "stdout"))

	// SIGTERM ends it with status 0.
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("decoder did not exit on SIGTERM")
	}
}
