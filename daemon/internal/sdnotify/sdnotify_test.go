package sdnotify

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TestNotify: the state reaches the datagram socket $NOTIFY_SOCKET names,
// as a path and as an abstract name; without the variable nothing is sent.
func TestNotify(t *testing.T) {
	for _, name := range []string{filepath.Join(t.TempDir(), "notify"), "@hhos-sdnotify-test"} {
		conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("NOTIFY_SOCKET", name)
		if err := Notify("READY=1"); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 64)
		n, err := conn.Read(buf)
		conn.Close()
		if err != nil || string(buf[:n]) != "READY=1" {
			t.Errorf("%s: got %q, %v", name, buf[:n], err)
		}
	}
	t.Setenv("NOTIFY_SOCKET", "")
	if err := Notify("READY=1"); err != nil {
		t.Errorf("without NOTIFY_SOCKET: %v", err)
	}
}
