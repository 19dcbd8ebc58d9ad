package profile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/roseinfer/roseinfer/harness/backend"
)

func TestTools(t *testing.T) {
	cases := []struct {
		profile string
		want    []string
		isErr   bool
	}{
		{"none", nil, false},
		{"", nil, false},
		{"torch", []string{"torch"}, false},
		{"nsys", []string{"nsys"}, false},
		{"pprof", []string{"pprof"}, false},
		{"both", []string{"torch", "nsys"}, false}, // the original's order
		{"all", []string{"torch", "nsys", "pprof"}, false},
		{"perf", nil, true},
	}
	for _, tc := range cases {
		o := DefaultOptions()
		o.Profile = tc.profile
		got, err := o.Tools()
		if (err != nil) != tc.isErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v (error %v)", tc.profile, got, err, tc.want, tc.isErr)
		}
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		set  func(o *Options)
		want string // "" = valid
	}{
		{"defaults", func(o *Options) {}, ""},
		{"profile-only without a tool", func(o *Options) { o.Only = true }, "--profile-only needs --profile"},
		{"profile-only with a tool", func(o *Options) { o.Only, o.Profile = true, "pprof" }, ""},
		{"bad tool", func(o *Options) { o.Profile = "gdb" }, "--profile \"gdb\""},
		{"no requests", func(o *Options) { o.N = 0 }, "--profile-n 0"},
		{"zero scale", func(o *Options) { o.Scale = 0 }, "--profile-scale"},
		{"negative steps", func(o *Options) { o.TorchNumSteps = -1 }, "must not be negative"},
		{"no prompts", func(o *Options) { o.NumPrompts = 0 }, "--profile-num-prompts"},
		{"empty nsys", func(o *Options) { o.NsysBin = "" }, "--profile-nsys-bin"},
	}
	for _, tc := range cases {
		o := DefaultOptions()
		tc.set(&o)
		err := o.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestRegisterFlags(t *testing.T) {
	fs := pflag.NewFlagSet("online", pflag.ContinueOnError)
	fs.String("profile-output-len", "", "a flag the command defined itself") // left alone
	tp := backend.DefaultThirdParty()
	backend.RegisterThirdPartyFlags(fs, &tp) // no name collides with ours
	o := DefaultOptions()
	RegisterFlags(fs, &o)
	err := fs.Parse([]string{"--profile", "both", "--profile-only", "--profile-n", "8", "--profile-scale", "0.8",
		"--profile-torch-full", "--profile-torch-delay-steps", "2", "--profile-torch-with-stack",
		"--profile-no-vllm-nvtx-scopes", "--profile-nsys-trace", "cuda,nvtx", "--profile-nsys-kill", "none",
		"--profile-nsys-cuda-flush-interval-ms", "100", "--trtllm-profile-start-stop", "10-30",
		"--trtllm-no-profile-record-gc", "--profile-nsys-bin", "/opt/nsys/bin/nsys", "--trtllm-worker-single-process"})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultOptions()
	want.Profile, want.Only, want.N, want.Scale = "both", true, 8, 0.8
	want.TorchMinimal, want.TorchDelaySteps, want.TorchWithStack = false, 2, true
	want.VLLMNVTXScopes = false
	want.NsysTrace, want.NsysKill, want.NsysCUDAFlushIntervalMs = "cuda,nvtx", "none", 100
	want.TRTLLMProfileStartStop, want.TRTLLMProfileRecordGC = "10-30", false
	want.NsysBin = "/opt/nsys/bin/nsys"
	if !reflect.DeepEqual(o, want) {
		t.Errorf("parsed\n %+v\nwant\n %+v", o, want)
	}
	if !tp.TRTLLMWorkerSingleProcess {
		t.Error("third-party flag lost")
	}

	off := pflag.NewFlagSet("offline", pflag.ContinueOnError)
	oo := DefaultOptions()
	RegisterOfflineFlags(off, &oo)
	if err := off.Parse([]string{"--profile", "torch", "--profile-num-prompts", "4", "--profile-input-len", "64",
		"--profile-output-len", "16"}); err != nil {
		t.Fatal(err)
	}
	if oo.Profile != "torch" || oo.NumPrompts != 4 || oo.InputLen != 64 || oo.OfflineOutLen != 16 || oo.OutputLen != 0 {
		t.Errorf("offline flags %+v", oo)
	}
	if off.Lookup("profile-n") != nil || off.Lookup("profile-nsys-trace") != nil {
		t.Error("offline has online-only flags")
	}
}

func TestCPUListFromMeta(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{[]any{0.0, 1.0, 5.0}, "0,1,5"},
		{"0-3", "0-3"},
		{nil, ""},
		{[]any{1.5}, ""},
		{[]any{"x"}, ""},
	}
	for _, tc := range cases {
		if got := cpuList(tc.v); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.v, got, tc.want)
		}
	}
}
