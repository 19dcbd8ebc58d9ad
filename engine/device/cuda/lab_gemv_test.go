//go:build cudalab

package cuda

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/ebitengine/purego"
)

// TestLabQ3GemvChainTime (ROSEINFER_LAB_GEMV=1, the lab's build) times
// Qwen3-0.6B's 28 layers of small-step projections alone (q3_gemv.cu: q|k|v
// and gate|up with their RMSNorm, o_proj and down_proj into the residual;
// no attention), captured in one graph with programmatic dependent launch
// as a step captures them (the median of 20 replays), at 1 and 8 rows,
// with the product's blocks an SM and fewer, with the driver's
// shared-memory carveout and then with every kernel asking for 100%:
// numbers for a log, no verdict.
func TestLabQ3GemvChainTime(t *testing.T) {
	labOptIn(t, "ROSEINFER_LAB_GEMV", "time the projections' chain")
	g := testGPU(t)
	keepPDL(t, g)
	g.pdl = true // as NewDevice launches
	const L, C, att, I = 28, 1024, 2048, 3072
	qkvW := (16 + 2*8) * 128
	r := rand.New(rand.NewPCG(3, 4))
	type layer struct{ qkv, o, gu, down, ln1, ln2 devPtr }
	layers := make([]layer, L)
	for l := range layers {
		layers[l] = layer{
			qkv: upload(t, g, toBF16(randn(r, qkvW*C, 0.03))), o: upload(t, g, toBF16(randn(r, C*att, 0.02))),
			gu: upload(t, g, toBF16(randn(r, 2*I*C, 0.03))), down: upload(t, g, toBF16(randn(r, C*I, 0.02))),
			ln1: upload(t, g, randn(r, C, 1)), ln2: upload(t, g, randn(r, C, 1)),
		}
	}
	resid := upload(t, g, randn(r, 16*C, 1))
	qkvOut, attIn := devBuf(t, g, 2*16*qkvW), upload(t, g, toBF16(randn(r, 16*att, 1)))
	hidden := devBuf(t, g, 2*16*I)
	d := &Device{g: g}
	setCarveout := func(percent uintptr) {
		for _, name := range q3GemvKernelNames() {
			if err := g.drv.call("cuFuncSetAttribute", g.drv.cuFuncSetAttribute, g.kernel(name).fn, funcAttrPreferredCarveout, percent); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { setCarveout(^uintptr(0)) }) // -1: the driver's choice again, for the tests after this one
	type variant struct {
		name  string
		perSM [2]int // blocks an SM: plain, RMS (gemvGrid)
	}
	launch := func(v variant, input, rows int, out devPtr, ldo int, x devPtr, ldx int, norm, w devPtr, K, oc, mode int) error {
		big, nt, grid := d.gemvGrid(rows, oc, v.perSM[input], 0)
		k := g.kernel(q3GemvKernelName(input, big, nt))
		if input == q3GemvRMS {
			return g.launch(k, grid, 1, 1, gemvThreads, 0, argPtr(out), argInt(ldo), argPtr(x), argPtr(0), argPtr(norm),
				argF32(1e-6), argPtr(w), argInt(rows), argInt(K), argInt(oc), argInt(mode))
		}
		return g.launch(k, grid, 1, 1, gemvThreads, 0, argPtr(out), argInt(ldo), argPtr(x), argInt(ldx), argPtr(w),
			argInt(rows), argInt(K), argInt(oc), argInt(mode))
	}
	chain := func(v variant, rows int) error {
		for _, w := range layers {
			for _, err := range []error{
				launch(v, q3GemvRMS, rows, qkvOut, qkvW, resid, 0, w.ln1, w.qkv, C, qkvW, gemvOut16),
				launch(v, q3GemvPlain, rows, resid, C, attIn, att, 0, w.o, att, C, gemvAdd),
				launch(v, q3GemvRMS, rows, hidden, 2*I, resid, 0, w.ln2, w.gu, C, 2*I, gemvSwiGLU),
				launch(v, q3GemvPlain, rows, resid, C, hidden, I, 0, w.down, I, C, gemvAdd),
			} {
				if err != nil {
					return err
				}
			}
		}
		return nil
	}
	timeChain := func(what string, v variant, rows int) {
		ms, err := d.timeGraph(func() error { return chain(v, rows) })
		if err != nil {
			t.Fatal(err)
		}
		us := 1000 * ms
		t.Logf("%-36s rows %2d: %7.1f us a chain, %5.2f us a layer, %4.2f TB/s", what, rows, us, us/L,
			float64(L*2*(qkvW*C+C*att+2*I*C+C*I))/us/1e6)
	}
	for _, carveout := range []int{0, 100} {
		if carveout > 0 {
			setCarveout(uintptr(carveout))
		}
		variants := []variant{{"4,2 blocks an SM", [2]int{4, 2}}, {"2,2 blocks an SM", [2]int{2, 2}}, {"1,1 blocks an SM", [2]int{1, 1}}}
		for _, rows := range []int{1, 8} {
			for range 2 {
				for _, v := range variants {
					timeChain(fmt.Sprintf("%s carveout=%d", v.name, carveout), v, rows)
				}
			}
		}
	}
}

// TestLabPDLDepth (ROSEINFER_LAB_GEMV=1) launches a chain of eight
// pdl_probe kernels in a graph and logs when each one's blocks started,
// left the grid wait and ended, relative to the first's start, and how
// long after the wait the bytes each block copied before it took to land:
// how far ahead of its predecessors a kernel of a PDL chain begins, by
// grid size and shared memory, and whether its early copies run then.
func TestLabPDLDepth(t *testing.T) {
	labOptIn(t, "ROSEINFER_LAB_GEMV", "probe the PDL chain")
	g := testGPU(t)
	keepPDL(t, g)
	const n, spin = 8, 5000
	d := &Device{g: g}
	k := g.kernel("pdl_probe")
	if err := g.setMaxDynamicSmem(k, 100*1024); err != nil {
		t.Fatal(err)
	}
	src := devBuf(t, g, n*4*g.smCount*100*1024) // every kernel copies bytes of its own
	for _, c := range []struct {
		grid, smem, bytes int
		pdl               bool
	}{{g.smCount, 0, 0, false}, {g.smCount, 0, 0, true}, {g.smCount, 64 << 10, 0, true}, {g.smCount, 100 << 10, 0, true},
		{2 * g.smCount, 0, 0, true}, {g.smCount, 64 << 10, 64 << 10, false}, {g.smCount, 64 << 10, 64 << 10, true},
		{g.smCount, 32 << 10, 32 << 10, true}, {2 * g.smCount, 32 << 10, 32 << 10, true}} {
		g.pdl = c.pdl
		init := make([]uint64, 4*n)
		for i := range init {
			if i%4 < 2 {
				init[i] = ^uint64(0)
			}
		}
		ts := upload(t, g, init)
		graph, exec, err := g.capture(func() error {
			for i := range n {
				from := src + devPtr(i*c.grid*c.bytes)
				if err := g.launch(k, c.grid, 1, 1, 256, c.smem, argPtr(ts), argInt(i), argInt(spin), argPtr(from), argInt(c.bytes)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if r, _, _ := purego.SyscallN(g.drv.cuGraphLaunch, exec, g.stream); r != cuSuccess {
			t.Fatal(g.drv.check("cuGraphLaunch", r))
		}
		got := download[uint64](t, g, ts, 4*n)
		d.destroyGraph(&decodeGraph{graph: graph, exec: exec})
		line := fmt.Sprintf("pdl %-5v grid %d smem %3d KiB copy %2d KiB, us (start/wait/end/landed):", c.pdl, c.grid, c.smem>>10, c.bytes>>10)
		for i := range n {
			line += fmt.Sprintf(" %.1f/%.1f/%.1f/%.2f", float64(got[4*i]-got[0])/1e3, float64(got[4*i+1]-got[0])/1e3,
				float64(got[4*i+2]-got[0])/1e3, float64(got[4*i+3])/1e3)
		}
		t.Log(line)
	}
}

// labOptIn skips a lab timing test unless env is 1: such tests print
// numbers for a log and take the GPU for a while.
func labOptIn(t *testing.T, env, what string) {
	t.Helper()
	if os.Getenv(env) != "1" {
		t.Skipf("set %s=1 to %s", env, what)
	}
}

// keepPDL restores g's PDL flag after t: the lab tests that time a chain
// turn it on, as NewDevice launches, where testGPU's gpu launches without
// it.
func keepPDL(t *testing.T, g *gpu) {
	pdl := g.pdl
	t.Cleanup(func() { g.pdl = pdl })
}
