#!/usr/bin/env bash
# cpu_numbers.sh: the CPU and sim figures of docs/BENCHMARKS.md, measured on
# this machine with the real binaries (make build) and python3's standard
# library for the synthetic traces. Prints a Markdown table last.
#
#   bash harness/cpu_numbers.sh            # all
#   bash harness/cpu_numbers.sh cpu        # roseinfer CPU tiny model only
#   bash harness/cpu_numbers.sh sim        # sim server throughput and harness fidelity only
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin
what=${1:-all}
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
for f in bench roseinfer; do
	[ -x "$bin/$f" ] || { echo "cpu_numbers: $bin/$f missing: run 'make build' first" >&2; exit 2; }
done

# trace FILE N SPACING_MS INPUT OUTPUT: Mooncake-format rows, one distinct hash id each (no shared prefixes).
trace() {
	python3 - "$@" <<'EOF'
import json, sys
path, n, spacing, inp, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
with open(path, "w") as f:
    for i in range(n):
        f.write(json.dumps({"timestamp": i * spacing, "input_length": inp, "output_length": out, "hash_ids": [i]}) + "\n")
EOF
}

# field RUN_DIR EXPR: evaluate EXPR over the first summary of the run's online_results.json (s = summary).
field() {
	python3 - "$1" "$2" <<'EOF'
import json, sys, glob
path = sorted(glob.glob(sys.argv[1] + "/online_*/online_results.json"))[-1]
s = json.load(open(path))["summaries"][0]
v = eval(sys.argv[2], {"s": s})
print("n/a" if v is None else (f"{v:.3f}" if isinstance(v, float) else v))
EOF
}

# serve PORT ARGS...: start roseinfer serve in the background and wait until /health is 200.
serve() {
	local port=$1
	shift
	"$bin/roseinfer" serve --port "$port" --log-level warn "$@" >"$tmp/serve-$port.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do
		curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "cpu_numbers: server on $port not ready" >&2
	cat "$tmp/serve-$port.log" >&2
	exit 1
}

# online DIR TRACE ARGS...: bench online against a running server, ignore_eos, one scale.
online() {
	local dir=$1 tr=$2
	shift 2
	"$bin/bench" online --trace "$tr" --prefix-mode trace --scales 1 --ignore-eos --warmup-requests 2 \
		--max-output-len 100000 --output-dir "$tmp/$dir" "$@" >"$tmp/$dir.log" 2>&1 ||
		{ echo "cpu_numbers: bench online ($dir) failed" >&2; tail -20 "$tmp/$dir.log" >&2; }
}

rows=()
row() { rows+=("| $1 | $2 |"); }

if [ "$what" = all ] || [ "$what" = cpu ]; then
	# CPU tiny model, both cores shared by server and client (no pinning).
	serve 18901 --device cpu
	url=http://127.0.0.1:18901
	trace "$tmp/ttft.jsonl" 20 500 256 16
	trace "$tmp/c1.jsonl" 1 0 32 512
	trace "$tmp/c32.jsonl" 32 0 32 256
	online ttft "$tmp/ttft.jsonl" --base-url "$url"
	online c1 "$tmp/c1.jsonl" --base-url "$url"
	online c32 "$tmp/c32.jsonl" --base-url "$url"
	row "cpu tiny: TTFT, 256-token prompt, alone (p50 / p99 ms)" "$(field "$tmp/ttft" 's["ttft_ms"]["p50"]') / $(field "$tmp/ttft" 's["ttft_ms"]["p99"]')"
	row "cpu tiny: output tok/s, 1 stream (512 tokens)" "$(field "$tmp/c1" 's["tok_per_s"]')"
	row "cpu tiny: output tok/s, 32 concurrent streams (256 tokens each)" "$(field "$tmp/c32" 's["tok_per_s"]')"
	row "cpu tiny: TPOT p50 at 32 streams (ms)" "$(field "$tmp/c32" 's["tpot_ms"]["p50"]')"
	# GC pauses over the whole server life (the three runs above), from the runtime's histogram.
	curl -sf "$url/metrics" >"$tmp/metrics.txt"
	row "cpu tiny: GC pause p99 / max under that load (ms)" "$(python3 - "$tmp/metrics.txt" <<'EOF'
