package sonic

import "fmt"

// Problem is one bad value read from Redis: its database, key and field,
// the value and why it was refused. The key (or only the field, where the
// rest of the key stays usable) is skipped; the rest is read.
type Problem struct {
	DB, Key, Field, Value, Reason string
}

// Table is the key's table name (the key up to its first separator), for
// metrics.
func (p Problem) Table() string {
	for i := 0; i < len(p.Key); i++ {
		if p.Key[i] == '|' || p.Key[i] == ':' {
			return p.Key[:i]
		}
	}
	return p.Key
}

func (p Problem) String() string {
	return fmt.Sprintf("%s %s %s=%q: %s", p.DB, p.Key, p.Field, p.Value, p.Reason)
}

// problems collects the problems of one read.
type problems []Problem

func (ps *problems) add(db, key, field, value, format string, args ...any) {
	*ps = append(*ps, Problem{DB: db, Key: key, Field: field, Value: value, Reason: fmt.Sprintf(format, args...)})
}
