"""Tests of the offline drivers with the library calls stubbed out.

Standard library only: run as `python3 -m unittest test_offline_drivers` in
envs/ (the Go test TestPythonDriverUnitTests does, when python3 exists). No
vLLM, SGLang or TensorRT-LLM is imported.
"""

import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import offline_common as common  # noqa: E402
import sglang_offline  # noqa: E402
import trtllm_offline  # noqa: E402
import vllm_offline  # noqa: E402


def job(**over):
    j = {
        "backend": "vllm",
        "model": "gpt2",
        "dtype": "float16",
        "prompt_token_ids": [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]],
        "output_len": 5,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 50,
        "ignore_eos": True,
        "seed": 42,
        "tensor_parallel_size": 1,
        "max_batch_size": 256,
        "warmup_prompts": 8,
        "skip_warmup": False,
        "vllm": {"attention_backend": "flashinfer", "max_num_seqs": 128, "async_scheduling": True},
        "sglang": {"attention_backend": "triton", "sampling_backend": "flashinfer"},
        "trtllm": {"backend": "tensorrt"},
    }
    j.update(over)
    return j


class TempJob:
    """A job file and result path in a temporary directory."""

    def __init__(self, content):
        self.dir = tempfile.TemporaryDirectory()
        self.job = os.path.join(self.dir.name, "job.json")
        self.out = os.path.join(self.dir.name, "result.json")
        with open(self.job, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))

    def argv(self):
        return ["--job", self.job, "--out", self.out]

    def close(self):
        self.dir.cleanup()


