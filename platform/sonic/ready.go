package sonic

// SYSTEM_READY|SYSTEM_STATE in STATE_DB: Status is UP once the switch's
// services are up (sonic-buildimage system-health's sysmonitor; hsflowd
// waits for it in mod_sonic.c's HSP_SONIC_STATE_WAIT_READY).
const (
	systemReady       = "SYSTEM_READY"
	systemReadyKey    = "SYSTEM_STATE"
	fieldStatus       = "Status"
	systemReadyStatus = "UP"
)

// DefaultWaitReady is how long the agent waits for SYSTEM_READY before it
// reports the ports anyway (hsflowd's sonic { waitReady }, 180 s).
const DefaultWaitReady = 180

// systemIsReady reads SYSTEM_READY|SYSTEM_STATE's hash.
func systemIsReady(h map[string]string) bool { return h[fieldStatus] == systemReadyStatus }
