// Package ports is the switch's ports as the kernel shows them: Watch
// reports the links of a network namespace (Added for every existing
// link, then Added / Changed / Removed) from netlink link notifications,
// and resynchronises by listing all links again when the notification
// socket fails, so no hot-plug is missed. List is a one-shot listing,
// Select turns the configured port names or shell globs into a Selector,
// and StatsVLANs lists the VLANs of the selected ports that are data
// sources.
//
// The functions take a netns.NsHandle so that tests can watch a lab
// namespace without moving the process; a handle <= 0 means the namespace
// of the calling thread.
package ports
