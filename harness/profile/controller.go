package profile

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/roseinfer/roseinfer/harness/client"
)

// controller sends a server's profiler requests: POST <root>/start_profile
// and /stop_profile, each with its own timeout (the original's 300 s: a
// server may take minutes to flush its traces).
type controller struct {
	baseURL string
	apiKey  string // sent as a bearer token when set (the profile routes require it)
	client  *http.Client
	timeout time.Duration
}

func newController(baseURL, apiKey string, timeout time.Duration) *controller {
	return &controller{baseURL: strings.TrimRight(baseURL, "/"), apiKey: apiKey, timeout: timeout,
		client: &http.Client{Transport: &http.Transport{Proxy: nil}}}
}

// post sends body as JSON (nil: no body at all, as the original's bare
// POSTs) and returns the answer. Anything but 200 is "<what> failed: ...",
// the original's profile_error text.
func (c *controller) post(ctx context.Context, what string, body any) ([]byte, error) {
	ans, status, err := client.Control(ctx, c.client, c.baseURL+"/"+what, c.apiKey, body, c.timeout)
	if err != nil {
		return nil, fmt.Errorf("%s failed: %w", what, err)
	}
	if status != http.StatusOK {
		return ans, fmt.Errorf("%s failed: HTTP %d: %s", what, status, strings.TrimSpace(string(ans)))
	}
	return ans, nil
}

func (c *controller) close() { c.client.CloseIdleConnections() }
