// Package sdnotify tells systemd the daemon's state (sd_notify(3)): the
// unit is Type=notify, so systemd counts the daemon as started, and runs
// a `systemctl reload` (ExecReload: SIGHUP), only once it said READY=1,
// after its start-up completed.
package sdnotify

import (
	"fmt"
	"net"
	"os"
)

// Notify sends state ("READY=1", "STOPPING=1") to the service manager
// socket in $NOTIFY_SOCKET; without one (not under systemd) it does
// nothing. A name starting with '@' is an abstract socket.
func Notify(state string) error {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", state, err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", state, err)
	}
	return nil
}
