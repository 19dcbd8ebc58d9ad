"""Probe one Python environment for `bench envs check|versions`.

Run by the harness as `python -c <this file> --module M --dist D [--import]
[--cuda]` inside a backend's environment. Standard library only until the
optional imports. Prints one line: the marker PROBE_MARKER, a space, and a JSON
object; libraries may print their own lines before it.
"""

import argparse
import json
import platform
import sys
import time
import traceback

PROBE_MARKER = "ROSEINFER_PROBE"


def dist_version(name):
    """Installed distribution version, or None (no import of the package)."""
    if not name:
        return None
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return None
    for candidate in (name, name.replace("_", "-"), name.replace("-", "_")):
        try:
            return metadata.version(candidate)
        except Exception:
            continue
    return None


def last_line(exc):
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text.splitlines()[-1] if text else repr(exc)


def probe(args):
    out = {
        "python_version": platform.python_version(),
        "python_executable": sys.executable,
        "module": args.module,
        "version": dist_version(args.dist),
        "torch": dist_version(args.torch_dist),
        "transformers": dist_version("transformers"),
        "import_ok": None,
        "import_error": None,
        "import_s": None,
        "cuda": None,
    }
    try:
        import importlib.util

        out["found"] = importlib.util.find_spec(args.module) is not None
    except Exception as exc:  # a broken parent package raises here
        out["found"] = False
        out["import_error"] = last_line(exc)
    if args.do_import:
        start = time.perf_counter()
        try:
            mod = __import__(args.module)
            out["import_ok"] = True
            version = getattr(mod, "__version__", None)
            if isinstance(version, str) and not out["version"]:
                out["version"] = version
        except BaseException as exc:  # SystemExit and native-library errors too
            out["import_ok"] = False
            out["import_error"] = last_line(exc)
        out["import_s"] = round(time.perf_counter() - start, 3)
    if args.cuda:
        cuda = {"available": False, "device_count": 0, "devices": [], "error": None}
        try:
            import torch

            cuda["available"] = bool(torch.cuda.is_available())
            if cuda["available"]:
                cuda["device_count"] = torch.cuda.device_count()
                cuda["devices"] = [torch.cuda.get_device_name(i) for i in range(cuda["device_count"])]
            cuda["torch_cuda"] = getattr(torch.version, "cuda", None)
        except BaseException as exc:
            cuda["error"] = last_line(exc)
        out["cuda"] = cuda
    return out


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--module", required=True)
    parser.add_argument("--dist", default="")
    parser.add_argument("--torch-dist", default="torch")
    parser.add_argument("--import", dest="do_import", action="store_true")
    parser.add_argument("--cuda", action="store_true")
    args = parser.parse_args(argv)
    result = probe(args)
    sys.stdout.flush()
    print(PROBE_MARKER + " " + json.dumps(result, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
