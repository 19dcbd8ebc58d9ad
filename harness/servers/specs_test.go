package servers

import (
	"context"
	"strings"
	"testing"

	"github.com/roseinfer/roseinfer/traces"
)

func TestSpecsVariants(t *testing.T) {
	o := roseinferOnCPU()
	o.RoseinferBin = "/bin/roseinfer"
	o.ServerArgs = []string{"--max-num-seqs", "64"}
	o.Variants = []string{"nocache=--no-prefix-cache", "b16=--max-num-seqs 16"}
	specs, skipped, err := Specs(context.Background(), &o, traces.Context{ModelMaxLen: 1024})
	if err != nil || len(skipped) != 0 {
		t.Fatal(err, skipped)
	}
	want := map[string]string{
		"roseinfer":         "/bin/roseinfer serve --host h --port 1 --device cpu --max-num-seqs 64",
		"roseinfer+nocache": "/bin/roseinfer serve --host h --port 1 --device cpu --max-num-seqs 64 --no-prefix-cache",
		"roseinfer+b16":     "/bin/roseinfer serve --host h --port 1 --device cpu --max-num-seqs 64 --max-num-seqs 16",
	}
	if len(specs) != 3 {
		t.Fatalf("%d specs", len(specs))
	}
	for _, s := range specs {
		if got := strings.Join(s.Command("h", 1), " "); got != want[s.Label] {
			t.Errorf("%s: %q, want %q", s.Label, got, want[s.Label])
		}
	}
	o.Variants = []string{"x=--a", "x=--b"}
	if _, _, err := Specs(context.Background(), &o, traces.Context{ModelMaxLen: 1024}); err == nil {
		t.Error("a variant label given twice was accepted")
	}
	o.Variants, o.Backends = []string{"x=--a"}, []string{"vllm"}
	if _, _, err := Specs(context.Background(), &o, traces.Context{ModelMaxLen: 1024}); err == nil {
		t.Error("--variant without roseinfer was accepted")
	}
}
