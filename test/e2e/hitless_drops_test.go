package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/internal/testkit/netlab"
	"github.com/sflowswitchd/sflowswitchd/internal/testkit/pinfs"
)

// TestHitlessDrops: drop notifications through an upgrade in place
// (SIGUSR2) and a crash restart (SIGKILL, a new daemon a second later),
// with an nftables rule dropping frames that arrive on p1 all along, the
// gap included. The kfree_skb program is pinned and goes on counting
// while no daemon runs; its notifications of the gap cannot be written
// (no process's buffers: the perf buffers are the process's) and are
// counted lost; the daemon that takes it over goes on.
//
// Exact accounting over the whole run, every drop of the namespace:
// the discarded_packet samples received + the samples lost in flight
// (gaps in their sequence numbers, at a crash only) + the last sample's
// drops field == the program's count of drops
// (sflowswitchd_switch_dropped_packets_counted_total); p1's drop count
// (sflowswitchd_port_switch_dropped_packets_total) == the rule's nft
// counter, the gap's drops included; the notifications of the rule's
// frames received, plus the losses, cover the nft counter. (Before, the
// program was unloaded at the upgrade: the gap's drops were neither
// notified nor counted, and the kernel's counts started at 0 again.)
func TestHitlessDrops(t *testing.T) {
	for _, event := range []string{"upgrade", "crash"} {
		t.Run(event, func(t *testing.T) { hitlessDrops(t, event) })
	}
}

func hitlessDrops(t *testing.T, event string) {
	lab := newLab(t, 3)
	dl := lab.SetupDrops(t)
	col := listen(t, lab, collectorPort)
	conf := filepath.Join(t.TempDir(), "sflowswitchd.conf")
	body := fmt.Sprintf("sampling = 1000\npolling = 0\nports = [\"p1\"]\ndrops = \"on\"\ndrops_limit = 100000\ndrops_header_bytes = 128\n\n[[collector]]\naddress = \"%s:%d\"\n",
		lab.CollectorAddr, collectorPort)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-config", conf, "-pin-dir", pinfs.Dir(t), "-state-dir", t.TempDir()}
	d := startDaemon(t, lab, args...)
	d.waitReady(t, lab, "p1")
	p1 := lab.LinkIndex(lab.Switch, "p1")

	// ACL drops all along: 10 frames every 10 ms from host 0 (p1).
	frames := dl.ACLFrames(10)
	ctx, cancel := context.WithCancel(context.Background())
	sent := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := lab.Do(lab.Hosts[0], func() error { return sendBatch(frames) }); err == nil {
				sent += len(frames)
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	time.Sleep(time.Second)
	switch event {
	case "upgrade":
		d.signal(t, syscall.SIGUSR2)
		d.waitLog(t, 20*time.Second, "upgrade in place completed")
	case "crash":
		d.signal(t, syscall.SIGKILL)
		d.waitExit(t, 10*time.Second)
		time.Sleep(time.Second)
		d = startDaemon(t, lab, args...)
	}
	d.waitReady(t, lab, "p1")
	time.Sleep(time.Second)
	cancel()
	<-done
	if !strings.Contains(d.log(), "the pinned program taken over") {
		t.Errorf("the drop program was not taken over after the %s:\n%s", event, d.log())
	}

	dgs := waitDropsQuiet(t, col)
	recs := dropSamplesOf(dgs)
	if len(recs) == 0 {
		t.Fatal("no discarded_packet sample")
	}
	m := mustFetchMetrics(t, lab)
	total, ok := m.value("sflowswitchd_switch_dropped_packets_counted_total")
	if !ok {
		t.Fatalf("no drop count in the metrics:\n%s", d.log())
	}
	onP1, _ := m.get("sflowswitchd_port_switch_dropped_packets_total", fmt.Sprintf(`ifindex="%d"`, p1))
	nft := dl.ACLDropped(t)

	aclReason := netlab.ACLDropReason(t)
	var lastSeq uint32
	gaps := uint64(0)
	acl := uint64(0)
	for _, r := range recs {
		if r.s.SequenceNumber <= lastSeq {
			t.Errorf("discarded_packet sequence %d after %d", r.s.SequenceNumber, lastSeq)
		} else {
			gaps += uint64(r.s.SequenceNumber - lastSeq - 1)
		}
		lastSeq = r.s.SequenceNumber
		if r.s.Input == uint32(p1) && r.linux == aclReason {
			acl++
		}
	}
	lost := uint64(recs[len(recs)-1].s.Drops)
	t.Logf("%s: %d frames sent to the rule, nft dropped %d; the program counted %d drops (p1 %d); received %d notifications (%d of the rule's), %d lost in flight, drops field %d",
		event, sent, nft, total, onP1, len(recs), acl, gaps, lost)
	if uint64(len(recs))+gaps+lost != total {
		t.Errorf("notifications %d + lost in flight %d + drops field %d = %d, want the drops counted %d",
			len(recs), gaps, lost, uint64(len(recs))+gaps+lost, total)
	}
	if onP1 != nft || nft != uint64(sent) {
		t.Errorf("p1's drops counted %d, nft counter %d, frames sent %d: want all equal (the gap's drops counted)", onP1, nft, sent)
	}
	if acl > nft || acl+gaps+lost < nft {
		t.Errorf("the rule's notifications %d (+ %d in flight + %d lost) do not cover its %d drops", acl, gaps, lost, nft)
	}
	if lost == 0 {
		t.Errorf("no notification lost: the %s's gap was not tested", event)
	}
	if event == "upgrade" && gaps != 0 {
		t.Errorf("%d discarded_packet samples lost in flight at an upgrade, want 0", gaps)
	}
	d.signal(t, syscall.SIGTERM)
	if code := d.waitExit(t, 15*time.Second); code != 0 {
		t.Errorf("exit status %d after SIGTERM\n%s", code, d.log())
	}
	if es := pinfs.Entries(t, args[3]); len(es) != 0 {
		t.Errorf("pinned after SIGTERM: %v", es)
	}
}
