package profile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
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
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s failed: %w", what, err)
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/"+what, rd)
	if err != nil {
		return nil, fmt.Errorf("%s failed: %w", what, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s failed: %w", what, err)
	}
	defer resp.Body.Close()
	ans, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return ans, fmt.Errorf("%s failed: HTTP %d: %s", what, resp.StatusCode, strings.TrimSpace(string(ans)))
	}
	return ans, nil
}

func (c *controller) close() { c.client.CloseIdleConnections() }
