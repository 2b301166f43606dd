"""Record the host constants of stream version 2 over a fixed list of (window, dtype) sets.

Writes ``tests/data/constants_v2.json``, which ``tests/test_constants.py`` compares the
libm-free constants (``tinit._constants``) against. Recorded once, from the code that
called the platform's libm (x86-64, glibc 2.36, CPython 3.11); rerunning it on a later
checkout records that checkout's values instead, so rerun it only to extend the list.

    python scripts/gen_constants_table.py [OUT.json]

Each set is (mean, std, a, b, dtype), a and b absolute, built from a mean, a std and a
window in units of std (two-sided narrow and wide, one-sided, (-inf, inf), far tails up to
1e6 std and one beyond, std from 1e-44 to 1e31). The file holds each window's inputs
(``repr`` of the floats, which round-trips) and, per dtype, either ``E:<class>`` (the error
``tinit.params.transform_constants`` raised) or two SHA-256 digests (12 hex digits each):

- of the 24 fp64 fields, packed little-endian (``raw``);
- of the record as the kernels read it (``TruncNormalParams<T>::from_packed``: ``split`` as
  uint32, every other field cast to the compute type, fp32 for fp32, bf16 and fp16), so a
  change of fp64 bits that rounds away in fp32 is told apart from one that moves a value.

Every 4th window also keeps its fp64 record (``f64_fields``: base64 of the packed fields).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import platform
import struct
import subprocess
import sys
from pathlib import Path

import torch

from tinit import params

ROOT = Path(__file__).resolve().parent.parent
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16}
INF = float("inf")
DIGEST_HEX = 12

MEANS = (0.0, 0.5, -1.0, 3.0, -7.25, 1e4)
STDS = (1e-44, 1e-39, 1e-35, 1e-8, 2e-5, 1e-3, 0.02, 0.1, 0.5, 1.0, 7.0, 100.0, 1e4, 1e31)
# (alpha, beta): the window in units of std from the mean.
WINDOWS = (
    (-INF, INF),
    (-2.0, 2.0),
    (-1.0, 1.0),
    (-3.0, 3.0),
    (-0.5, 0.5),
    (-6.0, 6.0),
    (-10.0, 10.0),
    (-0.01, 0.01),
    (-1e-4, 1e-4),
    (-2.0, 0.5),
    (-0.2, 3.7),
    (0.3, 0.3005),
    (-5.0, -4.9995),
    (1.0, 1.0004),
    (-7.9, -7.0),
    (-INF, 0.0),
    (0.0, INF),
    (-INF, -1.0),
    (-INF, 1.5),
    (2.5, INF),
    (-INF, -5.0),
    (-INF, -7.99),
    (-INF, -8.0),
    (-INF, -8.5),
    (8.0, INF),
    (-INF, -10.0),
    (12.0, INF),
    (-INF, -20.0),
    (-INF, -40.0),
    (40.0, INF),
    (-INF, -100.0),
    (1e3, INF),
    (-INF, -1e5),
    (-INF, -9e5),
    (8.0, 8.01),
    (-9.0, -8.2),
    (10.0, 11.0),
    (-25.0, -20.0),
    (30.0, 30.000001),
    (-41.0, -40.0),
    (100.0, 100.5),
    (-1e4, -9999.0),
    (5e5, 5.00001e5),
    (2e6, INF),
)


def sets():
    """Every (mean, std, a, b) of the product, thinned to every 5th, then the hand-picked ones."""
    out = []
    for k, (mean, std, (lo, hi)) in enumerate(itertools.product(MEANS, STDS, WINDOWS)):
        if k % 5:
            continue
        out.append((mean, std, mean + lo * std, mean + hi * std))
    out += [
        (0.0, 0.5, -0.1, 0.1),  # the fp64 example
        (0.0, 0.02, -0.04, 0.04),
        (0.0, 0.02, -2.0, 2.0),
        (1.0, 0.5, 3.0, 5.0),
        (0.0, 1.0, 9.0, 12.0),
        (0.0, 1.0, -0.001, 0.001),
        (1.0, 0.02, -INF, 0.0),
        (1.0, 1.0 / 7.0, -INF, 0.0),
        (5.0, 0.7, -INF, 0.0),
        (0.0, 2.0**-110 * (1.0 - 2.0**-52), -1e-33, 1e-33),  # std just below a power of two
        (0.0, 2.0**120 * (1.0 - 2.0**-53), -1e36, 1e36),
        (0.0, 2.0**-105, -INF, INF),
        (0.0, 1e39, 0.0, 1e-30),
        (0.0, 1e30, -1e-20, 1e-20),
        (0.0, 1.0, -1.0, -0.9999),
    ]
    return out


def view(fields, dtype):
    """The record as ``from_packed`` reads it, as bytes: split as uint32, the rest as the compute type."""
    fmt = "<d" if dtype == torch.float64 else "<f"
    return b"".join(
        struct.pack("<I", int(v)) if name == "split" else struct.pack(fmt, v)
        for name, v in zip(params.TruncNormalParams._fields, fields, strict=True)
    )


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:DIGEST_HEX]


def entry(mean, std, a, b):
    """{dtype: "E:<error class>" | raw digest + view digest}, and the fp64 fields (base64) of every 4th."""
    out = {}
    for name, dtype in DTYPES.items():
        try:
            fields = tuple(params.transform_constants(mean, std, a, b, dtype))
        except (ValueError, TypeError) as exc:
            out[name] = f"E:{type(exc).__name__}"
            continue
        packed = struct.pack("<24d", *fields)
        out[name] = digest(packed) + digest(view(fields, dtype))
        if name == "f64":
            out["f64_fields"] = base64.b64encode(packed).decode()
    return out


def main(out: Path) -> None:
    windows, entries = [], []
    for k, s in enumerate(sets()):
        windows.append([repr(v) for v in s])
        e = entry(*s)
        if k % 4 and "f64_fields" in e:
            del e["f64_fields"]
        entries.append(e)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], check=True, cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    results = [v for e in entries for k, v in e.items() if k in DTYPES]
    meta = {
        "stream_version": params.STREAM_VERSION,
        "commit": commit,
        "python": sys.version.split()[0],
        "libc": " ".join(platform.libc_ver()),
        "machine": platform.machine(),
        "windows": len(windows),
        "sets": len(results),
        "refused": sum(v.startswith("E:") for v in results),
    }
    data = {"meta": meta, "windows": windows, "results": entries}
    out.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    print(f"{out}: {meta}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "data" / "constants_v2.json")