import sys
buckets = []
for line in open(sys.argv[1]):
    if line.startswith("go_sched_pauses_total_gc_seconds_bucket"):
        le = line.split('le="')[1].split('"')[0]
        buckets.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
buckets.sort()
total = buckets[-1][1] if buckets else 0
def q(p):
    for le, c in buckets:
        if c >= p * total:
            return le
mx = next((le for le, c in buckets if c >= total), None)
print("n/a" if not total else f"≤ {q(0.99)*1e3:.3f} / ≤ {mx*1e3:.3f} (bucket upper bounds, {int(total)} pauses)")
EOF
)"
fi

if [ "$what" = all ] || [ "$what" = sim ]; then
	# Sim server throughput: 256 concurrent streams of 990 tokens, 1 ms steps.
	serve 18902 --device sim --sim-step-us 1000 --max-num-seqs 256
	trace "$tmp/s256.jsonl" 256 0 16 990
	online s256 "$tmp/s256.jsonl" --base-url http://127.0.0.1:18902
	row "sim 1 ms: streamed tok/s at 256 concurrent streams" "$(field "$tmp/s256" 's["tok_per_s"]')"
	row "sim 1 ms: TPOT p50 at 256 streams (ms)" "$(field "$tmp/s256" 's["tpot_ms"]["p50"]')"

	# Harness fidelity against the sim device (bench launches it, on the default CPU split,
	# and asks for server timing).
	# --n: every row of the trace (bench online replays the first 1,000 by default).
	for spec in "200 5 1000" "500 2 2000"; do
		set -- $spec
		trace "$tmp/r$1.jsonl" "$3" "$2" 16 32
		online "r$1" "$tmp/r$1.jsonl" --n "$3" --device sim --server-args "--sim-step-us 1000"
		d=$tmp/r$1
		row "sim 1 ms, $1 req/s: TPOT p50 / ITL p50 (ms)" "$(field "$d" 's["tpot_ms"]["p50"]') / $(field "$d" 's["itl_ms"]["p50"]')"
		row "sim 1 ms, $1 req/s: client TTFT − server TTFT p50 / p99 (ms)" "$(field "$d" '(s.get("network_ms") or {}).get("p50")') / $(field "$d" '(s.get("network_ms") or {}).get("p99")')"
		row "sim 1 ms, $1 req/s: send lag p50 / p99 (ms)" "$(field "$d" 's["send_lag_ms"]["p50"]') / $(field "$d" 's["send_lag_ms"]["p99"]')"
	done
	# 2,000 concurrent streams: arrivals over 2 s, 100 tokens each at 50 ms steps (5 s per stream).
	trace "$tmp/c2000.jsonl" 2000 1 16 100
	online c2000 "$tmp/c2000.jsonl" --n 2000 --device sim --server-args "--sim-step-us 50000 --max-num-seqs 2048 --max-num-batched-tokens 8192"
	d=$tmp/c2000
	row "sim 50 ms, 2,000 concurrent streams: TPOT p50 / ITL p50 (ms)" "$(field "$d" 's["tpot_ms"]["p50"]') / $(field "$d" 's["itl_ms"]["p50"]')"
	row "sim 50 ms, 2,000 streams: requests ok / replayed" "$(field "$d" 's["num_success"]') / $(field "$d" 's["num_requests"]')"
	row "sim 50 ms, 2,000 streams: client − server ITL p50 (ms) / send lag p99 (ms)" "$(field "$d" '(s.get("itl_client_minus_server_ms") or {}).get("p50")') / $(field "$d" 's["send_lag_ms"]["p99"]')"
fi

echo
echo "| figure | value |"
echo "|---|---|"
printf '%s\n' "${rows[@]}"
