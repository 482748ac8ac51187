package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// A config file error says where (file:line), which setting, what was
// expected in words, and for a misspelt key the nearest known one, so that
// the operator can fix the file from the message alone.

// unknownSettings is the refusal of keys the file has and the settings do
// not: one line per key (a table's keys are not listed under the unknown
// table), with its line and the nearest known key.
func unknownSettings(name string, data []byte, und []toml.Key) error {
	var errs []error
	seen := map[string]bool{}
	more := 0
	for _, k := range und {
		if len(k) > 1 && seen[k[:len(k)-1].String()] {
			seen[k.String()] = true
			continue // under an unknown table: the table is reported
		}
		seen[k.String()] = true
		if len(errs) == MaxErrorLines {
			more++ // each key located costs a pass over the file
			continue
		}
		msg := fmt.Sprintf("config %s:%d: unknown setting %q", name, keyLine(data, k), shortError(k.String()))
		top := ""
		if len(k) == 2 && k[0] == "collector" {
			top = suggest(toml.Key{k[1]})
		}
		if k.String() == "sflow" {
			msg += ` (hsflowd.conf syntax: keep that file and name it with hsflowd_conf = "/etc/hsflowd.conf")`
		} else if s := suggest(k); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		} else if top != "" {
			// TOML: every key after a [[collector]] header is that
			// collector's, up to the next header.
			msg += fmt.Sprintf(" (the setting %q goes before the first [[collector]]: the keys after it belong to that collector)", top)
		} else {
			msg += " (see sflowswitchd(8), CONFIGURATION)"
		}
		errs = append(errs, errors.New(msg))
	}
	if more > 0 {
		errs = append(errs, fmt.Errorf("and %d more unknown settings", more))
	}
	return errors.Join(errs...)
}

// keyLine returns the line of key k in the TOML text data: the line of
// its last part as a key ("k =") or as a table header ("[k]", "[[k]]")
// after the line of its parent's header; 0 when not found.
func keyLine(data []byte, k toml.Key) int {
	from := 0
	if len(k) > 1 {
		from = headerLine(data, k[:len(k)-1].String())
	}
	last := k[len(k)-1]
	for i, l := range bytes.Split(data, []byte("\n")) {
		if i+1 < from {
			continue
		}
		t := strings.TrimSpace(string(l))
		t = strings.TrimLeft(t, "[")
		t = strings.Trim(t, `"'`)
		if strings.HasPrefix(t, last) {
			rest := strings.TrimLeft(strings.TrimPrefix(t, last), `"' `)
			if strings.HasPrefix(rest, "=") || strings.HasPrefix(rest, "]") {
				return i + 1
			}
		}
	}
	return from
}

// headerLine is the line of the table header [name] or [[name]], 0 if none.
func headerLine(data []byte, name string) int {
	for i, l := range bytes.Split(data, []byte("\n")) {
		t := strings.TrimSpace(string(l))
		if t == "["+name+"]" || t == "[["+name+"]]" {
			return i + 1
		}
	}
	return 0
}

// suggest returns the known key nearest to k (at most a third of its
// letters apart), "" if none is near.
func suggest(k toml.Key) string {
	known := Keys()
	if len(k) == 2 && k[0] == "collector" {
		known = collectorKeys()
	} else if len(k) != 1 {
		return ""
	}
	word := k[len(k)-1]
	best, bestD := "", max(2, len(word)/3)+1
	for _, c := range known {
		if d := editDistance(strings.ToLower(word), c); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		// A prefix or a part of a longer key ("rate" for "sampling_rate").
		for _, c := range known {
			if len(word) >= 4 && strings.Contains(c, strings.ToLower(word)) {
				return c
			}
		}
	}
	return best
}

// collectorKeys are the keys of a [[collector]] table.
func collectorKeys() []string {
	t := reflect.TypeOf(Collector{})
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if k := tomlKey(t.Field(i)); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// decodeErrRE splits the decoder's plain errors.
var decodeErrRE = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)

// tomlTypeRE finds the TOML value's type in the decoder's type mismatch.
var tomlTypeRE = regexp.MustCompile(`TOML value has type ([^;]+);`)

