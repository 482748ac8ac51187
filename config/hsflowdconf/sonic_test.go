package hsflowdconf

import (
	"os"
	"strings"
	"testing"
)

func TestParseSonic(t *testing.T) {
	data, err := os.ReadFile("testdata/sonic.hsflowd.conf")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("sonic.hsflowd.conf", data)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sonic == nil || c.Sonic.WaitReady == nil || c.Sonic.WaitReady.V != 60 || !c.Sonic.UnixSock || c.Sonic.Pos != (Pos{6, 3}) {
		t.Fatalf("sonic block %+v", c.Sonic)
	}
	if c.DropmonLimit == nil || c.DropmonLimit.V != 50 {
		t.Errorf("dropmon %+v", c.DropmonLimit)
	}
	for src, want := range map[string]string{
		"sflow { sonic { unixsock = off } }":   "",
		"sflow { sonic { waitReady = -1 } }":   "waitReady",
		"sflow { sonic { unixsock = maybe } }": "unixsock",
		"sflow { sonic { colour = red } }":     "unknown setting \"colour\" in sonic",
		"sflow { sonic { x { } } }":            "unexpected block",
	} {
		c, err := Parse("t", []byte(src))
		if want == "" {
			if err != nil || c.Sonic == nil || c.Sonic.UnixSock {
				t.Errorf("%s: %+v %v", src, c, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", src, err, want)
		}
	}
}
