package appsubagent

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sflowswitchd/sflowswitchd/apps/app"
	"github.com/sflowswitchd/sflowswitchd/internal/prom"
)

// procUDPDrops reads the drops column of /proc/self/net/udp for the
// socket bound to port on 127.0.0.1: an independent reading of sk_drops.
func procUDPDrops(t *testing.T, port int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/net/udp")
	if err != nil {
		t.Fatal(err)
	}
	local := fmt.Sprintf("0100007F:%04X", port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 12 && f[1] == local {
			v, err := strconv.ParseUint(f[len(f)-1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no socket %s in /proc/self/net/udp", local)
	return 0
}

// TestSocketDrops floods a socket nobody reads and checks that
// SocketDrops reports the kernel's drops, as /proc/net/udp does.
func TestSocketDrops(t *testing.T) {
	conn, err := app.ListenJSON("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if n, err := SocketDrops(conn); err != nil || n != 0 {
		t.Fatalf("before the flood: %d, %v", n, err)
	}
	tx, err := net.DialUDP("udp", nil, conn.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	msg := make([]byte, 1000)
	for i := 0; i < 500; i++ {
		if _, err := tx.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	n, err := SocketDrops(conn)
	if err != nil {
		t.Fatal(err)
	}
	proc := procUDPDrops(t, conn.LocalAddr().(*net.UDPAddr).Port)
	if n == 0 || n != proc || n > 500 {
		t.Errorf("SocketDrops %d, /proc/net/udp %d (500 sent to a 4 KiB buffer)", n, proc)
	}

	// The same figure is exported.
	e := app.New(app.Config{})
	reg := prom.NewRegistry()
	reg.MustRegister(NewAppCollector(e.Stats(), conn))
	rec := httptest.NewRecorder()
	prom.Handler(reg, slog.Default()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	want := fmt.Sprintf("\nsflowswitchd_app_api_socket_drops_total %d\n", n)
	if !strings.Contains(rec.Body.String(), want) {
		t.Errorf("metrics lack %q", want)
	}
	for _, m := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_duration_seconds", "process_resident_memory_bytes", "process_open_fds"} {
		if !strings.Contains(rec.Body.String(), "\n"+m) {
			t.Errorf("metrics lack %s", m)
		}
	}
}
