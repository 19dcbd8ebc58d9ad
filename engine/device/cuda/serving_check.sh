#!/usr/bin/env bash
# serving_check.sh: on a GPU machine, the CUDA device through the product path
# with its step statistics on (ROSEINFER_CUDA_STATS, see lab_stats.go): issue
# 4's offline run through `bench offline` (in-process engine), then the
# online run (roseinfer, and serve with a 1024-token prefill chunk; then
# again with GOGC=400 in the server), GC cycles traced. The statistics are
# the device's lab, so the binaries are the cudalab builds `make gpu-build`
# leaves in .gpu/lab; logs under $OUT (default .gpu/out).
#
#   bash engine/device/cuda/serving_check.sh [offline|online|all]
set -uo pipefail
mode=${1:-all}
root=$(cd "$(dirname "$0")/../../.." && pwd)
bin=$root/.gpu/lab
out=${OUT:-$root/.gpu/out}
mkdir -p "$out"
export ROSEINFER_CUDA_CACHE=${ROSEINFER_CUDA_CACHE:-$root/.gpu/kernel-cache}
for f in bench roseinfer; do
	[ -x "$bin/$f" ] || { echo "serving_check: $bin/$f missing: run 'make gpu-build' first" >&2; exit 2; }
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
model=/tmp/gpt2-random
runs=/tmp/serving-check-runs
rm -rf "$runs"
[ -d "$model" ] || "$bin/roseinfer" init-model --preset gpt2 --seed 1 --dtype fp16 --out "$model" >/dev/null 2>&1 ||
	{ echo "serving_check: init-model failed"; exit 1; }
rc=0
offline() { # label, env...
	local label=$1
	shift
	env "$@" ROSEINFER_CUDA_STATS=2 "$bin/bench" offline --backends roseinfer --device cuda --model "$model" --num-prompts 128 \
		--input-len 256 --output-len 64 --max-batch-size 128 --output-dir "$runs/$label" ${OFFLINE_ARGS:-} >"$out/offline-$label.log" 2>&1 || rc=1
	echo "== offline ($label)"
	grep -E '^\[roseinfer[^]]*\] [0-9]|^cuda stats' "$out/offline-$label.log"
	grep '^|' "$runs/$label"/offline_*/offline_summary.md | tail -1
}
if [ "$mode" = all ] || [ "$mode" = offline ]; then
	offline prewarm
	# The step token budget, through the server (the in-process run fixes it).
	for t in 2048 16384; do
		OFFLINE_ARGS="--backends roseinfer+server --server-args=--max-num-batched-tokens=$t" offline "server-tokens$t"
	done
fi
online() { # label, env... (the server inherits the environment)
	local label=$1
	shift
	env "$@" "$bin/bench" online --backends roseinfer --device cuda --model "$model" --n 200 --scales 0.4 \
		--max-output-len 128 --output-dir "$runs/$label" ${ONLINE_ARGS:-} >"$out/$label.log" 2>&1 || rc=1
	echo "== $label ($*)"
	grep '^|' "$runs/$label"/online_*/online_summary.md
	for f in "$runs/$label"/online_*/*.server.log; do
		echo "-- $(basename "$f"): $(grep -c '^gc ' "$f") GC cycles"
		grep -h '^cuda stats' "$f" | grep -v 'prewarm .*: '
	done
}
if [ "$mode" = all ] || [ "$mode" = online ]; then
	# Per-step lines and GC cycles on one clock (seconds since process start),
	# plus serve's --prefill-chunk-size raised so long prompts prefill in one step.
	ONLINE_ARGS="--variant chunk1024=--prefill-chunk-size=1024" online online ROSEINFER_CUDA_STATS=2 GODEBUG=gctrace=1
	online online-gogc400 ROSEINFER_CUDA_STATS=1 GODEBUG=gctrace=1 GOGC=400
fi
tar -czf "$out/serving_check_runs.tar.gz" -C "$(dirname "$runs")" "$(basename "$runs")"
exit $rc
