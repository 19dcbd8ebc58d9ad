package profile

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestControllerSendsAPIKey: /start_profile and /stop_profile carry the
// bearer key of a server launched with --api-key (they require it).
func TestControllerSendsAPIKey(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.Path+" "+r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	ctl := newController(srv.URL, "sk-prof", time.Second)
	defer ctl.close()
	for _, what := range []string{"start_profile", "stop_profile"} {
		if _, err := ctl.post(context.Background(), what, nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[0] != "/start_profile Bearer sk-prof" || got[1] != "/stop_profile Bearer sk-prof" {
		t.Errorf("requests %q, want both with Bearer sk-prof", got)
	}
}
