// Package inforce is the running daemon's account of the settings in
// force: the agent address and why it was chosen, the collectors, each
// port's rate (configured and the kernel's) and direction, polling, and
// where every setting came from. The daemon writes it to its state
// directory (FileName) whenever the configuration it applies changes;
// `sflowswitchd show` reads and prints it.
package inforce

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"
)

// FileName is the file in the state directory.
const FileName = "inforce.json"

// State is the settings in force.
type State struct {
	Version string    `json:"version"`
	Commit  string    `json:"commit"`
	PID     int       `json:"pid"`
	Written time.Time `json:"written"`
	// ConfigFile and HsflowdConf are the files read ("" = none).
	ConfigFile  string `json:"config_file,omitempty"`
	HsflowdConf string `json:"hsflowd_conf,omitempty"`
	Agent       Agent  `json:"agent"`
	// Collectors are the receivers in force, static and SNMP-set.
	Collectors []Collector `json:"collectors"`
	// Polling is the counter polling interval in seconds (0 = off).
	Polling       int    `json:"polling"`
	PollingSource string `json:"polling_source"`
	// HeaderBytes is the sampled header size.
	HeaderBytes int     `json:"header_bytes"`
	Ports       []Port  `json:"ports"`
	Settings    []Value `json:"settings"`
}

// Agent is the agent address in force.
type Agent struct {
	Address   string `json:"address"`
	Interface string `json:"interface,omitempty"`
	// Why says how it was chosen.
	Why    string `json:"why"`
	Source string `json:"source"`
}

// Collector is one receiver in force.
type Collector struct {
	Receiver int    `json:"receiver"`
	Address  string `json:"address"`
	// Name is the host name configured while it is not resolved.
	Name            string `json:"name,omitempty"`
	MaxDatagramSize int    `json:"max_datagram_size,omitempty"`
	Source          string `json:"source"`
}

// Port is one sampled port.
type Port struct {
	Name    string `json:"name"`
	IfIndex uint32 `json:"ifindex"`
	// Rate is the configured sampling rate (1 in Rate, as exported in
	// sampling_rate); KernelRate the power of two the kernel samples at
	// (each sample then kept with probability KernelRate/Rate).
	Rate       uint32 `json:"rate"`
	KernelRate uint32 `json:"kernel_rate"`
	Direction  string `json:"direction"`
	Monitor    bool   `json:"monitor,omitempty"`
	RateSource string `json:"rate_source"`
}

// Value is one setting: its config-file key, value and source.
type Value struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

// Write replaces the file at path with st (written beside it, then
// renamed), readable by the state directory's readers only (0640).
func Write(path string, st State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Chmod(0o640)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Read reads the file at path.
func Read(path string) (State, error) {
	var st State
	b, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// Render prints st for an operator.
func Render(w io.Writer, st State) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "sflowswitchd %s (commit %s), pid %d, state of %s\n", st.Version, st.Commit, st.PID, st.Written.Format(time.RFC3339))
	if st.ConfigFile != "" {
		fmt.Fprintf(tw, "config file:\t%s\n", st.ConfigFile)
	}
	if st.HsflowdConf != "" {
		fmt.Fprintf(tw, "hsflowd.conf:\t%s\n", st.HsflowdConf)
	}
	agent := st.Agent.Address
	if agent == "" {
		agent = "none"
	}
	if st.Agent.Interface != "" {
		agent += " (" + st.Agent.Interface + ")"
	}
	fmt.Fprintf(tw, "agent address:\t%s\t[%s]\n", agent, st.Agent.Source)
	fmt.Fprintf(tw, "  chosen:\t%s\n", st.Agent.Why)
	fmt.Fprintf(tw, "polling:\t%s\t[%s]\n", polling(st.Polling), st.PollingSource)
	fmt.Fprintf(tw, "header bytes:\t%d\n", st.HeaderBytes)
	fmt.Fprintf(tw, "\ncollectors:\n")
	if len(st.Collectors) == 0 {
		fmt.Fprintf(tw, "  none\n")
	}
	for _, c := range st.Collectors {
		addr := c.Address
		if c.Name != "" {
			addr = c.Name + " (not resolved)"
		}
		extra := ""
		if c.MaxDatagramSize > 0 {
			extra = fmt.Sprintf("max datagram %d", c.MaxDatagramSize)
		}
		fmt.Fprintf(tw, "  receiver %d\t%s\t%s\t[%s]\n", c.Receiver, addr, extra, c.Source)
	}
	fmt.Fprintf(tw, "\nports:\n  PORT\tIFINDEX\tRATE 1-IN\tKERNEL 1-IN\tDIRECTION\tSOURCE\n")
	if len(st.Ports) == 0 {
		fmt.Fprintf(tw, "  none sampled\n")
	}
	for _, p := range st.Ports {
		dir := p.Direction
		if p.Monitor {
			dir += " (monitor)"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%s\t[%s]\n", p.Name, p.IfIndex, p.Rate, p.KernelRate, dir, p.RateSource)
	}
	fmt.Fprintf(tw, "\nsettings:\n")
	for _, v := range st.Settings {
		fmt.Fprintf(tw, "  %s\t%s\t[%s]\n", v.Key, v.Value, v.Source)
	}
	return tw.Flush()
}

func polling(s int) string {
	if s == 0 {
		return "off"
	}
	return (time.Duration(s) * time.Second).String()
}
