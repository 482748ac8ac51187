package host

import (
	"bytes"
	"errors"
	"fmt"
)

// Parsing helpers for the kernel's text files. They work on []byte and do
// not allocate (strconv would need a string per number).

// errSyntax is the cause of every parse error; callers wrap it with the
// file and the offending text.
var errSyntax = errors.New("unexpected content")

// nextLine splits off the first line of b (without its newline).
func nextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// splitFields appends the whitespace-separated fields of line to dst[:0].
func splitFields(dst [][]byte, line []byte) [][]byte {
	dst = dst[:0]
	i := 0
	for i < len(line) {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		start := i
		for i < len(line) && !isSpace(line[i]) {
			i++
		}
		if i > start {
			dst = append(dst, line[start:i])
		}
	}
	return dst
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// parseUint parses a decimal unsigned integer (64 bits, no sign).
func parseUint(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, fmt.Errorf("%w: empty number", errSyntax)
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: bad number %q", errSyntax, b)
		}
		d := uint64(c - '0')
		if v > (^uint64(0)-d)/10 {
			return 0, fmt.Errorf("%w: number %q overflows 64 bits", errSyntax, b)
		}
		v = v*10 + d
	}
	return v, nil
}

// parseDecimal parses a non-negative decimal with an optional fraction,
// as the kernel prints load averages ("16.84"), uptimes ("889.45") and
// cpuinfo frequencies ("2000.000").
func parseDecimal(b []byte) (float64, error) {
	intPart, frac, hasFrac := bytes.Cut(b, []byte{'.'})
	i, err := parseUint(intPart)
	if err != nil {
		return 0, err
	}
	v := float64(i)
	if hasFrac && len(frac) > 0 {
		f, err := parseUint(frac)
		if err != nil {
			return 0, err
		}
		scale := 1.0
		for range frac {
			scale *= 10
		}
		v += float64(f) / scale
	}
	return v, nil
}

// uintFields parses the fields of fs into dst, one per field, stopping at
// len(dst). It returns how many it parsed.
func uintFields(dst []uint64, fs [][]byte) (int, error) {
	n := 0
	for ; n < len(dst) && n < len(fs); n++ {
		v, err := parseUint(fs[n])
		if err != nil {
			return n, err
		}
		dst[n] = v
	}
	return n, nil
}

// parseKeyValues scans lines of the form "key value ..." (separated by
// spaces or a colon, as in /proc/meminfo and /proc/vmstat) and calls set
// for each key with its first numeric value. Lines whose value is not a
// number are skipped: these files gain fields across kernel versions.
func parseKeyValues(b []byte, set func(key []byte, v uint64)) {
	for len(b) > 0 {
		var line []byte
		line, b = nextLine(b)
		key, val, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			key, val, ok = bytes.Cut(line, []byte{' '})
			if !ok {
				continue
			}
		}
		val = bytes.TrimLeft(val, " \t")
		if i := bytes.IndexAny(val, " \t"); i >= 0 {
			val = val[:i]
		}
		v, err := parseUint(val)
		if err != nil {
			continue
		}
		set(key, v)
	}
}
