module github.com/sflowswitchd/sflowswitchd

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/cilium/ebpf v0.22.0
	github.com/gosnmp/gosnmp v1.47.0
	github.com/netsampler/goflow2/v2 v2.2.6
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/sys v0.49.0
)

require golang.org/x/net v0.48.0 // indirect