// decodeError turns the decoder's refusal into file:line, the key, what
// the file has and what the setting wants, in words.
func decodeError(name string, err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		// A type mismatch is a plain error: "toml: line N (last key
		// "k"): incompatible types: ...".
		m := decodeErrRE.FindStringSubmatch(err.Error())
		if m == nil {
			return fmt.Errorf("config %s: %s", name, shortError(err.Error()))
		}
		pe.Position.Line, _ = strconv.Atoi(m[1])
		pe.LastKey, pe.Message = m[2], m[3]
	}
	key := pe.LastKey
	where := fmt.Sprintf("config %s:%d", name, pe.Position.Line)
	if m := tomlTypeRE.FindStringSubmatch(pe.Message); m != nil && key != "" {
		got := tomlTypeWords(m[1])
		top, _, _ := strings.Cut(key, ".")
		if top == "collector" && m[1] == "map[string]any" {
			return fmt.Errorf("%s: [collector] is a single table, but collectors are a list of tables: "+
				"write [[collector]] (double brackets), once per collector, each with address = \"host:port\"", where)
		}
		if want := expected(key); want != "" {
			return fmt.Errorf("%s: %s: the file has %s; want %s", where, shortError(key), got, want)
		}
		return fmt.Errorf("%s: %s: the file has %s, which this setting does not take", where, shortError(key), got)
	}
	if key != "" {
		return fmt.Errorf("%s: %s: %s", where, shortError(key), shortError(pe.Message))
	}
	return fmt.Errorf("%s: %s", where, shortError(pe.Message))
}

// tomlTypeWords names a TOML value's Go type as the file writer sees it.
func tomlTypeWords(t string) string {
	switch {
	case strings.HasPrefix(t, "map"):
		return "a table"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case t == "string":
		return "a string"
	case t == "int64":
		return "a whole number"
	case t == "float64":
		return "a decimal number"
	case t == "bool":
		return "true or false"
	}
	return "a " + t
}

// expected says in words what the setting key (a config-file key, or
// collector.KEY) takes; "" for an unknown key.
func expected(key string) string {
	if d, ok := durationKeys[key]; ok {
		return d
	}
	t := reflect.TypeOf(Settings{})
	parts := strings.Split(key, ".")
	if len(parts) == 2 && parts[0] == "collector" {
		t, parts = reflect.TypeOf(Collector{}), parts[1:]
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tomlKey(f) != parts[0] {
			continue
		}
		switch f.Type.Kind() {
		case reflect.String:
			return `a string in quotes, e.g. ` + parts[0] + ` = "..."`
		case reflect.Bool:
			return "true or false"
		case reflect.Int, reflect.Int64, reflect.Uint32, reflect.Uint64:
			return "a whole number, e.g. " + parts[0] + " = 1000"
		case reflect.Slice:
			if f.Type.Elem().Kind() == reflect.Struct {
				return `[[collector]] tables (double brackets), one per collector, each with address = "host:port"`
			}
			return `a list of strings, e.g. ` + parts[0] + ` = ["swp1", "swp2"]`
		case reflect.Map:
			if f.Type.Elem().Kind() == reflect.String {
				return `a table of names to strings, e.g. ` + parts[0] + ` = { swp1 = "egress" }`
			}
			return `a table of names to whole numbers, e.g. ` + parts[0] + ` = { swp1 = 1000 }`
		}
	}
	return ""
}

// durationKeys are the settings in seconds that also take a duration.
var durationKeys = map[string]string{
	"polling":      `a whole number of seconds or a duration in quotes, e.g. polling = 20 or polling = "20s"`,
	"apm_interval": `a whole number of seconds or a duration in quotes, e.g. apm_interval = 60 or apm_interval = "1m"`,
}

// locate prefixes every line of a validation refusal that names a
// setting of the config file (its first word is the key) with the file
// and the line of that key, and names the source of the others (a flag,
// hsflowd.conf), so that the operator knows where to fix it.
func locate(err error, file string, data []byte, src Sources, hsflowd string) error {
	if err == nil {
		return nil
	}
	lines := strings.Split(err.Error(), "\n")
	keys := Keys()
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for i, l := range lines[:min(len(lines), MaxErrorLines)] { // the rest is cut (boundedError)
		for _, k := range keys {
			if !strings.HasPrefix(l, k+" ") && !strings.HasPrefix(l, k+":") && !strings.HasPrefix(l, k+" ") {
				continue
			}
			switch src.Of(k) {
			case SourceFile:
				lines[i] = fmt.Sprintf("config %s:%d: %s", file, keyLine(data, toml.Key{k}), l)
			case SourceFlag:
				lines[i] = fmt.Sprintf("flag -%s: %s", strings.ReplaceAll(k, "_", "-"), l)
			case SourceHsflowd:
				lines[i] = fmt.Sprintf("hsflowd config %s: %s", hsflowd, l)
			}
			break
		}
	}
	return locatedError{msg: strings.Join(lines, "\n"), err: err}
}

// locatedError is a refusal with its lines located (locate); errors.Is
// and errors.As see the original.
type locatedError struct {
	msg string
	err error
}

func (e locatedError) Error() string { return e.msg }
func (e locatedError) Unwrap() error { return e.err }
