#!/usr/bin/env bash
# gpu_stack.sh: the whole stack on a GPU machine, from binaries prebuilt by
# `make gpu-build` (no Go needed there): a random-weight GPT-2 124M checkpoint,
# issue 4's offline and online benchmarks with roseinfer on CUDA, the A/B of
# each engine feature (CUDA graphs, overlap scheduling, prefix cache, chunked
# prefill), and a profile-stage capture. Logs and results go under $OUT
# (default .gpu/out); a short table is printed last.
#
#   bash harness/gpu_stack.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.gpu
out=${OUT:-$bin/out}
mkdir -p "$out"
export ROSEINFER_CUDA_CACHE=${ROSEINFER_CUDA_CACHE:-$bin/kernel-cache}
for f in bench roseinfer; do
	[ -x "$bin/$f" ] || { echo "gpu_stack: $bin/$f missing: run 'make gpu-build' first" >&2; exit 2; }
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

model=/tmp/gpt2-random
runs=/tmp/gpu-stack-runs
rm -rf "$runs"
"$bin/roseinfer" init-model --preset gpt2 --seed 1 --dtype fp16 --out "$model" >"$out/init.log" 2>&1 ||
	{ echo "gpu_stack: init-model failed"; tail "$out/init.log"; exit 1; }

# Offline: 128 prompts x 256 -> 64 tokens, ignore_eos, T 0.7 / top-p 0.9 / top-k 50, in-process engine.
"$bin/bench" offline --backends roseinfer --device cuda --model "$model" --num-prompts 128 --input-len 256 \
	--output-len 64 --max-batch-size 128 --output-dir "$runs" >"$out/offline.log" 2>&1
offline_rc=$?

# Online: Azure conversation trace, n 200, scale 0.4, max output 128; every feature switched off once.
"$bin/bench" online --backends roseinfer --device cuda --model "$model" --n 200 --scales 0.4 --max-output-len 128 \
	--variant nograph=--no-cuda-graph --variant nooverlap=--no-overlap-schedule \
	--variant nocache=--no-prefix-cache --variant nochunk=--no-chunked-prefill --variant norows=--cuda-chunk-rows=-1 \
	--repeat 2 \
	--output-dir "$runs" >"$out/online.log" 2>&1
online_rc=$?

# Profile stage: roseinfer's trace.json with engine phases and GPU times.
"$bin/bench" online --backends roseinfer --device cuda --model "$model" --profile pprof --profile-only \
	--profile-n 32 --output-dir "$runs/profile" >"$out/profile.log" 2>&1
profile_rc=$?

off=$(ls -d "$runs"/offline_* 2>/dev/null | head -n 1)
on=$(ls -d "$runs"/online_* 2>/dev/null | head -n 1)
# Everything (results, summaries, server logs, profiles) in one archive: the
# device tool returns at most 8 files.
cp "$out"/*.log "$runs/" 2>/dev/null
tar -czf "$out/gpu_stack_runs.tar.gz" -C "$(dirname "$runs")" "$(basename "$runs")"

echo
echo "== gpu_stack: exit codes offline=$offline_rc online=$online_rc profile=$profile_rc"
[ -n "$off" ] && grep '^|' "$off/offline_summary.md"
[ -n "$on" ] && grep '^|' "$on/online_summary.md"
exit $(( offline_rc | online_rc | profile_rc ))
