#!/usr/bin/env python3
"""Writes the report_*.json fixtures used by results/ and plots/ tests.

Python's json module is the independent source here: it is what the original
harness wrote its files with, so report_original_*.json carry its quirks
(bare NaN for empty metrics, no "valid" / "n" keys) byte for byte. The
report_ours_*.json files use our schema (results/schema.go) with hand-picked,
easily distinguished numbers. Run from the repository root:

    python3 results/testdata/report_make_fixtures.py
"""
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
NAN = float("nan")


def stats(p50, p90, p99, ours=True, n=100):
    s = {
        "mean": round((p50 + p90) / 2, 3) if not math.isnan(p50) else NAN,
        "p50": p50,
        "p90": p90,
        "p99": p99,
        "max": round(p99 * 1.1, 3) if not math.isnan(p99) else NAN,
    }
    if ours:
        s["n"] = 0 if math.isnan(p50) else n
        for k in ("mean", "p50", "p90", "p99", "max"):
            if isinstance(s[k], float) and math.isnan(s[k]):
                s[k] = None
    return s


def spread(value, rel):
    return {"mean": value, "ci95_low": round(value * (1 - rel), 3),
            "ci95_high": round(value * (1 + rel), 3), "rounds": 3}


SCALES = [0.4, 0.8, 1.6]
# backend -> metric -> list over SCALES of (p50, p90, p99); smaller scale = more load.
OURS = {
    "roseinfer": {
        "ttft_ms": [(30, 52, 80), (22, 34, 50), (18, 26, 38)],
        "tpot_ms": [(9, 12, 16), (8, 10, 13), (7, 8.5, 11)],
        "itl_ms": [(8.5, 13, 22), (7.8, 10.5, 17), (7, 9, 14)],
        "e2e_ms": [(900, 1400, 2100), (760, 1100, 1600), (650, 900, 1300)],
    },
    "roseinfer+flashattn": {
        "ttft_ms": [(24, 40, 62), (17, 26, 41), (14, 20, 30)],
        "tpot_ms": [(7, 9.5, 13), (6.2, 8, 10.5), (5.5, 6.8, 9)],
        "itl_ms": [(6.5, 10, 17), (6, 8.3, 13.5), (5.4, 7, 11)],
        "e2e_ms": [(720, 1100, 1700), (600, 880, 1300), (520, 720, 1050)],
    },
    "vllm": {
        "ttft_ms": [(45, 75, 120), (30, 46, 70), (24, 33, 48)],
        "tpot_ms": [(11, 15, 21), (10, 12.5, 16), (9, 10.5, 13.5)],
        "itl_ms": [(10.5, 16, 27), (9.6, 13, 21), (8.6, 11, 17)],
        "e2e_ms": [(1150, 1800, 2700), (950, 1400, 2000), (820, 1150, 1600)],
    },
    "sglang": {
        "ttft_ms": [(38, 63, 98), (26, 40, 60), (21, 29, 42)],
        "tpot_ms": [(10, 13.5, 18.5), (9, 11.2, 14.5), (8, 9.5, 12)],
        "itl_ms": [(9.5, 14.5, 24), (8.7, 11.8, 19), (7.8, 10, 15.5)],
        "e2e_ms": [(1000, 1600, 2400), (850, 1250, 1800), (730, 1020, 1450)],
    },
}


def our_summary(label, i, scale):
    m = OURS[label]
    n_req = 100
    s = {
        "backend": label, "scale": scale, "num_requests": n_req, "num_success": n_req,
        "num_error": 0, "success_rate": 1.0, "total_output_events": 6400,
        "duration_s": round(40 * scale, 3), "req_per_s": round(n_req / (40 * scale), 3),
        "tok_per_s": round(6400 / (40 * scale), 3),
        "total_output_tokens": 6400,
        "send_lag_ms": stats(0.05, 0.2, 7.5 if (label, scale) == ("vllm", 0.4) else 0.6),
        "errors_by_kind": {}, "goodput_req_per_s": None,
        "valid": True, "round": 0,
    }
    for metric, rows in m.items():
        p50, p90, p99 = rows[i]
        s[metric] = stats(p50, p90, p99)
    s["icl_ms"] = s["itl_ms"]
    s["ttft_from_scheduled_ms"] = s["ttft_ms"]
    if label == "vllm" and scale == 0.4:
        s["valid"] = False
        s["invalid_reason"] = "send lag p99 7.50 ms > 5 ms"
    s["spread"] = {}
    for metric in m:
        for p in ("p50", "p90", "p99"):
            s["spread"][f"{metric}.{p}"] = spread(s[metric][p], 0.04)
    s["spread"]["tok_per_s"] = spread(s["tok_per_s"], 0.02)
    s["spread"]["req_per_s"] = spread(s["req_per_s"], 0.02)
    return s


