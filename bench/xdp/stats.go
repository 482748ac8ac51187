package main

import (
	"fmt"
	"slices"
	"strings"
)

// median returns the median of xs (mean of the middle two for an even
// count), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// list formats xs with format f, comma separated (the per-round values
// printed next to a median).
func list(f string, xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(f, x)
	}
	return strings.Join(parts, ", ")
}

// series collects per-round values by name, in round order.
type series struct {
	vals map[string][]float64
}

func newSeries() *series { return &series{vals: make(map[string][]float64)} }

func (s *series) add(name string, v float64) { s.vals[name] = append(s.vals[name], v) }

func (s *series) median(name string) float64 { return median(s.vals[name]) }
