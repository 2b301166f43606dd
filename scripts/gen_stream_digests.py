"""Record per-dtype SHA-256 digests of the native CPU fills over a fixed case list.

Writes ``tests/data/stream_digests.json``, which ``tests/test_stream_version.py`` compares a
build against: the fp32, bf16 and fp16 digests must be those of every stream version since 2,
the fp64 digest that of the current ``tinit.STREAM_VERSION``.

    python scripts/gen_stream_digests.py [OUT.json]         # this build's digests
    python scripts/gen_stream_digests.py --superseded LABEL [OUT.json]
        # this build's fp64 digest, added to OUT's superseded_fp64 under LABEL (an older tree on
        # PYTHONPATH); nothing else in OUT changes

Each case is a ``tinit.trunc_normal_at_`` window (absolute bounds) or a uniform scheme, filled
on the cpu backend with 4099 elements (the vector body and its tail) at seed 7, stream 3,
offset 11. The list covers every mode of ``tinit.params.Mode`` in every dtype (checked here):
two-sided windows, the precise mode (cancellation, std outside [2^-100, 2^100]), far tails with
mean 0 and mean != 0 on either side, narrow (uniform-mode) windows and the uniform schemes. A
window a dtype refuses records ``E:<error class>``. The dtype's digest hashes the case labels
and their digests in list order. ``superseded_fp64`` keeps the fp64 digests of earlier
definitions, which the current one must differ from. A rerun keeps them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sys
from pathlib import Path

import torch

import tinit
from tinit.params import Mode, transform_constants

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "data" / "stream_digests.json"
INF = math.inf
NUMEL, SEED, STREAM, OFFSET = 4099, 7, 3, 11
DTYPES = {"fp32": torch.float32, "fp64": torch.float64, "bf16": torch.bfloat16, "fp16": torch.float16}
# (mean, std, a, b), absolute bounds.
WINDOWS = [
    (0.0, 0.02, -0.04, 0.04),
    (0.0, 0.02, -2.0, 2.0),
    (0.0, 1.0, -INF, INF),
    (0.0, 1.0, 0.0, INF),
    (3.0, 2.0, -1.0, 4.0),
    (1.0, 0.5, 3.0, 5.0),
    (1.0, 1.0 / 7.0, -INF, 0.0),
    (0.0, 1e-35, -2e-35, 2e-35),
    (0.0, 1e35, -2e35, 2e35),
    (0.0, 1.0, 8.0, 100.0),
    (0.0, 1.0, 9.0, 12.0),
    (0.0, 1.0, -INF, -15.0),
    (0.0, 1.0, 38.0, 39.0),
    (5.0, 0.7, -INF, 0.0),
    (-2.0, 0.1, 0.0, 0.5),
    (1.0, 0.02, -INF, 0.0),
    (0.0, 1.0, 1000.0, 1000.5),
    (0.0, 1.0, -0.001, 0.001),
    (0.0, 1.0, -1.0, -0.9999),
    (0.0, 1e30, -1e-20, 1e-20),
]
SCHEMES = ["xavier_uniform", "kaiming_uniform"]


def _digest(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


def _case(label: str, dtype: torch.dtype, fill) -> tuple[str, str]:
    tensor = torch.empty(NUMEL, dtype=dtype) if label.startswith("at ") else torch.empty(61, 67, dtype=dtype)
    try:
        fill(tensor)
    except (TypeError, ValueError) as exc:
        return label, f"E:{type(exc).__name__}"
    return label, _digest(tensor)


def cases(dtype: torch.dtype) -> list[tuple[str, str]]:
    """(label, digest) of every case in ``dtype``."""
    out = []
    for window in WINDOWS:

        def fill(t, window=window):
            tinit.trunc_normal_at_(t, *window, seed=SEED, stream=STREAM, offset=OFFSET, backend="cpu")

        out.append(_case(f"at {window!r}", dtype, fill))
    for scheme in SCHEMES:

        def fill(t, scheme=scheme):
            tinit.fill_(t, scheme, seed=SEED, stream=STREAM, backend="cpu")

        out.append(_case(f"fill {scheme}", dtype, fill))
    return out


def modes(dtype: torch.dtype) -> set[Mode]:
    """The modes the windows take in ``dtype`` (the schemes are the uniform mode)."""
    found = {Mode.UNIFORM}
    for window in WINDOWS:
        with contextlib.suppress(ValueError):
            found.add(Mode(int(transform_constants(*window, dtype).mode)))
    return found


def digests() -> dict[str, dict]:
    """{dtype name: {"digest": ..., "cases": {label: digest}}} of this build."""
    out = {}
    for name, dtype in DTYPES.items():
        assert modes(dtype) == set(Mode), f"{name}: the case list misses modes {set(Mode) - modes(dtype)}"
        listed = cases(dtype)
        whole = hashlib.sha256("\n".join(f"{label} {d}" for label, d in listed).encode()).hexdigest()[:16]
        out[name] = {"digest": whole, "cases": dict(listed)}
    return out


def main(argv: list[str]) -> None:
    label = None
    if argv[:1] == ["--superseded"]:
        label, argv = argv[1], argv[2:]
    path = Path(argv[0]) if argv else DEFAULT_OUT
    found = digests()
    before = json.loads(path.read_text()) if path.exists() else {}
    superseded = before.get("superseded_fp64", {})
    if label is None:
        record = {"stream_version": tinit.STREAM_VERSION, "numel": NUMEL, **found}
    else:
        record = before
        superseded[label] = found["fp64"]["digest"]
    record["superseded_fp64"] = superseded
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(path, {k: v["digest"] for k, v in found.items()})


if __name__ == "__main__":
    main(sys.argv[1:])
