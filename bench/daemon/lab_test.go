package main

import "testing"

// TestTrafgenConf pins the frame trafgen sends to lab.sh's addressing
// (test/lab/lab.sh: host I has 198.18.0.(10+I) and MAC 02:00:00:00:HH:LL with
// HHLL the decimal digits of 10+I).
func TestTrafgenConf(t *testing.T) {
	want := "{ eth(da=02:00:00:00:01:05, sa=02:00:00:00:00:11), ipv4(saddr=198.18.0.11, daddr=198.18.0.105, ttl=64), udp(sport=40000, dport=7000), fill(0x54, 18) }\n"
	if got := trafgenConf(1, 95); got != want {
		t.Errorf("trafgenConf(1, 95) =\n%s\nwant\n%s", got, want)
	}
}
