package mib

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// TestRunReleasesOnTime: Run, on the real clock, releases a receiver whose
// timeout was set over SNMP when the timeout ends (it sleeps until that
// deadline: no periodic tick), and returns when ctx ends.
func TestRunReleasesOnTime(t *testing.T) {
	rec := &recorder{}
	m, err := New(Config{Revision: "test", Apply: rec.Apply, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	tm := &testMIB{MIB: m, t: t, rec: rec}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { m.Run(ctx); close(ran) }()
	time.Sleep(50 * time.Millisecond) // Run asleep with nothing owned

	set := time.Now()
	tm.mustSet(octets(rcvrOID(colRcvrOwner, 1), "mgr-a"), integer(rcvrOID(colRcvrTimeout, 1), 1))
	for tm.getString(rcvrOID(colRcvrOwner, 1)) != "" {
		if time.Since(set) > 5*time.Second {
			t.Fatal("receiver not released 5 s after a 1 s timeout")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Since(set); d < time.Second || d > 1500*time.Millisecond {
		t.Errorf("released %v after a 1 s timeout was set, want 1 s (+ a little)", d)
	}
	cancel()
	select {
	case <-ran:
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
}
