package backend

import (
	"errors"
	"strconv"
	"strings"
)

// CustomArgv turns --backend-cmd into an argv for one launch: split like a
// shell (quotes, no expansion), then {port} and {host} replaced in every
// argument.
func CustomArgv(cmd, host string, port int, apiKey string) ([]string, error) {
	args, err := SplitArgs(cmd)
	if err != nil {
		return nil, errors.New("--backend-cmd: " + err.Error())
	}
	if len(args) == 0 {
		return nil, errors.New("--backend-cmd is empty")
	}
	if !strings.Contains(cmd, "{port}") {
		return nil, errors.New("--backend-cmd must contain {port}: the harness picks a free port for each launch")
	}
	r := strings.NewReplacer("{port}", strconv.Itoa(port), "{host}", host, "{api_key}", apiKey)
	for i, a := range args {
		args[i] = r.Replace(a)
	}
	return args, nil
}

// Custom is the spec of any OpenAI-compatible server started by
// --backend-cmd (label "custom"). Nothing is known about it, so readiness
// is /v1/models alone (the one route every OpenAI-compatible server has)
// and the request is the plain shape of --base-url servers.
func Custom(o *ThirdPartyOptions, r ThirdPartyRun) (Spec, error) {
	if o.BackendCmd == "" {
		return Spec{}, &Unavailable{Backend: NameCustom, Reason: "no --backend-cmd",
			Fix: "--backend-cmd 'my-server --port {port}'"}
	}
	if _, err := CustomArgv(o.BackendCmd, "127.0.0.1", 1, r.APIKey); err != nil {
		return Spec{}, err
	}
	cmd, key := o.BackendCmd, r.APIKey
	return Spec{
		Label: NameCustom,
		Command: func(host string, port int) []string {
			argv, _ := CustomArgv(cmd, host, port, key)
			return argv
		},
		Env:    r.commonEnv(),
		Ready:  ReadyRule{Paths: []string{"/v1/models"}, Interval: DefaultReady.Interval, ProbeTimeout: DefaultReady.ProbeTimeout},
		Quirks: OpenAI(NameCustom, "", "").Quirks,
		APIKey: key,
	}, nil
}
