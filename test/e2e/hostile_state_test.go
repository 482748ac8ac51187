package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pinfs"
)

// snmpStateRow and snmpStateReceiver are snmp.json's rows as the daemon
// writes them (mib.Snapshot, handover's record), written here by hand.
type snmpStateReceiver struct {
	Index           int    `json:"index"`
	Owner           string `json:"owner"`
	Remaining       int64  `json:"remaining"`
	MaxDatagramSize int32  `json:"max_datagram_size"`
	AddressType     int32  `json:"address_type"`
	Address         []byte `json:"address"`
	Port            int32  `json:"port"`
	Version         int32  `json:"version"`
}

type snmpStateRow struct {
	Source   struct{ Type, Index uint32 } `json:"source"`
	Instance int                          `json:"instance"`
	Receiver int32                        `json:"receiver"`
	Value    int32                        `json:"value"`
	Header   int32                        `json:"header,omitempty"`
}

// TestHostileSNMPStateFile: the state directory's snmp.json, read back
// by a start that takes the pinned samplers over (here after a SIGKILL),
// is another process's to write too. A file holding a receiver at
// 127.0.0.1:161, one with a 5-octet address, a sampler with header size
// 5 and one with rate -1, beside a valid receiver and sampler: the valid
// rows are restored (their collector receives p1's samples, header 5
// adjusted to 20 as a SET adjusts it), the others dropped, each logged
// and counted (snmp_restore_refused_total), nothing reaches
// 127.0.0.1:161, the static collector receives as before,
// configuration_stale stays 0 and a SIGHUP applies. Then the file
// replaced by a FIFO: the next start neither hangs nor fails (READY,
// sampling, SIGTERM ends it), the FIFO is set aside as
// snmp.json.damaged and counted. Before, the first file silenced the
// agent (every port detached, every later configuration refused whole,
// configuration_stale 0), 127.0.0.1:161 received datagrams, and a FIFO
// hung the start for good.
func TestHostileSNMPStateFile(t *testing.T) {
	lab := newLab(t, 1)
	col := listenCounting(t, lab, collectorPort)
	col2 := listenCounting(t, lab, collectorPort+1)
	pin, state := pinfs.Dir(t), t.TempDir()
	args := []string{"-collector", fmt.Sprintf("%s:%d", lab.CollectorAddr, collectorPort), "-sampling", "1", "-ports", "p1",
		"-polling", "0", "-pin-dir", pin, "-state-dir", state}
	d1 := startDaemon(t, lab, args...)
	d1.waitReady(t, lab, "p1")
	d1.signal(t, syscall.SIGKILL)
	d1.waitExit(t, 10*time.Second)

	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	p1 := uint32(lab.LinkIndex(lab.Switch, "p1"))
	coll := lab.CollectorAddr.As4()
	rcv := func(i int, addr []byte, port int32) snmpStateReceiver {
		return snmpStateReceiver{Index: i, Owner: "hostile", Remaining: int64(10 * time.Minute), MaxDatagramSize: 1400,
			AddressType: 1, Address: addr, Port: port, Version: 5}
	}
	row := func(inst int, r, v, h int32) snmpStateRow {
		x := snmpStateRow{Instance: inst, Receiver: r, Value: v, Header: h}
		x.Source.Index = p1
		return x
	}
	rec := map[string]any{"at": ts.Nano(), "snapshot": map[string]any{
		"receivers": []snmpStateReceiver{
			rcv(2, []byte{127, 0, 0, 1}, 161),
			rcv(3, coll[:], int32(collectorPort+1)),
			rcv(4, []byte{198, 18, 0, 4, 0}, 6343),
		},
		"samplers": []snmpStateRow{row(3, 3, 1, 5), row(2, 2, -1, 128)},
	}}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(state, "snmp.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var snmpSock *net.UDPConn
	if err := lab.Do(lab.Switch, func() (err error) {
		snmpSock, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:161")))
		return err
	}); err != nil {
		t.Fatalf("listening on 127.0.0.1:161 in the switch namespace: %v", err)
	}
	defer snmpSock.Close()

	d2 := startDaemon(t, lab, args...)
	d2.waitReady(t, lab, "p1")
	samplesFlow(t, lab, col, "to the static collector after the restore")
	samplesFlow(t, lab, col2, "to the restored receiver 3")
	snmpSock.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	atSNMP := 0
	for buf := make([]byte, 2048); ; atSNMP++ {
		if _, err := snmpSock.Read(buf); err != nil {
			break
		}
	}
	if atSNMP > 0 {
		t.Errorf("%d datagrams reached 127.0.0.1:161", atSNMP)
	}
	m := mustFetchMetrics(t, lab)
	refused := map[string]uint64{}
	for _, what := range []string{"receiver", "sampler", "poller", "file"} {
		refused[what], _ = m.get("sflowswitchd_snmp_restore_refused_total", `what="`+what+`"`)
	}
	if refused["receiver"] != 2 || refused["sampler"] != 1 || refused["file"] != 0 {
		t.Errorf("snmp_restore_refused_total %v, want 2 receivers, 1 sampler, no file", refused)
	}
	if n := strings.Count(d2.log(), "a restored row refused"); n != 3 {
		t.Errorf("%d refused rows logged, want 3:\n%s", n, tail(d2.log(), 3000))
	}
	if stale, _ := m.value("sflowswitchd_configuration_stale"); stale != 0 {
		t.Errorf("configuration_stale %d", stale)
	}
	d2.signal(t, syscall.SIGHUP)
	d2.waitLog(t, 10*time.Second, "configuration reloaded")
	samplesFlow(t, lab, col, "after a SIGHUP")
	if stale, _ := mustFetchMetrics(t, lab).value("sflowswitchd_configuration_stale"); stale != 0 {
		t.Errorf("configuration_stale %d after a SIGHUP", stale)
	}
	if b, err := os.ReadFile(file); err != nil || strings.Contains(string(b), `"port":161`) {
		t.Errorf("snmp.json as written back (%v): %s", err, b)
	}

	// The file replaced by a FIFO: the next start goes on without it.
	d2.signal(t, syscall.SIGKILL)
	d2.waitExit(t, 10*time.Second)
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(file, 0o600); err != nil {
		t.Fatal(err)
	}
	d3 := startDaemon(t, lab, args...)
	d3.waitReady(t, lab, "p1")
	samplesFlow(t, lab, col, "after a start with a FIFO as snmp.json")
	fi, err := os.Lstat(file + ".damaged")
	if err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("the FIFO not set aside as snmp.json.damaged: %v %v", fi, err)
	}
	if n, _ := mustFetchMetrics(t, lab).get("sflowswitchd_snmp_restore_refused_total", `what="file"`); n != 1 {
		t.Errorf("snmp_restore_refused_total{what=file} %d, want 1", n)
	}
	d3.signal(t, syscall.SIGTERM)
	if code := d3.waitExit(t, 15*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	recordHostile(t, hostileRow{
		Case:  "snmp.json after a crash: receivers at 127.0.0.1:161 and of a 5-octet address, a sampler of header 5 and one of rate -1 beside valid rows; then a FIFO",
		Bound: "valid rows restored and sampling (static and restored collectors), the others dropped, logged and counted, nothing at :161, configuration_stale 0, SIGHUP applies; the FIFO set aside, the start not blocked",
		Peak:  fmt.Sprintf("refused %v; %d datagrams at :161", refused, atSNMP),
	})
}
