// Package decode is `sflowswitchd decode`: it decodes sFlow version 5
// datagrams received on a UDP address or read from a pcap/pcapng capture
// with the strict decoder of package sflow, and prints one JSON object per
// datagram (or one error object naming the structure and offset).
package decode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

const usage = `usage: sflowswitchd decode [-listen ADDR | -pcap FILE [-port N]] [-count N]

Decodes sFlow version 5 datagrams and prints each as one JSON object per
line on stdout:

  {"source":"ip:port","version":5,"agent_address":...,"samples":[...]}

A datagram that fails the strict decoder is reported on stderr as one JSON
object per line, and decoding continues with the next datagram:

  {"error":"...","structure":"datagram.sample[0]...","offset":N,"source":"ip:port"}

(with -pcap the error also has "frame", the packet number in the capture).

Without -pcap it receives datagrams on the UDP address -listen until
interrupted (SIGINT/SIGTERM) or -count datagrams were received. With -pcap
it reads a pcap or pcapng file (Ethernet, Linux cooked SLL/SLL2 or raw IP)
and decodes the UDP datagrams sent to -port.

Exit status: 0; 1 if -pcap held a malformed datagram or on an I/O error;
2 on a usage error.

flags:
`

// Run implements `sflowswitchd decode`.
func Run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("decode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", ":6343", "UDP `address` to receive datagrams on")
	pcapFile := fs.String("pcap", "", "read datagrams from this pcap or pcapng `file` instead of listening")
	port := fs.Uint("port", 6343, "with -pcap: the UDP destination `port` of the datagrams")
	count := fs.Int("count", 0, "stop after `N` datagrams (0: no limit)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "decode: unexpected argument %q\n", fs.Arg(0))
		return 2
	case set["listen"] && set["pcap"]:
		fmt.Fprintln(stderr, "decode: -listen and -pcap exclude each other")
		return 2
	case *port > 65535:
		fmt.Fprintf(stderr, "decode: -port %d out of range\n", *port)
		return 2
	case *count < 0:
		fmt.Fprintf(stderr, "decode: -count %d is negative\n", *count)
		return 2
	}
	out := &output{stdout: bufio.NewWriterSize(stdout, 64<<10), stderr: stderr}
	if *pcapFile != "" {
		return fromPcap(*pcapFile, uint16(*port), *count, out)
	}
	return fromUDP(*listen, *count, out)
}

// output writes decoded datagrams and decode errors.
type output struct {
	stdout    *bufio.Writer
	stderr    io.Writer
	malformed int
}

// errorLine is the JSON object written to stderr for a datagram the
// decoder rejects.
type errorLine struct {
	Error     string `json:"error"`
	Structure string `json:"structure,omitempty"`
	Offset    *int   `json:"offset,omitempty"`
	Source    string `json:"source"`
	Frame     int    `json:"frame,omitempty"`
}

// datagram decodes b, received from source (frame: its packet number in a
// capture, or 0), and prints the result or the error.
func (o *output) datagram(b []byte, source string, frame int, note string) error {
	d, err := sflow.Decode(b)
	if err != nil {
		o.malformed++
		line := errorLine{Error: err.Error(), Source: source, Frame: frame}
		var de *sflow.DecodeError
		if errors.As(err, &de) {
			line.Error = de.Err.Error()
			line.Structure = de.Structure
			line.Offset = &de.Offset
		}
		if note != "" {
			line.Error = note + ": " + line.Error
		}
		return writeJSONLine(o.stderr, line)
	}
	js, err := marshalJSON(d)
	if err != nil {
		return fmt.Errorf("rendering a datagram from %s: %w", source, err)
	}
	// Splice "source" in front of the datagram's own members.
	if _, err := fmt.Fprintf(o.stdout, `{"source":%q,`, source); err != nil {
		return err
	}
	if _, err := o.stdout.Write(js[1:]); err != nil {
		return err
	}
	return o.stdout.WriteByte('\n')
}

func writeJSONLine(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// fromPcap decodes the datagrams to port in a capture file.
func fromPcap(path string, port uint16, count int, o *output) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(o.stderr, "decode: %v\n", err)
		return 1
	}
	defer f.Close()
	r, err := newPcapReader(f, port)
	if err != nil {
		fmt.Fprintf(o.stderr, "decode: %s: %v\n", path, err)
		return 1
	}
	status := 0
	for n := 0; count == 0 || n < count; n++ {
		c, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Fprintf(o.stderr, "decode: %s: %v\n", path, err)
			status = 1
			break
		}
		note := ""
		if c.Truncated {
			note = "capture truncated by its snapshot length"
		}
		if err := o.datagram(c.Payload, c.Source.String(), c.Frame, note); err != nil {
			fmt.Fprintf(o.stderr, "decode: %v\n", err)
			return 1
		}
	}
	if err := o.stdout.Flush(); err != nil {
		fmt.Fprintf(o.stderr, "decode: writing output: %v\n", err)
		return 1
	}
	if o.malformed > 0 {
		status = 1
	}
	return status
}

// fromUDP receives datagrams on addr until interrupted or count
// datagrams were received. Malformed datagrams do not change the exit
// status: a collector keeps listening.
func fromUDP(addr string, count int, o *output) int {
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		fmt.Fprintf(o.stderr, "decode: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		conn.Close() // unblocks ReadFrom
	}()
	defer conn.Close()
	buf := make([]byte, 65536) // the largest UDP payload; Decode copies what it keeps
	for n := 0; count == 0 || n < count; n++ {
		k, from, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				break // interrupted
			}
			fmt.Fprintf(o.stderr, "decode: %v\n", err)
			return 1
		}
		if err := o.datagram(buf[:k], from.String(), 0, ""); err != nil {
			fmt.Fprintf(o.stderr, "decode: %v\n", err)
			return 1
		}
		// Flush per datagram: output follows the traffic live.
		if err := o.stdout.Flush(); err != nil {
			fmt.Fprintf(o.stderr, "decode: writing output: %v\n", err)
			return 1
		}
	}
	if err := o.stdout.Flush(); err != nil {
		fmt.Fprintf(o.stderr, "decode: writing output: %v\n", err)
		return 1
	}
	return 0
}
