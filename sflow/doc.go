// Package sflow encodes and decodes sFlow version 5 datagrams
// (spec/sflow_version_5.txt) and the host, HTTP and application structures
// of spec/sflow_host.txt, spec/sflow_http.txt and spec/sflow_application.txt.
//
// Encoding appends XDR into caller-owned buffers and allocates nothing:
// every record type has an AppendXDR method, samples and datagrams are
// framed by AppendSample and DatagramWriter, which keeps each datagram under
// a receiver's maximum datagram size.
//
// Decoding is strict: every declared length is checked against the bytes
// present, records of unknown formats are kept as UnknownRecord (skipped by
// their length, as section "data_format" of the spec requires), and bytes
// left over after a structure are an error. Every error is a *DecodeError
// naming the structure and the byte offset in the datagram.
package sflow
