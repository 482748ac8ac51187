package config

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Source is where a setting in force came from. The layers are applied in
// the order of the constants below, each over the ones before; the
// running daemon adds what SNMP managers set (SFLOW-MIB). A new source of
// configuration (DNS-SD, Redis) is one more constant and one more layer:
// Load notes the keys each layer changes (Sources.note), whatever it is.
type Source string

// The sources, lowest precedence first.
const (
	SourceDefault Source = "default"
	SourceHsflowd Source = "hsflowd.conf"
	SourceFile    Source = "file"
	SourceFlag    Source = "flag"
	// SourceDNSSD is a setting of the DNS-SD answer in force, laid over
	// the others (the running daemon's, config/dnssd).
	SourceDNSSD Source = "dns-sd"
	// SourceSNMP is a receiver, sampler or poller an SNMP manager set in
	// the SFLOW-MIB (the running daemon's, not Load's).
	SourceSNMP Source = "snmp"
	// SourceRedis is a setting from SONiC's Redis (SONiC mode, laid over
	// the files' and flags'); RedisSource names the database, key and
	// field after it.
	SourceRedis Source = "redis"
)

// RedisSource is the source of a setting read from SONiC's Redis: db
// (CONFIG_DB), key (SFLOW|global) and field (polling_interval; "" for the
// whole key), e.g. "redis CONFIG_DB SFLOW|global polling_interval".
func RedisSource(db, key, field string) Source {
	s := string(SourceRedis) + " " + db + " " + key
	if field != "" {
		s += " " + field
	}
	return Source(s)
}

// Sources maps a setting, by its config-file key ("sampling",
// "collector", ...), to the source of its value in force; a key absent is
// SourceDefault.
type Sources map[string]Source

// Of returns the source of key.
func (s Sources) Of(key string) Source {
	if v, ok := s[key]; ok {
		return v
	}
	return SourceDefault
}

// note marks as from src every setting whose value differs between
// before and after (one layer applied).
func (s Sources) note(before, after *Settings, src Source) {
	for _, c := range Changes(*before, *after) {
		s[c.Key] = src
	}
}

// Keys returns the config-file keys of every setting, in the order of
// Settings' fields.
func Keys() []string {
	t := reflect.TypeOf(Settings{})
	keys := make([]string, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		if k := tomlKey(t.Field(i)); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// tomlKey is a field's config-file key ("" for none).
func tomlKey(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if k == "-" {
		return ""
	}
	return k
}

// Change is one setting that differs between two Settings.
type Change struct {
	Key      string
	Old, New string
}

func (c Change) String() string { return fmt.Sprintf("%s: %s -> %s", c.Key, c.Old, c.New) }

// Changes lists the settings whose values differ between old and new, in
// the order of Settings' fields, each value as Value prints it.
func Changes(old, new Settings) []Change {
	ov, nv := reflect.ValueOf(old), reflect.ValueOf(new)
	t := ov.Type()
	var out []Change
	for i := 0; i < t.NumField(); i++ {
		k := tomlKey(t.Field(i))
		if k == "" {
			continue
		}
		a, b := ov.Field(i).Interface(), nv.Field(i).Interface()
		if reflect.DeepEqual(a, b) || (isEmpty(ov.Field(i)) && isEmpty(nv.Field(i))) {
			continue
		}
		out = append(out, Change{Key: k, Old: formatValue(ov.Field(i)), New: formatValue(nv.Field(i))})
	}
	return out
}

// Value returns the value of the setting key in s as Changes and `show`
// print it, and whether key is a setting.
func (s Settings) Value(key string) (string, bool) {
	v := reflect.ValueOf(s)
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if tomlKey(t.Field(i)) == key {
			return formatValue(v.Field(i)), true
		}
	}
	return "", false
}

// isEmpty: a nil or empty map or slice (equal for the settings).
func isEmpty(v reflect.Value) bool {
	return (v.Kind() == reflect.Map || v.Kind() == reflect.Slice) && v.Len() == 0
}

// formatValue prints a setting's value: lists comma-separated, maps as
// sorted k=v pairs, collectors by address.
func formatValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			e := v.Index(i).Interface()
			if c, ok := e.(Collector); ok {
				parts[i] = c.Address
				if c.MaxDatagramSize != 0 {
					parts[i] += fmt.Sprintf(" (max_datagram_size %d)", c.MaxDatagramSize)
				}
				continue
			}
			parts[i] = fmt.Sprint(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Map:
		parts := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			parts = append(parts, fmt.Sprintf("%v=%v", k.Interface(), v.MapIndex(k).Interface()))
		}
		sort.Strings(parts)
		return "{" + strings.Join(parts, ", ") + "}"
	case reflect.String:
		return fmt.Sprintf("%q", v.String())
	}
	return fmt.Sprint(v.Interface())
}

// clone copies s deep enough that a layer changing its maps or slices in
// place leaves the copy alone.
func clone(s Settings) Settings {
	c := s
	v := reflect.ValueOf(&c).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.Map && !f.IsNil():
			m := reflect.MakeMapWithSize(f.Type(), f.Len())
			for _, k := range f.MapKeys() {
				m.SetMapIndex(k, f.MapIndex(k))
			}
			f.Set(m)
		case f.Kind() == reflect.Slice && !f.IsNil():
			f.Set(reflect.AppendSlice(reflect.MakeSlice(f.Type(), 0, f.Len()), f))
		}
	}
	return c
}

// Seconds is a setting in whole seconds. The config file and the flags
// take a whole number (seconds) or a Go duration ("20s", "1m30s"), which
// must be a whole number of seconds.
type Seconds int

// ParseSeconds reads a number of seconds or a Go duration.
func ParseSeconds(v string) (Seconds, error) {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseInt(v, 10, 32); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("%q: must not be negative", v)
		}
		return Seconds(n), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q: want whole seconds (20) or a duration (20s, 1m)", v)
	}
	if d < 0 || d%time.Second != 0 || d > math.MaxInt32*time.Second {
		return 0, fmt.Errorf("%q: want a whole number of seconds, at least 0", v)
	}
	return Seconds(d / time.Second), nil
}

// UnmarshalTOML takes a whole number or a duration string
// (toml.Unmarshaler).
func (s *Seconds) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case int64:
		if x < 0 || x > math.MaxInt32 {
			return fmt.Errorf("%d: want 0..%d seconds", x, math.MaxInt32)
		}
		*s = Seconds(x)
		return nil
	case string:
		n, err := ParseSeconds(x)
		if err != nil {
			return err
		}
		*s = n
		return nil
	}
	return fmt.Errorf("want whole seconds (20) or a duration in quotes (\"20s\"), not %T", v)
}

// Duration is s as a time.Duration.
func (s Seconds) Duration() time.Duration { return time.Duration(s) * time.Second }
