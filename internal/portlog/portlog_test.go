package portlog

import (
	"bytes"
	"log/slog"
	"testing"
)

// TestPortNamed: a record with an ifindex gets the port's name before
// it; one that names the port already, or whose ifindex names no port,
// is left as it is.
func TestPortNamed(t *testing.T) {
	var b bytes.Buffer
	names := map[int]string{3: "swp1"}
	log := slog.New(Handler(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}), func(i int) string { return names[i] }))
	log.Info("sampler moved", "ifindex", 3, "mode", "native")
	log.Info("sampler moved", "ifindex", uint32(3))
	log.Info("sampler attached", "port", "swp9", "ifindex", 3)
	log.Info("gone", "ifindex", 7)
	log.With("port", "swp2").Info("with", "ifindex", 3)
	want := `level=INFO msg="sampler moved" port=swp1 ifindex=3 mode=native
level=INFO msg="sampler moved" port=swp1 ifindex=3
level=INFO msg="sampler attached" port=swp9 ifindex=3
level=INFO msg=gone ifindex=7
level=INFO msg=with port=swp2 ifindex=3
`
	if b.String() != want {
		t.Errorf("log:\n%s\nwant:\n%s", b.String(), want)
	}
	// The default lookup: the loopback device, in any namespace.
	if n := lookup(1); n != "lo" {
		t.Errorf("lookup(1) = %q, want lo", n)
	}
}