def run(main, argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


class CommonTest(unittest.TestCase):
    def test_parse_args_needs_job(self):
        with redirect_stderr(io.StringIO()):
            with self.assertRaises(SystemExit):
                common.parse_args([])
        a = common.parse_args(["--job", "j.json"])
        self.assertEqual((a.job, a.out), ("j.json", None))

    def test_validate_fills_defaults(self):
        j = common.validate_job({"backend": "x", "model": "m", "prompt_token_ids": [[0]], "output_len": 1})
        self.assertEqual(j["top_k"], 50)
        self.assertEqual(j["vllm"], {})
        self.assertIsNone(j["dtype"])

    def test_validate_rejects(self):
        bad = [
            [],
            {"model": "m", "prompt_token_ids": [[1]], "output_len": 1},
            job(prompt_token_ids=[]),
            job(prompt_token_ids=[[]]),
            job(prompt_token_ids=[[1, -2]]),
            job(prompt_token_ids=[[1, True]]),
            job(prompt_token_ids=[[1.5]]),
            job(output_len=0),
            job(output_len="8"),
            job(vllm=[1]),
        ]
        for b in bad:
            with self.assertRaises(common.JobError, msg=repr(b)):
                common.validate_job(b)

    def test_make_result_fields(self):
        r = common.make_result(common.validate_job(job()), 0.5, 15, {"k": 1})
        self.assertEqual(r["num_prompts"], 3)
        self.assertEqual(r["input_len"], 4)
        self.assertEqual(r["total_input_tokens"], 12)
        self.assertEqual(r["total_output_tokens"], 15)
        self.assertEqual(r["request_throughput_rps"], 6.0)
        self.assertEqual(r["output_throughput_tps"], 30.0)
        self.assertEqual(r["total_throughput_tps"], 54.0)
        self.assertIsNone(r["prefill_s"])
        self.assertEqual(r["device"], "cuda")
        self.assertEqual(r["extra"]["k"], 1)
        self.assertEqual(r["extra"]["python_executable"], sys.executable)

    def test_zero_time_is_floored(self):
        r = common.make_result(common.validate_job(job()), 0.0, 3)
        self.assertEqual(r["request_throughput_rps"], 3 / 1e-9)

    def test_run_main_success_prints_one_line_and_writes_out(self):
        t = TempJob(job())
        try:
            stub = mock.Mock(return_value={"total_s": 2.0, "total_output_tokens": 15, "extra": {"x": "y"}})
            code, out, err = run(lambda argv: common.run_main(stub, argv), t.argv())
            self.assertEqual(code, 0, err)
            lines = out.strip().splitlines()
            self.assertEqual(len(lines), 1)
            got = json.loads(lines[0])
            self.assertEqual(got["backend"], "vllm")
            self.assertEqual(got["total_output_tokens"], 15)
            self.assertEqual(got["output_throughput_tps"], 7.5)
            self.assertEqual(got["extra"]["x"], "y")
            with open(t.out) as f:
                self.assertEqual(json.loads(f.read()), got)
            self.assertEqual(stub.call_args[0][0]["prompt_token_ids"][2], [9, 10, 11, 12])
        finally:
            t.close()

    def test_run_main_failure_writes_error_result(self):
        t = TempJob(job())
        try:
            stub = mock.Mock(side_effect=RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
            code, out, err = run(lambda argv: common.run_main(stub, argv), t.argv())
            self.assertEqual(code, 1)
            self.assertEqual(out, "")
            self.assertIn("Traceback", err)
            with open(t.out) as f:
                got = json.load(f)
            self.assertIn("out of memory", got["extra"]["error"])
            self.assertEqual(got["extra"]["error_type"], "RuntimeError")
            self.assertEqual(got["output_throughput_tps"], 0.0)
        finally:
            t.close()

    def test_run_main_bad_job(self):
        for content in ("{not json", json.dumps(job(output_len=0))):
            t = TempJob(content)
            try:
                code, out, err = run(lambda argv: common.run_main(mock.Mock(), argv), t.argv())
                self.assertEqual(code, 2)
                self.assertIn("bad job", err)
                self.assertFalse(os.path.exists(t.out))
            finally:
                t.close()


class DriverMainTest(unittest.TestCase):
    """Each driver's main with its run_engine replaced: no library needed."""

    def test_each_driver(self):
        for mod, label in ((vllm_offline, "vllm"), (sglang_offline, "sglang"), (trtllm_offline, "trtllm")):
            t = TempJob(job(backend=label))
            try:
                stub = mock.Mock(return_value={"total_s": 1.0, "total_output_tokens": 15, "extra": {}})
                with mock.patch.object(mod, "run_engine", stub):
                    code, out, err = run(mod.main, t.argv())
                self.assertEqual(code, 0, err)
                self.assertEqual(json.loads(out)["backend"], label)
                stub.assert_called_once()
            finally:
                t.close()

    def test_no_library_imported(self):
        for name in ("vllm", "sglang", "tensorrt_llm", "torch"):
            self.assertNotIn(name, sys.modules)


class VLLMTest(unittest.TestCase):
    def test_llm_kwargs(self):
        k = vllm_offline.llm_kwargs(common.validate_job(job()), model_max_len=1024)
        self.assertEqual(k, {
            "model": "gpt2", "tensor_parallel_size": 1, "trust_remote_code": True, "async_scheduling": True,
            "dtype": "float16", "attention_backend": "flashinfer", "max_num_seqs": 128,
        })

    def test_llm_kwargs_long_context_and_auto(self):
        j = common.validate_job(job(dtype=None, vllm={"async_scheduling": False}))
        k = vllm_offline.llm_kwargs(j, model_max_len=32768)
        self.assertEqual(k["max_model_len"], 17)  # max(16, 4 + 5 + 8)
        self.assertNotIn("dtype", k)
        self.assertNotIn("attention_backend", k)
        self.assertFalse(k["async_scheduling"])

    def test_build_llm_drops_rejected_kwargs(self):
        class Fake:
            def __init__(self, model, tensor_parallel_size, trust_remote_code, async_scheduling=None, dtype=None):
                self.kwargs = dict(model=model, async_scheduling=async_scheduling)

        kwargs = vllm_offline.llm_kwargs(common.validate_job(job(vllm={"attention_backend": "flashinfer"})), 1024)
        llm, supported = vllm_offline.build_llm(Fake, kwargs)
        self.assertEqual(supported, {"attention_backend_supported": False, "async_scheduling_supported": True})
        self.assertTrue(llm.kwargs["async_scheduling"])

    def test_build_llm_reraises(self):
        class Never:
            def __init__(self, **kwargs):
                raise TypeError("nope")

        with self.assertRaises(TypeError):
            vllm_offline.build_llm(Never, {"model": "m", "attention_backend": "x"})

    def test_sampling(self):
        s = vllm_offline.timed_sampling(common.validate_job(job(top_k=0)))
        self.assertEqual(s, {"max_tokens": 5, "temperature": 0.7, "top_p": 0.9, "top_k": -1, "ignore_eos": True,
                             "detokenize": False})
        self.assertEqual(vllm_offline.warmup_sampling()["max_tokens"], 1)


class SGLangTest(unittest.TestCase):
    def test_engine_kwargs(self):
        k = sglang_offline.engine_kwargs(common.validate_job(job()))
        self.assertEqual(k, {
            "model_path": "gpt2", "tokenizer_path": "gpt2", "skip_tokenizer_init": True, "tp_size": 1,
            "device": "cuda", "random_seed": 42, "log_level": "error", "attention_backend": "triton",
            "sampling_backend": "flashinfer", "dtype": "float16",
        })

    def test_warmup_plan(self):
        prompts = [[i] for i in range(40)]
        p, s = sglang_offline.warmup_plan(common.validate_job(job(prompt_token_ids=prompts, warmup_prompts=30)))
        self.assertEqual(len(p), 16)
        self.assertEqual(s["max_new_tokens"], 5)
        self.assertEqual(s["temperature"], 0.0)
        self.assertIsNone(sglang_offline.warmup_plan(common.validate_job(job(skip_warmup=True))))
        self.assertIsNone(sglang_offline.warmup_plan(common.validate_job(job(warmup_prompts=0))))

    def test_count(self):
        outs = [{"meta_info": {"completion_tokens": 5}}, {"meta_info": {"completion_tokens": "7"}}]
        self.assertEqual(sglang_offline.count_output_tokens(outs), 12)


class TRTLLMTest(unittest.TestCase):
    def test_llm_arg_request(self):
        r = trtllm_offline.llm_arg_request(common.validate_job(job()))
        self.assertEqual(r["max_seq_len"], 17)  # max(16, 4 + 5 + 8)
        self.assertEqual(r["max_num_tokens"], 256 * 17)
        self.assertEqual(r["backend"], "tensorrt")

    def test_finish_llm_args(self):
        j = common.validate_job(job())
        a = trtllm_offline.finish_llm_args(j, {"model": "gpt2", "backend": "tensorrt"})
        self.assertEqual(a, {"model": "gpt2", "skip_tokenizer_init": True, "dtype": "float16"})
        j = common.validate_job(job(trtllm={"backend": "pytorch"}, dtype=None))
        a = trtllm_offline.finish_llm_args(j, {"model": "gpt2", "backend": "pytorch"})
        self.assertEqual(a, {"model": "gpt2", "backend": "pytorch", "skip_tokenizer_init": True})

    def test_sampling_and_ids(self):
        s = trtllm_offline.timed_sampling(common.validate_job(job(top_k=-1)), 50256, 50256)
        self.assertIsNone(s["top_k"])
        self.assertFalse(s["detokenize"])

        class Tok:
            eos_token_id = 50256
            pad_token_id = None

        self.assertEqual(trtllm_offline.special_ids(Tok(), 50257), (50256, 50256))
        self.assertEqual(trtllm_offline.special_ids(None, 100), (99, 99))


if __name__ == "__main__":
    unittest.main()
