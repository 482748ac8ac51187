package dataplane

import (
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/sflowswitchd/sflowswitchd/testkit/netlab"
)

// TestHvmDropDebug (throw-away, not committed): every drop notification
// of a lab's switch namespace, with its function and header, while the
// lab sends the ACL frames of TestDropNotifications and then idles.
func TestHvmDropDebug(t *testing.T) {
	lab := netlab.New(t, 3)
	dl := lab.SetupDrops(t)
	d := openDropsFor(t, lab, 1_000_000)
	show := func(phase string, quiet time.Duration) {
		var ev DropEvent
		for {
			d.SetDeadline(time.Now().Add(quiet))
			_, err := d.Read(&ev, func(e *DropEvent) {
				t.Logf("%s: reason %s fn %s in %d out %d len %d hdr %s", phase, e.ReasonName, e.Symbol, e.InIfIndex, e.OutIfIndex, e.FrameLen, hex.EncodeToString(e.Header[:min(len(e.Header), 64)]))
			})
			if err != nil {
				if !os.IsTimeout(err) {
					t.Logf("read: %v", err)
				}
				return
			}
		}
	}
	show("idle-before", 3*time.Second)
	lab.SendFrames(t, 0, dl.ACLFrames(60))
	show("acl", 2*time.Second)
	show("idle-after", 5*time.Second)
	t.Logf("nft acl %d", dl.ACLDropped(t))
}
