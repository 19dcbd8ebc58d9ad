#!/usr/bin/env bash
# gpu_qwen3.sh: issue 34's Qwen3 figures on a GPU machine, from binaries
# prebuilt by `make gpu-build` and `make gpu-stack-build` (no Go needed
# there): a random-weight Qwen3-0.6B (bf16) and GPT-2 124M (fp16), the
# device benchmark of both (decode steps at batch 1 and 128, context 300;
# offline), `bench offline` 128 x 256 -> 64 of both, nano-vllm's protocol
# (256 sequences, input and output lengths uniform in [100, 1024],
# ignore_eos, T 0.6), and the Azure conversation trace online (n 200, max
# output 128, scales 0.4 and 0.1). Logs and results go under $OUT (default
# .gpu/out); a short table is printed last.
#
#   bash harness/gpu_qwen3.sh            # BIN=dir overrides .gpu
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/.gpu}
out=${OUT:-$root/.gpu/out}
mkdir -p "$out"
export ROSEINFER_CUDA_CACHE=${ROSEINFER_CUDA_CACHE:-/tmp/roseinfer-kernel-cache}
for f in bench roseinfer cudabench; do
	[ -x "$bin/$f" ] || { echo "gpu_qwen3: $bin/$f missing: run 'make gpu-build gpu-stack-build' first" >&2; exit 2; }
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
q3=/tmp/qwen3-0.6b g2=/tmp/gpt2-random runs=/tmp/gpu-qwen3-runs
rm -rf "$runs"
"$bin/roseinfer" init-model --preset qwen3-0.6b --seed 1 --out "$q3" >"$out/init.log" 2>&1 &&
	"$bin/roseinfer" init-model --preset gpt2 --seed 1 --dtype fp16 --out "$g2" >>"$out/init.log" 2>&1 ||
	{ echo "gpu_qwen3: init-model failed"; tail "$out/init.log"; exit 1; }

rc=0
step() { # name, command...: run, log to $out/name.log, remember failures
	local name=$1; shift
	timeout "${STEP_TIMEOUT:-240}" "$@" >"$out/$name.log" 2>&1 || { echo "gpu_qwen3: $name failed (rc $?)"; rc=1; }
}
step cudabench-qwen3 "$bin/cudabench" -preset qwen3-0.6b -batches 1,128 -variants graph -skip-profile
step cudabench-gpt2 "$bin/cudabench" -preset gpt2 -batches 1,128 -variants graph -skip-profile
for m in qwen3 gpt2; do
	dir=$q3; [ $m = gpt2 ] && dir=$g2
	step offline-$m "$bin/bench" offline --backends roseinfer --device cuda --model "$dir" --num-prompts 128 --input-len 256 \
		--output-len 64 --max-batch-size 128 --output-dir "$runs/offline-$m"
done
step nanovllm "$bin/bench" offline --backends roseinfer --device cuda --model "$q3" --num-prompts 256 \
	--input-len-range 100,1024 --output-len-range 100,1024 --ignore-eos --temperature 0.6 --top-p 1 --top-k 0 \
	--output-dir "$runs/nanovllm"
step online-qwen3 "$bin/bench" online --backends roseinfer --roseinfer-bin "$bin/roseinfer" --device cuda --model "$q3" \
	--n 200 --scales 0.4,0.1 --max-output-len 128 --no-report --output-dir "$runs/online"

cp "$out"/*.log "$runs/" 2>/dev/null
tar -czf "$out/gpu_qwen3_runs.tar.gz" -C "$(dirname "$runs")" "$(basename "$runs")"
echo
echo "== gpu_qwen3 ($(cat "$out/gpu.txt"))"
grep -hE '^decode step.*overlapped|^offline .*overlap' "$out/cudabench-qwen3.log" | sed 's/^/qwen3-0.6b  /'
grep -hE '^decode step.*overlapped|^offline .*overlap' "$out/cudabench-gpt2.log" | sed 's/^/gpt2        /'
for f in offline-qwen3 offline-gpt2 nanovllm; do grep -h 'tok/s' "$out/$f.log" | tail -1 | sed "s/^/$f  /"; done
on=$(ls -d "$runs"/online/online_* 2>/dev/null | head -n 1)
[ -n "$on" ] && grep '^|' "$on/online_summary.md" | head -12
exit $rc
