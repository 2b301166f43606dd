"""Compile tinit's Triton kernels for sm_90 or sm_80 without a GPU, typed as their launchers call them.

For bench/sass_budget.py. Every ``*_kernel`` JIT function of
triton_kernels/trunc_normal.py and trunc_normal_grouped.py is compiled once
per dtype and (if it has a MODE constexpr) per transform mode; the grouped
kernel once per tensor count of TENSOR_COUNTS (equal tensors totalling
TOTAL_ELEMENTS), whose table searches (LOG unrolled steps) differ. Its arguments are those of a real launch:
the module's launcher (``_launch``, ``philox_words_triton``, the grouped
``_plan`` + ``_launch``) runs on CPU tensors with the kernel swapped for a
recorder, and each argument is typed by ``triton.runtime.jit.mangle_type``,
as a launch types it (Python ints below 2**31 are i32, so numel is i32 as
for any tensor under 2**31 elements). Pointers get tt.divisibility 16, as a
fresh torch tensor does; other integers are not specialised. Where a
launcher cannot be called (its signature changed), the kernel is typed from
its parameter names instead (``*_ptr``: the dtype's pointer; numel, ``*_lo``,
``*_hi``, flip, split, ``n_*``, ``*_base``: i32; anything else fp32) with the
module's LAUNCH_OPTIONS, and the case says so (``typed_by``). A file that
does not import, or a kernel that does not compile, is an error row of the
report; the other kernels are still measured.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import warnings
from pathlib import Path

FILES = ("trunc_normal", "trunc_normal_grouped")
# The grouped kernel is compiled for equal tensors totalling TOTAL_ELEMENTS, split into each of
# these counts (its search of the table has LOG = _search_steps(count) unrolled steps).
TENSOR_COUNTS = (1, 256, 4096)
TOTAL_ELEMENTS = 1 << 28
DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
_PACKAGE = "_sass_budget_kernels"


class _Recorder:
    """Stands in for a JIT kernel: ``kernel[grid](*args, **kwargs)`` records the call."""

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append((args, kwargs))


class _UnregisteredOp:
    """What ``torch.library.triton_op``/``custom_op`` return, without registering anything."""

    def __init__(self, fn):
        self._fn = fn

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def register_fake(self, fn):
        return fn


def _unregistered_op(name, fn=None, /, **kwargs):
    """Stand-in for ``torch.library.triton_op``/``custom_op`` while the compiled copy is imported."""
    return _UnregisteredOp(fn) if fn is not None else _UnregisteredOp


def modules(root: Path) -> tuple[dict, dict]:
    """(modules, import errors) of triton_kernels/*.py of root, imported as a package (tinit itself
    from root unless already imported); a module that fails to import is reported, not fatal."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    spec = importlib.util.spec_from_file_location(
        _PACKAGE, root / "triton_kernels" / "__init__.py", submodule_search_locations=[str(root / "triton_kernels")]
    )
    # The copy must be compiled (triton.compile takes no interpreted kernel) even inside a pytest
    # session that runs Triton interpreted: triton reads TRITON_INTERPRET at each @triton.jit. Its
    # ops are left unregistered: torch.ops.tinit.* stay the package's own (this copy only compiles).
    import torch

    # tinit (and what it imports: DTensor, torch's functional collectives) must register its own ops
    # before the stand-ins below replace torch.library's decorators.
    import tinit  # noqa: F401

    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "0"
    try:
        saved = {
            name: getattr(torch.library, name) for name in ("triton_op", "custom_op") if hasattr(torch.library, name)
        }
        for name in saved:
            setattr(torch.library, name, _unregistered_op)
        try:
            sys.modules[_PACKAGE] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(sys.modules[_PACKAGE])
            mods, errors = {}, {}
            for name in FILES:
                try:
                    mods[name] = importlib.import_module(f"{_PACKAGE}.{name}")
                except Exception as exc:  # noqa: BLE001 - reported as that file's error
                    errors[name] = f"import: {type(exc).__name__}: {exc}"
        finally:
            for name, op in saved.items():
                setattr(torch.library, name, op)
    finally:
        if previous is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = previous
    return mods, errors


def _recipes(mods: dict) -> list[tuple]:
    """(kernel, dtype, module, call) for each launcher call to record."""
    import numpy as np
    import torch

    from tinit.params import transform_constants

    tn, tg = mods.get("trunc_normal"), mods.get("trunc_normal_grouped")
    recipes = []
    if tn is not None:
        recipes.append(
            (
                "_philox_kernel",
                "words",
                tn,
                lambda: tn.philox_words_triton(
                    1 << 12, 5, 3, 0, device="cpu", block=getattr(tn, "WORDS_BLOCK", tn.DEFAULT_BLOCK)
                ),
            )
        )
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        name = DTYPES[str(dtype).split(".")[-1]]
        if tn is not None:
            recipes.append(
                (
                    "_trunc_normal_kernel",
                    name,
                    tn,
                    lambda dtype=dtype: tn._launch(
                        torch.empty(1 << 12, dtype=dtype),
                        2**63 + 5,
                        2**40 + 3,
                        4,
                        transform_constants(0.0, 1.0, -2.0, 2.0, dtype),
                        tn.DEFAULT_BLOCK,
                        lambda kernel: kernel,
                    ),
                )
            )
        for n in TENSOR_COUNTS if tg is not None else ():
            each = TOTAL_ELEMENTS // n  # 256 tensors of 2^20 elements: LOG 8, BLOCK DEFAULT_BLOCK
            recipes.append(
                (
                    ("_grouped_kernel", n),
                    name,
                    tg,
                    lambda dtype=dtype, n=n, each=each: tg._launch(
                        tg._plan(
                            np.full(n, 1 << 20, dtype=np.int64),
                            np.full(n, each, dtype=np.int64),
                            np.arange(n, dtype=np.int64),
                            np.zeros(n, dtype=np.int64),
                            np.zeros(n, dtype=np.int64),
                            tg._const_row(transform_constants(0.0, 1.0, -2.0, 2.0, dtype))[None, :],
                            None,
                        ),
                        dtype,
                        torch.device("cpu"),
                        2**63 + 5,
                    ),
                )
            )
    return recipes


def _recorded(mods: dict) -> dict:
    """{(kernel, dtype, tensors): (args, kwargs)} of the launchers' calls, or why a launcher failed
    (a str); tensors: the tensor count of a grouped launch (TENSOR_COUNTS), else None."""
    try:
        recipes = _recipes(mods)
    except Exception:  # noqa: BLE001 - e.g. tinit.params changed: every kernel is typed by names
        return {}
    found = {}
    for kernel, dtype, mod, call in recipes:
        kernel, tensors = kernel if isinstance(kernel, tuple) else (kernel, None)
        rec, saved = _Recorder(), getattr(mod, kernel, None)
        setattr(mod, kernel, rec)  # the launcher reads the module global at call time
        try:
            call()
            found[(kernel, dtype, tensors)] = rec.calls[0]
        except Exception as exc:  # noqa: BLE001 - a changed launcher: typed by names instead
            found[(kernel, dtype, tensors)] = f"names (launcher failed: {type(exc).__name__}: {exc})"
        finally:
            setattr(mod, kernel, saved)
    return found


def _by_names(fn, mod, dtype: str) -> tuple[dict, dict]:
    """(argument values standing for the types, options) from parameter names alone."""
    pointer = {"fp32": "*fp32", "bf16": "*bf16", "fp16": "*fp16", "words": "*i32"}[dtype]
    values = {}
    for p in fn.params:
        if p.is_constexpr:
            values[p.name] = {"BLOCK": getattr(mod, "DEFAULT_BLOCK", 256), "LOG": 8}.get(
                p.name, getattr(mod, "_DTYPE_CODES", {}).get(_torch_dtype(dtype), 0)
            )
        elif p.name.endswith("_ptr"):
            values[p.name] = pointer
        elif (
            p.name in ("numel", "flip", "split") or p.name.endswith(("_lo", "_hi", "_base")) or p.name.startswith("n_")
        ):
            values[p.name] = "i32"
        else:
            values[p.name] = "fp32"
    return values, dict(getattr(mod, "LAUNCH_OPTIONS", {"num_warps": 4}))


def _torch_dtype(dtype: str):
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype)


def compile_all(root: Path, modes: dict[int, str], work: Path, select=None, capability: int = 90) -> list[dict]:
    """Compile every Triton kernel of root once per dtype, mode and (grouped) tensor count.

    Args:
        root: the source tree (its triton_kernels/ and tinit/).
        modes: {value: name} of ``enum TransformMode``.
        work: folder for the cubins and PTX.
        select: predicate on (kernel, dtype, mode) of what to compile; None: everything.
        capability: the GPU target, 90 (sm_90) or 80 (sm_80).

    Returns:
        One dict per compiled kernel: kernel, dtype, mode, tensors (the grouped launch's tensor
        count, TENSOR_COUNTS, else None), cubin and ptx paths, metadata name, num_warps, BLOCK
        and REPS (None without them), options, typed_by, capability; or an error instead of the
        compiled fields.
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction, mangle_type

    mods, errors = modules(root)
    recorded = _recorded(mods)
    out = [
        {"kernel": f"{name}.py", "dtype": None, "mode": None, "error": why}
        for name, why in errors.items()
        if not select or select(f"{name}.py", None, None)
    ]
    for mod in mods.values():
        for kname, fn in vars(mod).items():
            if not (isinstance(fn, JITFunction) and kname.endswith("_kernel") and fn.fn.__module__ == mod.__name__):
                continue
            dtypes = ["words"] if "philox" in kname else list(DTYPES.values())
            constexpr = {p.name for p in fn.params if p.is_constexpr}
            for dtype in dtypes:
                counts = sorted(t for k, d, t in recorded if (k, d) == (kname, dtype) and t is not None) or [None]
                for tensors in counts:
                    out += _compile_variants(
                        fn,
                        mod,
                        kname,
                        dtype,
                        tensors,
                        recorded.get((kname, dtype, tensors)),
                        constexpr,
                        modes,
                        work,
                        select,
                        capability,
                        (triton, GPUTarget, ASTSource, mangle_type),
                    )
    return out


def _compile_variants(fn, mod, kname, dtype, tensors, call, constexpr, modes, work, select, capability, api):
    """compile_all's dicts for one kernel, dtype and tensor count (every mode of a MODE constexpr)."""
    triton, GPUTarget, ASTSource, mangle_type = api
    if isinstance(call, tuple):
        args, kwargs = call
        # The recorded positional arguments are the first ones, the rest came by keyword.
        values = {**dict(zip(fn.arg_names, args, strict=False)), **kwargs}
        options = {k: v for k, v in kwargs.items() if k not in fn.arg_names}
        sig = {n: "constexpr" if n in constexpr else mangle_type(values[n]) for n in fn.arg_names}
        typed_by = "launcher"
    else:
        values, options = _by_names(fn, mod, dtype)
        sig = {n: "constexpr" if n in constexpr else values[n] for n in fn.arg_names}
        typed_by = call or "names (no launcher recipe)"
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(fn.arg_names) if sig[n].startswith("*")}
    out = []
    for mode in sorted(modes) if "MODE" in constexpr else [None]:
        if select and not select(kname, dtype, mode):
            continue
        consts = {n: values[n] for n in constexpr} | ({"MODE": mode} if mode is not None else {})
        base = {"kernel": kname, "dtype": dtype, "mode": mode, "tensors": tensors, "typed_by": typed_by}
        try:
            with warnings.catch_warnings():  # the launcher's options, whatever triton's defaults
                warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
                k = triton.compile(
                    ASTSource(fn, sig, constexprs=consts, attrs=attrs),
                    target=GPUTarget("cuda", capability, 32),
                    options=options,
                )
        except Exception as exc:  # noqa: BLE001 - reported as that case's error
            out.append({**base, "error": f"compile: {type(exc).__name__}: {str(exc)[:300]}"})
            continue
        stem = f"{kname}_{dtype}_{'' if mode is None else mode}{'' if tensors is None else f'_n{tensors}'}"
        cubin = work / f"{stem}.sm_{capability}.cubin"
        cubin.write_bytes(k.asm["cubin"])
        cubin.with_suffix(".ptx").write_text(k.asm["ptx"])
        out.append(
            {
                **base,
                "cubin": cubin,
                "ptx": cubin.with_suffix(".ptx"),
                "name": k.metadata.name,
                "num_warps": k.metadata.num_warps,
                "block": consts.get("BLOCK"),
                "reps": consts.get("REPS"),
                "options": options,
                "capability": capability,
            }
        )
    return out


def ptxas_command(ptx: Path, options: dict, capability: int = 90) -> list[str]:
    """The ``ptxas -v`` that triton runs on this PTX (its own ptxas and flags, less -lineinfo).

    Args:
        ptx: the kernel's PTX file.
        options: the launch options it was compiled with (enable_fp_fusion).
        capability: its target, 90 or 80.

    Returns:
        The command line.
    """
    try:
        from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

        ptxas, arch = get_ptxas(capability).path, sm_arch_from_capability(capability)
    except ImportError:
        ptxas, arch = "ptxas", "sm_90a" if capability == 90 else f"sm_{capability}"
    fmad = [] if options.get("enable_fp_fusion", True) else ["--fmad=false"]
    return [ptxas, *fmad, "-v", "--regAllocOptLevel=2", f"--gpu-name={arch}", str(ptx), "-o", "/dev/null"]
