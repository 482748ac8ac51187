package config

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// The TOML decoder (BurntSushi/toml) cannot bound itself: its memory
// grows with the square of the nesting depth of arrays and inline tables
// (15 KB of "a = {b={b=..." took 750 MB, 60 KB took
// 10 GB, 1 MB of "[" 903 MB). So the config file is checked before the
// decoder sees it (checkTOMLShape), and what the decoder says about a
// refused file is cut to a short line (shortError).

// MaxTOMLNesting is the deepest nesting of arrays and inline tables a
// config file may have. The settings need 2 (collector = [{ address =
// "..." }]); the bound leaves room for any way of writing them. A table
// header ("[[collector]]") counts while it is open.
const MaxTOMLNesting = 8

// MaxErrorBytes bounds the text of a refusal taken from a file's content
// (the decoder's message, the unknown keys listed): a refusal is logged as
// one line, and the file may be up to MaxConfigBytes of anything.
const MaxErrorBytes = 240

// checkTOMLShape refuses TOML text whose arrays and inline tables nest
// deeper than MaxTOMLNesting. It follows TOML's lexical rules only as far
// as brackets are concerned: strings (basic, literal, multi-line) and
// comments hide their brackets. Text that is not valid TOML may pass; the
// decoder refuses it then, with the depth bounded.
func checkTOMLShape(data []byte) error {
	depth, line := 0, 1
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '\n':
			line++
		case '#':
			for i < len(data) && data[i] != '\n' {
				i++
			}
			line++
		case '"', '\'':
			var n int
			i, n = skipTOMLString(data, i)
			line += n
		case '[', '{':
			if depth++; depth > MaxTOMLNesting {
				return fmt.Errorf("line %d: arrays and inline tables nested more than %d deep", line, MaxTOMLNesting)
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}

// skipTOMLString returns the index of the last byte of the string that
// starts at data[i] (a quote), and the newlines in it. An unterminated
// string runs to the end of data (or of its line, for a single-line
// string): the decoder refuses it.
func skipTOMLString(data []byte, i int) (int, int) {
	q := data[i]
	triple := i+2 < len(data) && data[i+1] == q && data[i+2] == q
	lines := 0
	if triple {
		for j := i + 3; j < len(data); j++ {
			switch {
			case data[j] == '\n':
				lines++
			case data[j] == '\\' && q == '"':
				j++
				if j < len(data) && data[j] == '\n' {
					lines++
				}
			case data[j] == q && j+2 < len(data) && data[j+1] == q && data[j+2] == q:
				// Up to two more quotes may close it ("""a"""" is a").
				j += 2
				for k := 0; k < 2 && j+1 < len(data) && data[j+1] == q; k++ {
					j++
				}
				return j, lines
			}
		}
		return len(data), lines
	}
	for j := i + 1; j < len(data); j++ {
		switch {
		case data[j] == '\n':
			return j - 1, 0 // unterminated: the newline is seen by the caller
		case data[j] == '\\' && q == '"':
			if j+1 < len(data) && data[j+1] != '\n' {
				j++
			}
		case data[j] == q:
			return j, 0
		}
	}
	return len(data), 0
}

// decodeTOML decodes the config file name's TOML text data into v, after
// checkTOMLShape; every error is one short line.
func decodeTOML(name string, data []byte, v any) (toml.MetaData, error) {
	if err := checkTOMLShape(data); err != nil {
		return toml.MetaData{}, fmt.Errorf("config %s: %w", name, err)
	}
	md, err := toml.Decode(string(data), v)
	if err != nil {
		return md, decodeError(name, err)
	}
	return md, nil
}

// shortError returns s on one line of at most MaxErrorBytes bytes (the
// cut is marked), valid UTF-8.
func shortError(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) <= MaxErrorBytes {
		return s
	}
	cut := MaxErrorBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes cut)", s[:cut], len(s)-cut)
}

// MaxErrorLines bounds the problems one refusal lists (Validate reports
// every problem at once; a file can hold thousands).
const MaxErrorLines = 8

// boundedError is a refusal whose text is at most MaxErrorLines lines of
// at most MaxErrorBytes bytes each; errors.Is and errors.As see the
// original.
type boundedError struct{ err error }

func (e boundedError) Unwrap() error { return e.err }

func (e boundedError) Error() string {
	lines := strings.Split(e.err.Error(), "\n")
	out := make([]string, 0, MaxErrorLines+1)
	for _, l := range lines[:min(len(lines), MaxErrorLines)] {
		out = append(out, shortError(l))
	}
	if len(lines) > MaxErrorLines {
		out = append(out, fmt.Sprintf("and %d more problems", len(lines)-MaxErrorLines))
	}
	return strings.Join(out, "\n")
}

// bound returns err with its text bounded (boundedError), nil for nil.
func bound(err error) error {
	if err == nil {
		return nil
	}
	return boundedError{err}
}