def ours_online():
    summaries = []
    by_backend = {}
    for label in OURS:
        runs = []
        for i, scale in enumerate(SCALES):
            s = our_summary(label, i, scale)
            summaries.append(s)
            runs.append({"scale": scale, "round": 0, "summary": s, "request_metrics": [
                {"input_len": 120, "output_len": 64, "start_s": 0.1, "end_s": 1.2,
                 "ttft_s": 0.03, "e2e_s": 1.1, "tpot_s": 0.009, "num_stream_events": 64,
                 "error": None, "index": 0, "scheduled_s": 0.1, "chunk_s": [0.03, 0.04],
                 "chunk_tokens": [1, 1], "num_output_tokens": 64}]})
        by_backend[label] = {"backend": label, "base_url": "http://127.0.0.1:8100", "cmd": [label, "serve"],
                             "log_path": f"{label}.server.log", "runs": runs,
                             "timing": {"backend_start_time": "2026-11-20T01:00:00+00:00",
                                        "backend_end_time": "2026-11-20T01:05:00+00:00",
                                        "server_ready_s": 12.5, "warmup_s": 2.0,
                                        "scale_wall_s": {str(s): 40 * s for s in SCALES},
                                        "backend_wall_s": 300.0}}
    meta = {"model": "gpt2", "device": "cuda", "gpu": "NVIDIA H100 80GB HBM3", "dtype": "fp16",
            "seed": 0, "temperature": 0.7, "top_p": 0.9, "top_k": 50, "ignore_eos": False, "n": 100,
            "scales": SCALES, "backends": list(OURS), "repeat": 3,
            "run_start_time": "2026-11-20T01:00:00+00:00", "run_end_time": "2026-11-20T01:20:00+00:00",
            "wall_s": 1200.0,
            "versions": {"go": "go1.26.8", "git_rev": "abc1234", "roseinfer": "0.1.0",
                         "vllm": "0.13.0", "sglang": "0.5.6", "tensorrt_llm": "not installed"}}
    return {"meta": meta, "summaries": summaries, "by_backend": by_backend}


def ours_offline():
    rows = [
        ("roseinfer", 9800.0), ("roseinfer+flashattn", 11200.0), ("roseinfer+flashattn+nofuse", 0.0),
        ("vllm", 10400.0), ("sglang", 10900.0),
    ]
    results = []
    for label, out_tps in rows:
        total_s = 128 * 64 / out_tps if out_tps else 3.5
        r = {"backend": label, "model": "gpt2", "device": "cuda", "num_prompts": 128, "input_len": 256,
             "output_len": 64, "total_input_tokens": 128 * 256,
             "total_output_tokens": 128 * 64 if out_tps else 0,
             "prefill_s": None, "decode_s": None, "total_s": round(total_s, 4),
             "request_throughput_rps": round(128 / total_s, 3) if out_tps else 0.0,
             "output_throughput_tps": out_tps,
             "total_throughput_tps": round(128 * 320 / total_s, 3) if out_tps else 0.0,
             "extra": {}}
        if not out_tps:
            r["extra"] = {"error": "CUDA out of memory while allocating KV cache", "exit_code": 1}
        else:
            r["spread"] = {k: spread(r[k], 0.015) for k in
                           ("output_throughput_tps", "request_throughput_rps", "total_throughput_tps")}
        results.append(r)
    meta = {"model": "gpt2", "device": "cuda", "dtype": "fp16", "num_prompts": 128, "input_len": 256,
            "output_len": 64, "temperature": 0.7, "top_p": 0.9, "top_k": 50,
            "backends": [r[0] for r in rows], "wall_s": 300.0,
            "versions": {"go": "go1.26.8", "git_rev": "abc1234", "roseinfer": "0.1.0"}}
    return {"meta": meta, "results": results}


