"""The host constants: the same bits on every host and CPython, without the platform's libm.

``tinit._constants`` computes every transcendental value of ``tinit.params``' records with
correctly rounded functions. Checked here: the functions against mpmath (correct rounding,
the oracle), the records against the stream-v2 table recorded from the libm code
(``tests/data/constants_v2.json``, ``scripts/gen_constants_table.py``: fp32/bf16/fp16
unchanged as the kernels read them, fp64 within the stated ulps), the module under
CPython 3.10, 3.12 and 3.13 (a subprocess, no torch), with libm's functions made to raise
or to be off by an ulp, and its imports.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import math
import random
import struct
import subprocess
from fractions import Fraction
from pathlib import Path

import mpmath
import pytest
import torch

from tinit import _constants, params

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "tinit" / "_constants.py"
TABLE = json.loads((ROOT / "tests" / "data" / "constants_v2.json").read_text())
DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16}
FIELDS = params.TruncNormalParams._fields
PYENV = Path("/root/.pyenv/versions")
INTERPRETERS = ("3.10", "3.12", "3.13")
# The fields that hold a value of erf/erfc (fp64: correctly rounded now, glibc's before).
ERF_FIELDS = ("a_cdf", "b_sf", "a_half", "b_half")


def windows():
    return [tuple(float(v) for v in w) for w in TABLE["windows"]]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def view(fields, dtype) -> bytes:
    """The record as ``TruncNormalParams<T>::from_packed`` reads it: split as uint32, every other
    field cast to the compute type (fp32 for fp32, bf16 and fp16)."""
    fmt = "<d" if dtype == torch.float64 else "<f"
    return b"".join(
        struct.pack("<I", int(v)) if name == "split" else struct.pack(fmt, v)
        for name, v in zip(FIELDS, fields, strict=True)
    )


def result(mean, std, a, b, name):
    """What the table stores for one set: "E:<class>" or the raw and the view digest."""
    try:
        fields = tuple(params.transform_constants(mean, std, a, b, DTYPES[name]))
    except (ValueError, TypeError) as exc:
        return f"E:{type(exc).__name__}", None
    return digest(struct.pack("<24d", *fields)) + digest(view(fields, DTYPES[name])), fields


CLEAR_CONSTANTS = _constants.clear_caches  # also while a test wraps the module's names


def clear_caches():
    params.trunc_normal_record.cache_clear()
    CLEAR_CONSTANTS()


def ulps(x: float, y: float) -> int:
    i, j = (struct.unpack("<q", struct.pack("<d", v))[0] for v in (x, y))
    return abs(i - j)


# --- the functions against mpmath ----------------------------------------------------------


def rounded(value) -> float:
    """An mpmath value (at 300 bits) rounded once to fp64: the exact dyadic, then int / int."""
    sign, man, exp, _ = value._mpf_
    exact = Fraction(-man if sign else man) * Fraction(2) ** exp
    return float(exact)


def arguments():
    """The arguments each function is checked at: edges and random ones (fixed seed)."""
    rng = random.Random(5)

    def uniform(lo, hi, count):
        return [rng.uniform(lo, hi) for _ in range(count)]

    def decades(lo, hi, count):
        return [10 ** rng.uniform(lo, hi) for _ in range(count)]

    edges = [2.0, -2.0, 1.9999999999999998, 5.9, 6.0, -6.0, 27.2, 27.3, 5e-324, -5e-324, 1e-300, 0.5, -0.5]
    tiny = [s * v for s in (1, -1) for v in decades(-320, -1, 20)]
    return {
        "erf": edges + tiny + uniform(-7, 7, 150),
        "erfc": edges + tiny + uniform(-7, 28, 150),
        "exp": [-745.1, -708.5, -1e-300, 1e-10, 709.7] + uniform(-746, 5, 100),
        "log": [5e-324, 1e300, 1.0000000000000002] + decades(-300, 300, 100),
        "log2": [2.0**-1074, 2.0**120 * (1 - 2.0**-53), 0.75] + decades(-300, 300, 60),
        "cos": [math.pi * (k + 0.5) / 5 for k in range(5)] + uniform(-4, 4, 60),
    }


ARGS = arguments()


@pytest.mark.parametrize("name", ["erf", "erfc", "exp", "log", "log2", "cos"])
def test_correctly_rounded(name):
    xs = ARGS[name]
    ours = getattr(_constants, name)
    reference = {"log2": lambda v: mpmath.log(v, 2)}.get(name) or getattr(mpmath, name)
    with mpmath.workprec(300):
        expected = [rounded(reference(mpmath.mpf(x))) for x in xs]
    got = [ours(x) for x in xs]
    bad = [
        (x.hex(), g, e)
        for x, g, e in zip(xs, got, expected, strict=True)
        if struct.pack("<d", g) != struct.pack("<d", e)
    ]
    assert not bad, f"{name}: {len(bad)} of {len(xs)} not correctly rounded, e.g. {bad[:3]}"


def test_special_values():
    inf, nan = math.inf, math.nan
    assert [_constants.erf(v) for v in (inf, -inf, 0.0)] == [1.0, -1.0, 0.0]
    assert math.copysign(1.0, _constants.erf(-0.0)) == -1.0
    assert [_constants.erfc(v) for v in (inf, -inf, 0.0)] == [0.0, 2.0, 1.0]
    assert [_constants.exp(v) for v in (-inf, inf, 0.0, -1e300)] == [0.0, inf, 1.0, 0.0]
    assert math.isnan(_constants.erf(nan)) and math.isnan(_constants.erfc(nan)) and math.isnan(_constants.exp(nan))
    with pytest.raises(OverflowError):
        _constants.exp(709.79)
    with pytest.raises(ValueError, match="domain"):
        _constants.log(0.0)
    assert _constants.floor_log2(2.0**120 * (1 - 2.0**-53)) == 120  # log2 rounds up to 120 there
    assert _constants.floor_log2(2.0**-110 * (1 - 2.0**-52)) == -110  # and to -110 here
    with mpmath.workprec(300):
        assert 0.5 * rounded(mpmath.log(mpmath.mpf(2.0 * math.pi))) == _constants.HALF_LOG_2PI


# --- the records against the stream-v2 table ----------------------------------------------


def test_table_covers_the_realistic_sets():
    results = [r[k] for r in TABLE["results"] for k in DTYPES]
    assert sum(not v.startswith("E:") for v in results) >= 2000
    assert {k for r in TABLE["results"] for k in DTYPES if not r[k].startswith("E:")} == set(DTYPES)


def test_fp32_bf16_fp16_records_unchanged():
    """Every fp32/bf16/fp16 record reads as the same compute-type bits as under stream v2 (the
    fp64 fields may differ in a last bit that rounds away); the same sets are refused."""
    moved = []
    for w, old in zip(windows(), TABLE["results"], strict=True):
        for name in ("f32", "bf16", "f16"):
            new, _ = result(*w, name)
            same = new == old[name] if old[name].startswith("E:") else new[12:] == old[name][12:]
            if not same:
                moved.append((w, name, old[name], new))
    assert not moved, f"{len(moved)} fp32/bf16/fp16 records moved, e.g. {moved[:3]}"


def test_fp64_records_within_an_ulp_of_erf():
    """fp64 records (stream version 3) differ from v2 only in the fields from erf/erfc (libm's
    rounding against the correct one: at most 1 ulp) and in step (the window's mass from
    them: within the change that moves, plus 4 ulp); mode, split, scale, bounds and the
    tail's fields are the same bits."""
    checked = 0
    for w, old in zip(windows(), TABLE["results"], strict=True):
        new, fields = result(*w, "f64")
        if old["f64"].startswith("E:") or new.startswith("E:"):
            assert new == old["f64"], w
            continue
        if "f64_fields" not in old:
            continue
        checked += 1
        before = struct.unpack("<24d", base64.b64decode(old["f64_fields"]))
        now = dict(zip(FIELDS, fields, strict=True))
        for name, v in zip(FIELDS, before, strict=True):
            if name in ERF_FIELDS:
                assert ulps(v, now[name]) <= 1, (w, name, v, now[name])
            elif name == "step":
                moved = sum(math.ulp(now[f]) for f in ERF_FIELDS[:2]) * 2.0**-32
                assert abs(v - now[name]) <= moved + 4 * math.ulp(v), (w, name, v, now[name])
            else:
                assert struct.pack("<d", v) == struct.pack("<d", now[name]), (w, name, v, now[name])
    assert checked >= 150


