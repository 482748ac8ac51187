package policy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestMonotonicTimeOnly is the clock-jump test for what a test
// cannot do to the machine's clock: it fails if the daemon's code derives
// anything from wall-clock numbers. Go's time.Now carries a monotonic
// reading, and time.Since, Sub, timers and tickers use it (package time,
// "Monotonic Clocks"); only converting a time to Unix seconds or
// nanoseconds, or stripping the reading (Round(0), Truncate(0)), makes a
// duration follow a wall-clock step. Uptime (sysUpTime, sFlow uptime),
// poll intervals, timeouts and rate limits are therefore all monotonic as
// long as no such call appears outside the places listed below, which
// handle real calendar timestamps.
func TestMonotonicTimeOnly(t *testing.T) {
	allowed := map[string]string{
		"cmd/sflowswitchd/internal/decode/pcap.go": "pcap record timestamps are calendar time",
		"internal/testkit/testutil/pcap.go":        "pcap record timestamps are calendar time",
		"dataplane/drops/drops.go":                 "time.Unix(1, 0) is a deadline in the past, not a clock reading",
		"dataplane/pin.go":                         "the pinned state's creation time is a calendar timestamp for log lines, never a duration",
	}
	wall := map[string]bool{"Unix": true, "UnixNano": true, "UnixMilli": true, "UnixMicro": true}
	root := "../.."
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case "bench", "test", "internal/testkit/netlab", "vagrant", "packaging", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || allowed[rel] != "" {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			name := sel.Sel.Name
			strip := (name == "Round" || name == "Truncate") && len(call.Args) == 1 && isZero(call.Args[0])
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "time" && name == "Unix" {
				bad = append(bad, rel+": time.Unix")
			} else if wall[name] && len(call.Args) == 0 || strip {
				bad = append(bad, rel+": ."+name+"()")
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("wall-clock arithmetic in %s: a clock step would move it (use time.Since on a time.Now value)", b)
	}
}

func isZero(e ast.Expr) bool {
	l, ok := e.(*ast.BasicLit)
	return ok && l.Value == "0"
}
