module github.com/sflowswitchd/sflowswitchd/bench

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0
	github.com/netsampler/goflow2/v2 v2.2.6
	github.com/sflowswitchd/sflowswitchd v0.0.0
	github.com/vishvananda/netlink v1.3.1
	golang.org/x/net v0.59.0
	golang.org/x/sys v0.49.0
	gonum.org/v1/plot v0.17.0
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

// The benchmarks measure the repository's own code, never a published
// version of it.
replace github.com/sflowswitchd/sflowswitchd => ../
