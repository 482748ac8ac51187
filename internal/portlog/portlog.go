// Package portlog names ports in the log: a record that carries an
// "ifindex" attribute and no "port" gets port=NAME before it, the name
// the interface has in the process's network namespace when the record
// is logged, so that an operator reads "port=swp1 ifindex=3" and not an
// index to look up.
package portlog

import (
	"context"
	"log/slog"
	"net"
)

// Handler wraps h. name returns a port's name by ifindex ("" when none);
// nil looks the interface up in the process's network namespace
// (net.InterfaceByIndex: one netlink request per record that has an
// ifindex, which are few: the log has no line per packet).
func Handler(h slog.Handler, name func(ifindex int) string) slog.Handler {
	if name == nil {
		name = lookup
	}
	return handler{h: h, name: name}
}

func lookup(ifindex int) string {
	ifc, err := net.InterfaceByIndex(ifindex)
	if err != nil {
		return ""
	}
	return ifc.Name
}

type handler struct {
	h    slog.Handler
	name func(int) string
	// port: the attributes added With already name the port.
	port bool
}

func (h handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if h.port {
		return h.h.Handle(ctx, r)
	}
	idx, has := -1, false
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "port":
			has = true
			return false
		case "ifindex":
			switch v := a.Value.Resolve(); v.Kind() {
			case slog.KindInt64:
				idx = int(v.Int64())
			case slog.KindUint64:
				idx = int(v.Uint64())
			}
		}
		return true
	})
	if has || idx <= 0 {
		return h.h.Handle(ctx, r)
	}
	n := h.name(idx)
	if n == "" {
		return h.h.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "ifindex" {
			out.AddAttrs(slog.String("port", n))
		}
		out.AddAttrs(a)
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h handler) WithAttrs(as []slog.Attr) slog.Handler {
	port := h.port
	for _, a := range as {
		port = port || a.Key == "port"
	}
	return handler{h: h.h.WithAttrs(as), name: h.name, port: port}
}

func (h handler) WithGroup(g string) slog.Handler {
	return handler{h: h.h.WithGroup(g), name: h.name, port: h.port}
}