# --- the module under other interpreters, and without libm ---------------------------------

CHILD = r"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("tinit_constants", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
assert not {"torch", "numpy"} & set(sys.modules), "the constants module imported torch or numpy"
out = []
for name, args in json.load(sys.stdin):
    value = getattr(module, name)(*[float.fromhex(a) for a in args])
    out.append([float(v).hex() for v in (value if isinstance(value, tuple) else (value,))])
out.append([module.HALF_LOG_2PI.hex()])
json.dump(out, sys.stdout)
"""
# The functions of tinit._constants that tinit.params calls.
ENTRY_POINTS = ("two_sided", "tail_ratio", "tail_poly", "floor_log2")


@pytest.fixture(scope="module")
def recorded_calls():
    """Every call tinit.params makes into tinit._constants over the table's sets, and its result."""
    calls = {}
    originals = {name: getattr(_constants, name) for name in ENTRY_POINTS}

    def recorder(name):
        def call(*args):
            value = originals[name](*args)
            calls[name, tuple(a.hex() for a in map(float, args))] = value
            return value

        return call

    mp = pytest.MonkeyPatch()
    for name in ENTRY_POINTS:
        mp.setattr(_constants, name, recorder(name))
    clear_caches()
    try:
        for w in windows():
            for name in DTYPES:
                result(*w, name)
    finally:
        mp.undo()
        clear_caches()
    assert {name for name, _ in calls} == set(ENTRY_POINTS)
    return calls


