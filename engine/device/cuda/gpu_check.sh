#!/usr/bin/env bash
# gpu_check.sh: on a machine with an NVIDIA GPU, run the CUDA device's tests,
# its benchmark and (where Nsight Compute is installed) a per-kernel profile
# of single decode steps, from binaries prebuilt by `make gpu-build` (no Go
# needed there; cudabench is cmd/cudabench, built with the cudalab tag); log
# everything under $OUT (default .gpu/out) and print a short summary table
# last.
#
#   bash engine/device/cuda/gpu_check.sh [all|test|bench|ncu] [extra cudabench flags]
#   GPU_TEST_RUN=Sampler bash engine/device/cuda/gpu_check.sh test   # a subset of tests
#   GPU_NCU_BATCHES=1,128 (default) picks the batch sizes ncu profiles; GPU_NCU=0 skips it in "all".
#   GPU_CHAIN_ROWS=32,128 (default) picks the row counts of the projection diagnostics (cudabench -gemm-chain).
#   GPU_HF=0 skips TestRotaryGreedyVsHF's reference (run where transformers imports: a Qwen3-0.6B checkpoint
#   from .gpu/lab/roseinfer init-model and make_greedy_qwen3.py's continuations, about 80 s).
set -uo pipefail
mode=${1:-all}
shift || true
root=$(cd "$(dirname "$0")/../../.." && pwd)
bin=$root/.gpu
out=${OUT:-$bin/out}
mkdir -p "$out"
export ROSEINFER_CUDA_CACHE=${ROSEINFER_CUDA_CACHE:-$bin/kernel-cache}
for f in cuda.test cudabench; do
	[ -x "$bin/$f" ] || { echo "gpu_check: $bin/$f missing: run 'make gpu-build' first" >&2; exit 2; }
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | tee "$out/nvidia-smi.txt"

test_rc=0 bench_rc=0 ncu_rc=0
if [ "$mode" = all ] || [ "$mode" = test ]; then
	start=$(date +%s)
	q06=
	if [ "${GPU_HF:-1}" = 1 ] && [ -x "$bin/lab/roseinfer" ] && python3 -c 'import transformers' 2>/dev/null; then
		q06=/tmp/gpu-check-qwen3-0.6b
		rm -rf "$q06" && "$bin/lab/roseinfer" init-model --preset qwen3-0.6b --seed 1 --out "$q06" >"$out/hf.log" 2>&1 &&
			python3 "$root/engine/model/testdata/make_greedy_qwen3.py" --model "$q06" --out "$q06/greedy.json" >>"$out/hf.log" 2>&1 &&
			export ROSEINFER_QWEN3_DIR=$q06 ROSEINFER_QWEN3_HF_GREEDY=$q06/greedy.json ||
			echo "gpu_check: the transformers reference failed (hf.log); TestRotaryGreedyVsHF will skip"
	fi
	# ROSEINFER_NVTX=1: TestNVTXObserver opens real ranges when libnvToolsExt is there.
	(cd "$root/engine/device/cuda" && ROSEINFER_NVTX=1 "$bin/cuda.test" -test.v -test.timeout 420s ${GPU_TEST_RUN:+-test.run "$GPU_TEST_RUN"}) >"$out/test.log" 2>&1
	test_rc=$?
	[ -n "$q06" ] && rm -rf "$q06"
	grep -E '^(=== RUN|--- (PASS|FAIL|SKIP)|\s+\S+_test.go:[0-9]+:)' "$out/test.log" | grep -v '=== RUN' | grep -vE -- '--- PASS: TestAttentionKernels/|--- PASS: TestGemvKernels/|registers' | tail -45
	test_secs=$(( $(date +%s) - start ))
