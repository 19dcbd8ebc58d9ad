package backend

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestCustomArgv(t *testing.T) {
	for _, c := range []struct {
		cmd, want, err string
	}{
		{"my-server --port {port}", "my-server --port 18005", ""},
		{`srv --listen={host}:{port} --name "a b"`, "srv --listen=127.0.0.1:18005 --name a b", ""},
		{"srv --port 8000", "", "{port}"},
		{"", "", "empty"},
		{`srv --port {port} "oops`, "", "unterminated"},
	} {
		argv, err := CustomArgv(c.cmd, "127.0.0.1", 18005, "")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.cmd, err, c.err)
			}
			continue
		}
		if err != nil || strings.Join(argv, " ") != c.want {
			t.Errorf("%q: %q %v, want %q", c.cmd, argv, err, c.want)
		}
	}
}

// --backend-cmd launches a real server (this test binary as a fake
// OpenAI server) on the port the harness picked; readiness is /v1/models.
func TestCustomLaunchesOnGivenPort(t *testing.T) {
	os.Setenv("BACKEND_TEST_MODE", "custom")
	defer os.Unsetenv("BACKEND_TEST_MODE")
	o := DefaultThirdParty()
	o.BackendCmd = "'" + os.Args[0] + "' --port {port}"
	s, err := ThirdParty(context.Background(), NameCustom, &o, ThirdPartyRun{GPU: "0"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Launch(context.Background(), s, LaunchOptions{RunDir: t.TempDir(), ReadyTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	if srv.ModelID != "tiny-gpt2" || s.Env["CUDA_VISIBLE_DEVICES"] != "0" || strings.Join(s.Ready.Paths, ",") != "/v1/models" {
		t.Errorf("model %q env %v ready %v", srv.ModelID, s.Env, s.Ready.Paths)
	}
	if !strings.HasSuffix(srv.BaseURL, ":"+srv.Argv[2]) {
		t.Errorf("server at %s, argv %v", srv.BaseURL, srv.Argv)
	}
}
