package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// metrics is one scrape of the daemon's Prometheus endpoint: the value of
// every series by metric name and label set.
type metrics map[string]map[string]float64

// sum adds up every series of metric name.
func (m metrics) sum(name string) float64 {
	var t float64
	for _, v := range m[name] {
		t += v
	}
	return t
}

// sumWhere adds up the series of metric name whose labels contain sub
// (e.g. `reason="send_error"`).
func (m metrics) sumWhere(name, sub string) float64 {
	var t float64
	for labels, v := range m[name] {
		if strings.Contains(labels, sub) {
			t += v
		}
	}
	return t
}

// scraper fetches /metrics over a TCP connection made inside the switch
// namespace, where the daemon listens.
type scraper struct {
	client *http.Client
	url    string
}

func newScraper(ns, addr string) *scraper {
	dial := func(ctx context.Context, network, a string) (net.Conn, error) {
		var c net.Conn
		err := inNetns(ns, func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, a)
			return err
		})
		return c, err
	}
	return &scraper{
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}},
		url:    "http://" + addr + "/metrics",
	}
}

func (s *scraper) scrape() (metrics, error) {
	resp, err := s.client.Get(s.url)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", s.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", s.url, resp.Status)
	}
	m := metrics{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		series := line[:sp]
		name, labels := series, ""
		if i := strings.IndexByte(series, '{'); i >= 0 {
			name, labels = series[:i], series[i:]
		}
		if m[name] == nil {
			m[name] = map[string]float64{}
		}
		m[name][labels] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.url, err)
	}
	return m, nil
}
