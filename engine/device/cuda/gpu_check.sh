#!/usr/bin/env bash
# gpu_check.sh: on a machine with an NVIDIA GPU, run the CUDA device's tests
# and its benchmark from binaries prebuilt by `make gpu-build` (no Go needed
# there), log everything under $OUT (default .gpu/out), and print a short
# summary table last.
#
#   bash engine/device/cuda/gpu_check.sh [all|test|bench] [extra cudabench flags]
#   GPU_TEST_RUN=Sampler bash engine/device/cuda/gpu_check.sh test   # a subset of tests
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

test_rc=0 bench_rc=0
if [ "$mode" = all ] || [ "$mode" = test ]; then
	start=$(date +%s)
	(cd "$root/engine/device/cuda" && "$bin/cuda.test" -test.v -test.timeout 420s ${GPU_TEST_RUN:+-test.run "$GPU_TEST_RUN"}) >"$out/test.log" 2>&1
	test_rc=$?
	grep -E '^(=== RUN|--- (PASS|FAIL|SKIP)|\s+\S+_test.go:[0-9]+:)' "$out/test.log" | grep -v '=== RUN' | tail -60
	test_secs=$(( $(date +%s) - start ))
fi
if [ "$mode" = all ] || [ "$mode" = bench ]; then
	"$bin/cudabench" "$@" >"$out/bench.log" 2>&1
	bench_rc=$?
	grep -v '^|' "$out/bench.log" | tail -60
fi

echo
echo "== gpu_check summary =="
if [ "$mode" != bench ]; then
	pass=$(grep -c -- '--- PASS' "$out/test.log") fail=$(grep -c -- '--- FAIL' "$out/test.log") skip=$(grep -c -- '--- SKIP' "$out/test.log")
	echo "tests: exit $test_rc in ${test_secs}s"
	echo "$pass passed, $fail failed, $skip skipped"
fi
if [ "$mode" != test ]; then
	echo "bench: exit $bench_rc"
	grep '^|' "$out/bench.log"
fi
[ "$test_rc" = 0 ] && [ "$bench_rc" = 0 ]
