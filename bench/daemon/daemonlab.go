package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// daemonBinary returns the absolute path of a daemon binary that exists.
func daemonBinary(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("daemon binary: %w (build it: go build -o bin/sflowswitchd ./cmd/sflowswitchd)", err)
	}
	return abs, nil
}

// daemonLab is what a run of the daemon binary needs: a lab of nports
// ports, a temp dir for logs and traffic files, and a counting sink in
// the collector namespace. close undoes all three.
type daemonLab struct {
	l    *lab
	dir  string
	sink *sink
}

func newDaemonLab(nports int) (_ *daemonLab, err error) {
	repo, err := repoRoot()
	if err != nil {
		return nil, err
	}
	d := &daemonLab{}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if d.l, err = newLab(repo, nports); err != nil {
		return nil, err
	}
	if d.dir, err = os.MkdirTemp("", "bench-daemon-"); err != nil {
		return nil, err
	}
	if d.sink, err = startSink(d.l.col(), collectorAddr+":6343"); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *daemonLab) close() {
	if d.sink != nil {
		d.sink.close()
	}
	if d.dir != "" {
		os.RemoveAll(d.dir)
	}
	if d.l != nil {
		if err := d.l.down(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}
