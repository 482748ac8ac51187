package app

import "testing"

// The flow_sample of hsflowd's json_example (test/e2e/testdata/hsflowd),
// as the shell sends it.
const hsflowdExampleFlow = `{"flow_sample":{"app_name":"example.service","client":true,"sampling_rate":100,"app_operation":{"operation":"task.start","attributes":"id=123&user=root","status_descr":"OK","status":0,"req_bytes":43,"resp_bytes":234,"uS":2000},"app_initiator":{"actor":"123"},"app_target":{"actor":"231"},"app_parent_context":{"application":"my_parent_app","operation":"my_parent_op", "attributes":"my_parent_attrib=1"}, "extended_socket_ipv6":{"protocol":6,"local_ip":"fec0::1:c:2908:3350","remote_ip":"fec0::1:20c:29ff:fe44:9bad","local_port":123,"remote_port":43032}}}` + "\n"

// BenchmarkParseJSON measures parsing the host agent's messages (the JSON
// API's per-message cost before the engine's queue).
func BenchmarkParseJSON(b *testing.B) {
	for _, bc := range []struct{ name, msg string }{
		{"hsflowd_flow_sample", hsflowdExampleFlow},
		{"rtmetric", rtmetricExample},
		{"rtflow", rtflowExample},
	} {
		b.Run(bc.name, func(b *testing.B) {
			msg := []byte(bc.msg)
			b.ReportAllocs()
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				if _, err := ParseJSON(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
