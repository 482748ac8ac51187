package appsubagent

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestExposedListenerWarns starts the application API on every address
// with the opt-in and checks the warning, and that loopback does not warn.
func TestExposedListenerWarns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tc := range []struct {
		addr string
		warn bool
	}{{"0.0.0.0:0", true}, {"127.0.0.1:0", false}} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		a, err := Start(ctx, Config{API: tc.addr, AllowRemote: true}, log)
		if err != nil {
			t.Fatalf("%s: %v", tc.addr, err)
		}
		if a.api.Addr().IsLoopback() == tc.warn {
			t.Errorf("%s: listening on %v", tc.addr, a.api)
		}
		if got := strings.Contains(buf.String(), "LISTENER EXPOSED BEYOND LOOPBACK"); got != tc.warn {
			t.Errorf("%s: warned %v, want %v:\n%s", tc.addr, got, tc.warn, buf.String())
		}
	}
}
