#!/usr/bin/env bash
# profile_check.sh: on a machine with an NVIDIA GPU, from binaries prebuilt by
# `make gpu-build gpu-stack-build`, run the CUDA device's tests and then the
# profile stage of roseinfer on GPT-2 (random fp16 weights): bench online
# --profile pprof --profile-only, whose trace.json carries the device's GPU
# spans (prefill/decode/mixed steps, forward and sample inside them). Copies
# profile_summary.md, the manifest, the server log and a gzip of trace.json to
# $OUT (default .gpu/out), and prints the GPU-track phases and a nesting check.
#
#   bash engine/device/cuda/profile_check.sh [test-regexp]   # "" (default) = every test, "-" = none
set -uo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
bin=$root/.gpu
out=${OUT:-$bin/out}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
export ROSEINFER_CUDA_CACHE=${ROSEINFER_CUDA_CACHE:-$tmp/kernel-cache}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
test_rc=0
if [ "${1:-}" != - ]; then
	(cd "$root/engine/device/cuda" && "$bin/cuda.test" -test.timeout 240s ${1:+-test.run "$1"} -test.v) >"$out/test.log" 2>&1
	test_rc=$?
	grep -E -- '^--- (FAIL|SKIP)|^(ok|FAIL|PASS)|--- PASS: TestDeviceSpans' "$out/test.log"
	echo "tests: $(grep -c -- '^--- PASS' "$out/test.log") passed, $(grep -c -- '^--- FAIL' "$out/test.log") failed, $(grep -c -- '^--- SKIP' "$out/test.log") skipped (rc $test_rc)"
fi
"$bin/roseinfer" init-model --preset gpt2 --seed 1 --dtype fp16 --out "$tmp/m" >/dev/null || exit 2
"$bin/bench" online --backends roseinfer --device cuda --model "$tmp/m" --profile pprof --profile-only \
	--profile-n 32 --output-dir "$tmp/p" 2>&1 | tail -5
run=$(ls -d "$tmp"/p/online_* | head -1)
cp "$run"/profile_summary.md "$run"/profile_manifest.json "$run"/*.log "$out"/ 2>/dev/null
trace=$run/profiles/pprof/roseinfer/trace.json
[ -f "$trace" ] || { echo "profile_check: no trace.json" >&2; exit 3; }
gzip -9c "$trace" >"$out/trace.json.gz"
python3 - "$trace" <<'PY'
# Per GPU-track span name: count, total ms; and whether every step's forward
# and sample spans lie inside its step span.
import json, sys, collections
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X" and e["tid"] == 3]
tot = collections.defaultdict(lambda: [0, 0.0])
steps = collections.defaultdict(dict)
for e in ev:
    tot[e["name"]][0] += 1
    tot[e["name"]][1] += e["dur"] / 1e3
    steps[e["args"]["step"]][e["name"]] = (e["ts"], e["ts"] + e["dur"])
for n, (c, ms) in sorted(tot.items(), key=lambda x: -x[1][1]):
    print(f"gpu {n:8s} {c:5d} spans {ms:9.3f} ms")
bad = 0
for s, sp in steps.items():
    step = [v for k, v in sp.items() if k in ("decode", "prefill", "mixed")]
    for k in ("forward", "sample"):
        if k in sp and not (step and step[0][0] - 1e-3 <= sp[k][0] and sp[k][1] <= step[0][1] + 2e-3 and sp[k][1] > sp[k][0]):
            bad += 1
print(f"steps {len(steps)}, with sample {sum('sample' in v for v in steps.values())}, not nested {bad}")
PY
exit $test_rc
