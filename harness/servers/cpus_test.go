package servers

import (
	"testing"

	"github.com/roseinfer/roseinfer/harness/cpuset"
)

// roseinferOnCPU is bench online's default server: roseinfer on the CPU.
func roseinferOnCPU() Options { return Options{Backends: []string{"roseinfer"}, Device: "cpu"} }

func TestResolveCPUs(t *testing.T) {
	o := roseinferOnCPU()
	o.ServerCPUs, o.ClientCPUs = "none", ""
	if _, err := resolveCPUs(&o); err != nil || o.ServerCPUs != "" || o.ClientCPUs != "" {
		t.Errorf("none: %q %q %v", o.ServerCPUs, o.ClientCPUs, err)
	}
	o = roseinferOnCPU()
	o.ServerCPUs = "0"
	if _, err := resolveCPUs(&o); err != nil || o.ServerCPUs != "0" || o.ClientCPUs != "" {
		t.Errorf("explicit lists must be kept: %q %q %v", o.ServerCPUs, o.ClientCPUs, err)
	}
	o = roseinferOnCPU()
	if _, err := resolveCPUs(&o); err != nil {
		t.Fatal(err)
	}
	if o.ServerCPUs != "" {
		srv, _ := cpuset.Parse(o.ServerCPUs)
		cli, _ := cpuset.Parse(o.ClientCPUs)
		if len(srv) == 0 || len(cli) == 0 || srv[len(srv)-1] >= cli[0] {
			t.Errorf("split %q / %q: want disjoint halves, server first", o.ServerCPUs, o.ClientCPUs)
		}
	}
}

// The sim device gets the same split as the CPU: its bursts of chunks held
// the shared cores while the client's sends were due.
func TestResolveCPUsSim(t *testing.T) {
	cpu, sim := roseinferOnCPU(), roseinferOnCPU()
	sim.Device = "sim"
	if _, err := resolveCPUs(&cpu); err != nil {
		t.Fatal(err)
	}
	if _, err := resolveCPUs(&sim); err != nil {
		t.Fatal(err)
	}
	if sim.ServerCPUs != cpu.ServerCPUs || sim.ClientCPUs != cpu.ClientCPUs {
		t.Errorf("sim split %q / %q, cpu %q / %q: want the same", sim.ServerCPUs, sim.ClientCPUs, cpu.ServerCPUs, cpu.ClientCPUs)
	}
	sim.ServerCPUs, sim.ClientCPUs, sim.BaseURL = "", "", "http://127.0.0.1:8000"
	if _, err := resolveCPUs(&sim); err != nil || sim.ServerCPUs != "" || sim.ClientCPUs != "" {
		t.Errorf("a server the harness does not launch is not pinned: %q %q %v", sim.ServerCPUs, sim.ClientCPUs, err)
	}
}
