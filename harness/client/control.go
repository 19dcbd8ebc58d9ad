package client

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// Control posts body as JSON (nil: a bare POST) to url, with apiKey as a
// bearer token when set, within timeout, and returns the answer (its first
// MiB) and the HTTP status. err is a failure to encode or to get an answer
// at all; the caller words a non-200 answer its own way. The harness's
// calls to a server's control routes (start_profile, stop_profile) go
// through it.
func Control(ctx context.Context, hc *http.Client, url, apiKey string, body any, timeout time.Duration) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, 0, err
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, rd)
	if err != nil {
		return nil, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	ans, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return ans, resp.StatusCode, nil
}
