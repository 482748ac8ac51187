package drops

import (
	"bufio"
	"bytes"
	"os"
	"slices"
	"strconv"
	"sync"
)

// kernelSymbols resolves kernel text addresses to function names from
// /proc/kallsyms, read once. Names are kept in one byte slice (the file
// has ~10^5 text symbols); resolved addresses are cached, since drops come
// from few call sites.
type kernelSymbols struct {
	addrs []uint64 // sorted start addresses of text symbols
	offs  []uint32 // offs[i]:offs[i+1] is the name of addrs[i] in names
	names []byte

	mu    sync.Mutex
	cache map[uint64]string
}

// loadKernelSymbols reads the text symbols of path (/proc/kallsyms). When
// the file cannot be read or shows every address as 0 (kptr_restrict
// without CAP_SYSLOG), it returns an empty table: lookups return "".
func loadKernelSymbols(path string) *kernelSymbols {
	k := &kernelSymbols{cache: map[uint64]string{}}
	f, err := os.Open(path)
	if err != nil {
		return k
	}
	defer f.Close()
	type sym struct {
		addr uint64
		name []byte
	}
	var syms []sym
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "ffffffff81000000 T _stext [module]"
		line := sc.Bytes()
		f := bytes.Fields(line)
		if len(f) < 3 || len(f[1]) != 1 || (f[1][0] != 't' && f[1][0] != 'T') {
			continue
		}
		a, err := strconv.ParseUint(string(f[0]), 16, 64)
		if err != nil || a == 0 {
			continue
		}
		syms = append(syms, sym{a, bytes.Clone(f[2])})
	}
	slices.SortFunc(syms, func(a, b sym) int {
		switch {
		case a.addr < b.addr:
			return -1
		case a.addr > b.addr:
			return 1
		}
		return 0
	})
	for _, s := range syms {
		k.addrs = append(k.addrs, s.addr)
		k.offs = append(k.offs, uint32(len(k.names)))
		k.names = append(k.names, s.name...)
	}
	k.offs = append(k.offs, uint32(len(k.names)))
	return k
}

// lookup returns the function containing addr, or "".
func (k *kernelSymbols) lookup(addr uint64) string {
	if k == nil || len(k.addrs) == 0 || addr == 0 {
		return ""
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if s, ok := k.cache[addr]; ok {
		return s
	}
	i, found := slices.BinarySearch(k.addrs, addr)
	if !found {
		i--
	}
	s := ""
	if i >= 0 {
		s = string(k.names[k.offs[i]:k.offs[i+1]])
	}
	k.cache[addr] = s
	return s
}