def tail_grid():
    """tail_poly on 720 (b0, a0) beyond the table's: b0 from 8 to 7e5, six widths. Under CPython
    3.12's compensated ``sum()`` 9 of them would differ from 3.11's left-to-right sum."""
    return [
        ("tail_poly", (b0, b0 + w))
        for b0 in (8.0 * 1.1**i for i in range(120))
        for w in (1e-6, 1e-3, 0.1, 1.0, 10.0, math.inf)
    ]


def interpreter(version: str) -> Path | None:
    found = sorted(PYENV.glob(f"{version}.*/bin/python{version}"))
    return found[-1] if found else None


@pytest.mark.parametrize("version", INTERPRETERS)
def test_same_bits_under_other_cpythons(version, recorded_calls):
    """The module, loaded by file path into a bare CPython (-I: no site-packages, so no torch),
    gives the same bits as in this process for every call tinit.params makes for the table's
    sets, for the tail grid and for the function arguments of ``test_correctly_rounded``."""
    python = interpreter(version)
    if python is None:
        pytest.skip(f"no CPython {version} under {PYENV}")
    probes = [(name, (x,)) for name in ("erf", "erfc", "exp", "log", "cos") for x in ARGS[name]] + tail_grid()
    requests = [[name, list(args)] for name, args in recorded_calls] + [
        [name, [x.hex() for x in args]] for name, args in probes
    ]
    proc = subprocess.run(
        [str(python), "-I", "-c", CHILD, str(MODULE)],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    values = list(recorded_calls.values()) + [getattr(_constants, name)(*args) for name, args in probes]
    expected = [[float(v).hex() for v in (value if isinstance(value, tuple) else (value,))] for value in values]
    expected.append([_constants.HALF_LOG_2PI.hex()])
    differ = [(req, e, g) for req, e, g in zip(requests + [["HALF_LOG_2PI", []]], expected, got, strict=True) if e != g]
    assert not differ, f"CPython {version}: {len(differ)} of {len(got)} calls differ, e.g. {differ[:3]}"


# libm's functions as the math module exposes them.
LIBM = tuple(
    n
    for n in (
        *("acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "cos", "cosh"),
        *("erf", "erfc", "exp", "exp2", "expm1", "gamma", "lgamma", "log", "log10", "log1p"),
        *("log2", "pow", "sin", "sinh", "tan", "tanh"),
    )
    if hasattr(math, n)
)


def raising(name):
    def call(*args):
        raise AssertionError(f"math.{name} called")

    return call


def off_by_an_ulp(function):
    def call(*args):
        return math.nextafter(function(*args), math.inf)

    return call


@pytest.mark.parametrize("how", ["raise", "ulp"])
def test_libm_not_consulted(how, monkeypatch):
    """With every libm function of ``math`` raising, or returning the next double up, every
    record of the table's sets is the same bits (the module, and tinit.params, call none)."""
    before = {}
    for w in windows():
        for name in DTYPES:
            before[w, name] = result(*w, name)[0]
    for name in LIBM:
        original = getattr(math, name)
        monkeypatch.setattr(math, name, raising(name) if how == "raise" else off_by_an_ulp(original))
    clear_caches()
    try:
        after = {(w, name): result(*w, name)[0] for w, name in before}
    finally:
        monkeypatch.undo()
        clear_caches()
    differ = [k for k in before if before[k] != after[k]]
    assert not differ, f"{len(differ)} records changed with libm {how}: {differ[:3]}"


# Names of the math module the constants may use: IEEE-exact or correctly rounded by the standard.
EXACT_MATH = {"ceil", "copysign", "floor", "frexp", "inf", "isnan", "ldexp", "pi", "sqrt"}
STDLIB = {"__future__", "decimal", "fractions", "functools", "math"}


def test_module_uses_no_libm_statically():
    """tinit._constants imports only the standard-library modules listed, uses only exact math
    functions, no ``sum()`` or ``pow()``, and ``**`` only on integers or Fractions (exact)."""
    tree = ast.parse(MODULE.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "math":
            assert node.attr in EXACT_MATH, f"math.{node.attr} (line {node.lineno})"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in ("sum", "pow"), f"{node.func.id}() (line {node.lineno})"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            base = node.left.operand if isinstance(node.left, ast.UnaryOp) else node.left
            exact = (isinstance(base, ast.Constant) and type(base.value) is int) or (
                isinstance(base, ast.Call) and getattr(base.func, "id", None) == "Fraction"
            )
            assert exact, f"** on a float (line {node.lineno})"
    assert imported <= STDLIB, imported - STDLIB


def test_params_uses_no_libm_statically():
    """tinit.params calls no libm function itself (its transcendental values come from tinit._constants)."""
    tree = ast.parse((ROOT / "tinit" / "params.py").read_text())
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "math"
    }
    assert used <= EXACT_MATH | {"isfinite", "ulp"}, used
