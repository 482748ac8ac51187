package httpsflow_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/sflowswitchd/sflowswitchd/apps/app"
	"github.com/sflowswitchd/sflowswitchd/apps/httpsflow"
)

// printReporter prints what the middleware reports. A real service uses
// httpsflow.DialAPI (the daemon's local JSON API) or an EngineReporter.
type printReporter struct{}

func (printReporter) ReportFlow(f *app.FlowSample) error {
	fmt.Println("sampled:", f.HTTP.Method, f.HTTP.URI, f.HTTP.Status, "port", f.ServicePort)
	return nil
}

func (printReporter) ReportCounters(c *app.CounterSample) error { return nil }

// Wrap a handler so that 1 request in SamplingRate is reported as an sFlow
// http_request sample and every request is counted in http_counters.
func Example() {
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	m, err := httpsflow.New(httpsflow.Config{
		AppName:      "web",
		ServicePort:  8080, // the lowest port the server listens on
		SamplingRate: 1,    // every request, for the example; 100 by default
		Reporter:     printReporter{},
	}, hello)
	if err != nil {
		panic(err)
	}
	// In a server: http.ListenAndServe(":8080", m), and go m.Run(ctx) to
	// send the counters every PollingInterval.
	m.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/index.html", nil))
	c := m.Counters()
	fmt.Println("GET requests:", c.MethodGetCount, "2XX:", c.Status2XXCount)
	// Output:
	// sampled: GET /index.html 200 port 8080
	// GET requests: 1 2XX: 1
}
