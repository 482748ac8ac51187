// Package e2e holds the end-to-end tests of the sflowswitchd daemon: the
// real daemon binary runs in the switch namespace of a netlab lab, traffic
// comes from the lab's host namespaces and the datagrams are received in
// the collector namespace and checked with independent decoders (goflow2,
// tshark) next to our own. See README.md for the list of tests. The tests
// need root; they are skipped otherwise (a failure when CI is set).
package e2e