def original_online():
    # Three scales, five labels in the old gcfreeze/fastsse scheme, one backend
    # (trtllm) whose every request failed (NaN stats) and one summary missing
    # itl_ms entirely (hand-edited or truncated files exist in the wild).
    labels = ["roseinfer+gcfreeze+fastsse", "roseinfer+gcfreeze+fastsse+nofuse", "vllm", "sglang", "trtllm"]
    summaries = []
    for label in labels:
        for i, scale in enumerate(SCALES):
            base = 1.0 + 0.3 * labels.index(label)
            failed = label == "trtllm"
            def st(p50, p90, p99):
                if failed:
                    return stats(NAN, NAN, NAN, ours=False)
                k = base * (1.6 / scale) ** 0.5
                return stats(round(p50 * k, 3), round(p90 * k, 3), round(p99 * k, 3), ours=False)
            s = {"backend": label, "scale": scale, "num_requests": 50,
                 "num_success": 0 if failed else 50, "num_error": 50 if failed else 0,
                 "success_rate": 0.0 if failed else 1.0, "total_output_events": 0 if failed else 3000,
                 "duration_s": 20.0 * scale, "req_per_s": 0.0 if failed else 2.5 / scale,
                 "tok_per_s": 0.0 if failed else 150 / scale,
                 "ttft_ms": st(20, 35, 60), "e2e_ms": st(700, 1000, 1500),
                 "tpot_ms": st(8, 10, 14), "itl_ms": st(7, 11, 19)}
            if label == "sglang" and scale == 0.8:
                del s["itl_ms"]
            summaries.append(s)
    by_backend = {label: {"backend": label, "base_url": "http://127.0.0.1:8000", "cmd": ["python", "-m", label],
                          "log_path": f"/tmp/{label}.server.log",
                          "runs": [{"scale": s["scale"], "summary": s, "request_metrics": [
                              {"input_len": 10, "output_len": 5, "start_s": 1.0, "end_s": 2.0,
                               "ttft_s": None if label == "trtllm" else 0.02, "e2e_s": 1.0,
                               "tpot_s": None if label == "trtllm" else 0.01,
                               "num_stream_events": 0 if label == "trtllm" else 5,
                               "error": "Connection refused" if label == "trtllm" else None}]}
                              for s in summaries if s["backend"] == label],
                          "timing": {"backend_start_time": "2026-01-01T00:00:00+08:00",
                                     "backend_end_time": "2026-01-01T00:10:00+08:00",
                                     "server_ready_s": 30.1, "warmup_s": 1.5,
                                     "scale_wall_s": {str(s): 20.0 * s for s in SCALES},
                                     "backend_wall_s": 120.0}}
                  for label in labels}
    meta = {"model": "gpt2", "device": "cuda", "gpu": "0", "dtype": "fp16", "seed": 0, "temperature": 0.7,
            "top_p": 0.9, "top_k": 50, "ignore_eos": False, "n": 50, "scales": SCALES,
            "vllm_max_num_seqs": None, "backends": labels, "server_cpus": [0, 1, 2, 3],
            "run_start_time": "2026-01-01T00:00:00+08:00", "run_end_time": "2026-01-01T00:30:00+08:00",
            "wall_s": 1800.0,
            "versions": {"python": "3.11.7", "rosellm": "0.1.0", "vllm": "0.11.0", "sglang": "0.5.2",
                         "tensorrt_llm": "not installed", "torch": "2.8.0", "git_rev": "5d095df"}}
    return {"meta": meta, "summaries": summaries, "by_backend": by_backend}


def original_single():
    # One backend, one scale.
    s = {"backend": "roseinfer", "scale": 1.0, "num_requests": 20, "num_success": 20, "num_error": 0,
         "success_rate": 1.0, "total_output_events": 640, "duration_s": 12.5, "req_per_s": 1.6,
         "tok_per_s": 51.2, "ttft_ms": stats(15.5, 22.0, 31.0, ours=False),
         "e2e_ms": stats(410.0, 520.0, 600.0, ours=False), "tpot_ms": stats(12.0, 13.5, 15.0, ours=False),
         "itl_ms": stats(11.0, 14.0, 21.0, ours=False)}
    return {"meta": {"model": "gpt2", "n": 20, "scales": [1.0], "backends": ["roseinfer"],
                     "temperature": 0.7, "top_p": 0.9, "top_k": 50},
            "summaries": [s],
            "by_backend": {"roseinfer": {"backend": "roseinfer", "base_url": "http://127.0.0.1:8000",
                                         "cmd": [], "log_path": "", "runs": [
                                             {"scale": 1.0, "summary": s, "request_metrics": []}],
                                         "timing": {}}}}


def original_offline():
    rows = [("roseinfer", 5200.0, ""), ("roseinfer+nofuse", 4100.0, ""),
            ("roseinfer+nofuse+nomlp", 0.0, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"),
            ("roseinfer+kv256+nooverlap", 0.0, "child exited with code 1"),
            ("vllm", 6100.0, ""), ("sglang", 0.0, "ImportError: No module named sglang")]
    results = []
    for label, tps, err in rows:
        total_s = 64 * 32 / tps if tps else 2.0
        r = {"backend": label, "model": "gpt2", "device": "cuda", "num_prompts": 64, "input_len": 128,
             "output_len": 32, "total_input_tokens": 64 * 128, "total_output_tokens": 0 if err else 64 * 32,
             "prefill_s": NAN if err else None, "decode_s": None, "total_s": total_s,
             "request_throughput_rps": 0.0 if err else 64 / total_s, "output_throughput_tps": tps,
             "total_throughput_tps": 0.0 if err else 64 * 160 / total_s, "extra": {}}
        if err:
            r["extra"] = {"error": err, "exit_code": 1}
        results.append(r)
    return {"meta": {"model": "gpt2", "device": "cuda", "dtype": "fp16", "num_prompts": 64, "input_len": 128,
                     "output_len": 32, "temperature": 0.7, "top_p": 0.9, "top_k": 50,
                     "backends": [r[0] for r in rows],
                     "versions": {"python": "3.11.7", "rosellm": "0.1.0", "git_rev": "5d095df"}},
            "results": results}


def write(name, payload):
    # indent=2 and allow_nan=True (the default) as the original harness did.
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    write("report_ours_online.json", ours_online())
    write("report_ours_offline.json", ours_offline())
    write("report_original_online.json", original_online())
    write("report_original_single.json", original_single())
    write("report_original_offline.json", original_offline())
