"""The tools' old module paths: each warns naming its new path and re-exports the same objects, for one
release; ``tinit.report`` is the function and no module shadows a public name."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

import tinit
import tinit.tools.cli
import tinit.tools.cli_models
import tinit.tools.hf_families
import tinit.tools.info
import tinit.tools.report
import tinit.tools.toy_models as toy

# Old paths that are the new module under a second name (sys.modules maps both to it).
ALIASES = {
    "tinit.cli": tinit.tools.cli,
    "tinit.cli_models": tinit.tools.cli_models,
    "tinit.hf_families": tinit.tools.hf_families,
    "tinit.info": tinit.tools.info,
}
# Old paths whose names were renamed when the two toy models shared one module: {old name: new object}.
RENAMED = {
    "tinit.models": {
        "GPT": toy.GPT,
        "GPTConfig": toy.GPTConfig,
        "Attention": toy.GPTAttention,
        "MLP": toy.GPTMLP,
        "Block": toy.GPTBlock,
        "Transformer": toy.GPTTransformer,
    },
    "tinit.report_models": {
        "NORMS": toy.NORMS,
        "Stack": toy.Stack,
        "StackConfig": toy.StackConfig,
        "deepnorm_alpha": toy.deepnorm_alpha,
        "Attention": toy.StackAttention,
        "MLP": toy.StackMLP,
        "Block": toy.StackBlock,
    },
}


def test_every_moved_path_is_checked_here():
    assert set(ALIASES) | set(RENAMED) == set(tinit.tools.MOVED)


def _fresh_import(old: str, monkeypatch):
    """Import ``old`` as a first import would (its warning fires once per process); the test's
    monkeypatch puts sys.modules and the package attribute back afterwards."""
    monkeypatch.delitem(sys.modules, old, raising=False)
    monkeypatch.delattr(tinit, old.rpartition(".")[2], raising=False)
    return importlib.import_module(old)


@pytest.mark.parametrize("old", list(ALIASES))
def test_alias_warns_and_is_the_new_module(old, monkeypatch):
    new = ALIASES[old]
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new.__name__}"):
        module = _fresh_import(old, monkeypatch)
    assert module is new
    assert sys.modules[old] is new


@pytest.mark.parametrize("old", list(RENAMED))
def test_renamed_shim_warns_and_reexports_the_same_objects(old, monkeypatch):
    with pytest.warns(DeprecationWarning, match=f"{old} moved to tinit.tools.toy_models"):
        module = _fresh_import(old, monkeypatch)
    assert sorted(module.__all__) == sorted(RENAMED[old])
    for name, obj in RENAMED[old].items():
        assert getattr(module, name) is obj, f"{old}.{name}"


def test_report_is_the_function_and_its_module_lives_in_tools():
    assert inspect.isfunction(tinit.report) and tinit.report is tinit.tools.report.report
    assert inspect.ismodule(tinit.tools.report)
    importlib.import_module("tinit.tools.report")
    assert inspect.isfunction(tinit.report), "importing the module rebound tinit.report"


def test_no_module_shares_a_name_with_a_public_function():
    """A module named like a public name would shadow it (or be shadowed by it) on ``import tinit.<name>``."""
    modules = {info.name for info in pkgutil.iter_modules(tinit.__path__)}
    assert "report" not in modules
    for name in tinit.__all__:
        if name in modules:
            assert inspect.ismodule(getattr(tinit, name)), f"tinit.{name} is not the module tinit/{name}"


def test_library_imports_no_deprecated_path_and_old_script_runs():
    """``import tinit`` and the tools load none of the old paths; ``python -m tinit.info`` still prints the
    report of ``python -m tinit.tools.info``, with the warning on stderr."""
    old = sorted([*ALIASES, *RENAMED])
    probe = "import sys, tinit, tinit.tools.cli, tinit.tools.report, tinit.tools.info"
    loaded = subprocess.run(
        [
            sys.executable,
            "-W",
            "error::DeprecationWarning",
            "-c",
            f"{probe}; print([n for n in {old!r} if n in sys.modules])",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "[]"
    runs = {
        name: subprocess.run([sys.executable, "-m", name], check=False, capture_output=True, text=True, timeout=120)
        for name in ("tinit.info", "tinit.tools.info")
    }
    assert runs["tinit.info"].returncode == 0 and runs["tinit.tools.info"].returncode == 0, runs
    assert runs["tinit.info"].stdout == runs["tinit.tools.info"].stdout
    assert "DeprecationWarning: tinit.info moved to tinit.tools.info" in runs["tinit.info"].stderr
    assert "DeprecationWarning" not in runs["tinit.tools.info"].stderr
