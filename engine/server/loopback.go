package server

import (
	"net"
	"strings"
)

// IsLoopbackHost reports whether a listen host (roseinfer serve --host: an
// IP or a name, no port) can only be reached from this machine: an address
// in 127.0.0.0/8, ::1, or the name localhost. Anything else is treated as
// reachable from the network — "" and 0.0.0.0 bind every interface, and any
// other name may resolve to a public address, so none is looked up.
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