fi
ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if { [ "$mode" = all ] && [ "${GPU_NCU:-1}" = 1 ]; } || [ "$mode" = ncu ]; then
	if [ -n "$ncu_bin" ]; then
		"$ncu_bin" --profile-from-start off --clock-control none --cache-control none --csv \
			--metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread \
			"$bin/cudabench" -ncu-batches "${GPU_NCU_BATCHES:-1,128}" >"$out/ncu.csv" 2>"$out/ncu.err"
		ncu_rc=$?
		python3 - "$out/ncu.csv" ${GPU_NCU_BATCHES:-1,128} >"$out/ncu-summary.txt" <<'EOF'
# One block per profiled decode step (each starts with encoder_forward):
# kernels by total time, with launches and achieved DRAM bandwidth.
import csv, sys, collections
scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
         "byte": 1.0, "Kbyte": 1e3, "KB": 1e3, "Mbyte": 1e6, "MB": 1e6, "Gbyte": 1e9, "GB": 1e9}
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, rows = rows[0], rows[1:]
col = {h: i for i, h in enumerate(head)}
kern = collections.OrderedDict()
for r in rows:
    k = kern.setdefault(int(r[col["ID"]]), {"name": r[col["Kernel Name"]].split("(")[0]})
    v = float(r[col["Metric Value"]].replace(",", "") or 0) * scale.get(r[col["Metric Unit"]], 1.0)
    k[r[col["Metric Name"]]] = v
steps = []
for k in kern.values():
    if k["name"] == "encoder_forward" or not steps:
        steps.append([])
    steps[-1].append(k)
batches = ",".join(sys.argv[2:]).split(",")
labels = ["batch %s" % b for b in batches]
for i, st in enumerate(steps):
    tot = sum(k.get("gpu__time_duration.sum", 0) for k in st)
    print("ncu decode step %d (%s): %d kernels, %.1f us" % (i + 1, labels[i] if i < len(labels) else "?", len(st), tot))
    agg = collections.OrderedDict()
    for k in st:
        a = agg.setdefault(k["name"], [0, 0.0, 0.0, k.get("launch__registers_per_thread", 0)])
        a[0] += 1
        a[1] += k.get("gpu__time_duration.sum", 0)
        a[2] += k.get("dram__bytes_read.sum", 0) + k.get("dram__bytes_write.sum", 0)
    for name, (n, us, b, regs) in sorted(agg.items(), key=lambda x: -x[1][1]):
        print("  %-34s x%-3d %8.1f us  %6.0f GB/s  %3d regs" % (name[:34], n, us, b / us / 1e3 if us else 0, regs))
EOF
		cat "$out/ncu-summary.txt"
	else
		echo "gpu_check: ncu not found; no per-kernel profile"
	fi
fi
if [ "$mode" = all ] || [ "$mode" = bench ]; then
	"$bin/cudabench" "$@" >"$out/bench.log" 2>&1
	bench_rc=$?
	grep -v '^|' "$out/bench.log" | tail -80
	"$bin/cudabench" -gemm-chain "${GPU_CHAIN_ROWS:-32,128}" >"$out/chain.log" 2>&1 || bench_rc=$?
	grep -E '^(L2 broadcast|launch cost)' "$out/chain.log"
fi

echo
echo "== gpu_check summary =="
if [ "$mode" = all ] || [ "$mode" = test ]; then
	pass=$(grep -c -- '--- PASS' "$out/test.log") fail=$(grep -c -- '--- FAIL' "$out/test.log") skip=$(grep -c -- '--- SKIP' "$out/test.log")
	echo "tests: exit $test_rc in ${test_secs}s"
	echo "$pass passed, $fail failed, $skip skipped"
	grep -E -- '--- (FAIL|SKIP)' "$out/test.log" | head -20
fi
[ -f "$out/ncu-summary.txt" ] && echo "ncu: exit $ncu_rc (see ncu-summary.txt)"
if [ "$mode" = all ] || [ "$mode" = bench ]; then
	echo "bench: exit $bench_rc"
	grep '^|' "$out/bench.log"
	grep '^| projections' "$out/chain.log"
fi
[ "$test_rc" = 0 ] && [ "$bench_rc" = 0 ]
