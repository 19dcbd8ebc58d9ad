//go:build cudalab

package cuda

import "testing"

// TestLabIntSwitch checks that ROSEINFER_CUDA_FORCE's "name=N" switches
// reach their fields and that other names reach none.
func TestLabIntSwitch(t *testing.T) {
	var f forcedPaths
	for name, field := range map[string]*int{
		"rowsblocks": &f.rowsBlocks, "q3wgcluster": &f.rotaryWGCluster, "ropefoldrows": &f.ropeInAttentionRows,
		"kvprefetchmb": &f.kvPrefetchMB, "normrowsmin": &f.normRowsMin, "gemmwsminrows": &f.gemmWSMinRows,
		"gemmwscluster": &f.gemmWSCluster, "gemmwsgroup": &f.gemmWSGroup, "q3wgslice": &f.rotaryWGOneSliceRows,
	} {
		if got := labIntSwitch(&f, name); got != field {
			t.Errorf("%s=N sets %p, want %p", name, got, field)
		}
	}
	for _, name := range []string{"", "nopdl", "gemmws", "rowsblocks "} {
		if got := labIntSwitch(&f, name); got != nil {
			t.Errorf("%q sets a field", name)
		}
	}
	t.Setenv("ROSEINFER_CUDA_FORCE", "nogemmws, gemmwsminrows=512,q3wgcluster=2,nogemmwsqkv")
	var o Options
	for _, apply := range labOptions {
		apply(&o)
	}
	if !o.force.noGemmWS || !o.force.noGemmWSQKV || o.force.gemmWSMinRows != 512 || o.force.rotaryWGCluster != 2 {
		t.Errorf("ROSEINFER_CUDA_FORCE parsed to %+v", o.force)
	}
}
