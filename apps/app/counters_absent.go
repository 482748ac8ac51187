package app

import (
	"bytes"
	"encoding/json"

	"github.com/sflowswitchd/sflowswitchd/sflow"
)

// Counters a message leaves out are sent as "not available"
// (sflow.CounterUnavailable32), as the host agent does (mod_json.c
// json_counter32: every app_operations counter and app_workers'
// req_delayed and req_dropped), and as the spec asks for counters an
// agent does not have. Gauges left out are 0, as in the host agent.

// jsonStatusCounts is app_operations (the message's app_name is its
// application) with absent counters unavailable.
type jsonStatusCounts sflow.AppStatusCounts

// UnmarshalJSON implements json.Unmarshaler.
func (o *jsonStatusCounts) UnmarshalJSON(b []byte) error {
	type plain jsonStatusCounts
	u := sflow.CounterUnavailable32
	p := plain{Success: u, Other: u, Timeout: u, InternalError: u, BadRequest: u, Forbidden: u,
		TooLarge: u, NotImplemented: u, NotFound: u, Unavailable: u, Unauthorized: u}
	if err := decodeStrict(b, &p); err != nil {
		return err
	}
	*o = jsonStatusCounts(p)
	return nil
}

// jsonWorkers is app_workers with absent counters unavailable.
type jsonWorkers sflow.AppWorkers

// UnmarshalJSON implements json.Unmarshaler.
func (w *jsonWorkers) UnmarshalJSON(b []byte) error {
	type plain jsonWorkers
	p := plain{ReqDelayed: sflow.CounterUnavailable32, ReqDropped: sflow.CounterUnavailable32}
	if err := decodeStrict(b, &p); err != nil {
		return err
	}
	*w = jsonWorkers(p)
	return nil
}

// decodeStrict decodes one JSON value refusing unknown fields (an
// UnmarshalJSON method does not inherit its caller's setting).
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
