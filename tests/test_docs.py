"""The docs name only what exists: links, file paths, ``tinit.*`` names and CLI flags.

Checked in README.md, CONTRIBUTING.md and every docs/*.md (CHANGELOG.md names the files of past
releases and is left out):

- every relative markdown link ``[text](target#anchor)`` points to an existing file, and its anchor
  to a heading of that file (GitHub's slugs);
- every repository path (``tinit/...``, ``tests/...``, ``bench/...``, ``scripts/...``, ``csrc/...``,
  ``docs/...``, ``triton_kernels/...``, ``.ci/...``, in code spans, fenced blocks or prose) exists;
  ``{a,b}`` alternatives are expanded, ``*`` globs must match something, placeholders (``<unit>``)
  and results written at run time are skipped;
- every dotted name in a code span that starts with ``tinit.`` resolves: the longest importable
  module prefix, then ``getattr`` for the rest, so a module moved behind a re-export still passes;
- every ``--flag`` in a code span that runs tinit's CLI (``tinit init ...``, ``python -m tinit
  report ...``) is an option of that subcommand's ``--help``; a ``--flag`` of ``python
  scripts/x.py`` or ``python bench/x.py`` appears in that script's source; a code span that is
  only a flag (``--set KEY=VALUE``, ``--md PATH``) is an option of some tinit subcommand, appears in
  the source of a script, conftest or folder the same document names, or is another tool's
  (``OTHER_TOOLS_FLAGS``);
- ``Class.attr`` of a tinit class (``Scheme.spec``, ``Mode.TAIL``) names an attribute it has;
- a bare native file, test, benchmark or generator name (``philox.h``, ``test_gpu.py``), a test
  function (``test_gpt2_against_hf_gpt2``) and an identifier alone in a code span
  (``ndtri_segment``) exist in the repository;
- docs/stream.md's record fields, mode values and host thresholds equal ``tinit.params``'s.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import glob
import importlib
import io
import os
import re
import runpy
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")])
TOP_DIRS = ("tinit", "tests", "bench", "scripts", "csrc", "docs", "triton_kernels", ".ci")
# Flags of tools other than tinit that the docs quote on their own (pip, pytest, the linters).
OTHER_TOOLS_FLAGS = {
    "--no-build-isolation",
    "--no-deps",
    "--dry-run",
    "--Werror",
    "--check",
    "--all-files",
    "--benchmark-json",
}
# Paths that exist only once a command has run (results a benchmark or gpu_check.sh writes).
RUNTIME_OUTPUTS = ("bench/results/",)
# Where ``Class.attr`` code spans find their class (resolved as public names, so a moved module that
# is re-exported still counts).
CLASS_MODULES = (
    "tinit",
    "tinit.schemes",
    "tinit.params",
    "tinit.families",
    "tinit.families",
    "tinit.buffers",
    "tinit.dispatch",
    "tinit.sharding",
    "tinit.nn.init",
)

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"(?<!`)(`+)([^`\n]+?)\1(?!`)")
_PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(re.escape(d) for d in TOP_DIRS) + r")/[\w./{},*<>-]*)")
_NAME = re.compile(r"^(tinit(?:\.\w+)+)")
_FLAG = re.compile(r"(?<![\w-])(--[A-Za-z][\w-]*)")


def _doc_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    headings = re.findall(r"^#{1,6} (.+)$", _strip_fences(_text(path)), re.MULTILINE)
    return {_slug(h) for h in headings}


def _strip_fences(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def _code_spans(text: str) -> list[str]:
    return [span for _, span in _CODE_SPAN.findall(_strip_fences(text))]


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def _expand(path: str) -> list[str]:
    """``a.{md,json}`` -> ``a.md``, ``a.json`` (one level of braces)."""
    match = re.search(r"\{([^{}]*)\}", path)
    if not match:
        return [path]
    return [path[: match.start()] + alt + path[match.end() :] for alt in match.group(1).split(",")]


def _paths(text: str) -> set[str]:
    found = set()
    for raw in _PATH.findall(text):
        raw = raw.rstrip(".,;:)")
        if "<" in raw or raw.startswith(RUNTIME_OUTPUTS) and raw != "bench/results/":
            continue
        found.update(_expand(raw))
    return found


@functools.cache
def _cli_options(subcommand: str) -> frozenset[str]:
    """The options ``python -m tinit [subcommand] --help`` lists, run in this process."""
    argv = ["tinit", *([subcommand] if subcommand else []), "--help"]
    out = io.StringIO()
    saved = sys.argv
    sys.argv = argv
    try:
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            runpy.run_module("tinit", run_name="__main__", alter_sys=False)
    finally:
        sys.argv = saved
    return frozenset(_FLAG.findall(out.getvalue()))


def _subcommands() -> list[str]:
    return ["init", "report"]


def _resolve(name: str):
    """``tinit.a.b.c``: import the longest module prefix, getattr the rest; raises on failure."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as err:
            if err.name is not None and not ".".join(parts[:cut]).startswith(err.name):
                raise  # the module exists but one of its own imports is missing
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(name)


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_relative_links_resolve(doc):
    broken = []
    for target in _LINK.findall(_text(doc)):
        if re.match(r"^[a-z][a-z+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    assert not broken, f"{_doc_id(doc)}: " + "; ".join(broken)


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_repository_paths_exist(doc):
    missing = sorted(p for p in _paths(_text(doc)) if not glob.glob(str(ROOT / p)))
    assert not missing, f"{_doc_id(doc)} names paths that do not exist: {missing}"


@functools.cache
def _tinit_classes() -> dict[str, type]:
    """Public classes of tinit's public modules by their bare name (``Scheme``, ``Mode``, ...)."""
    classes: dict[str, type] = {}
    for module in CLASS_MODULES:
        try:
            obj = _resolve(module)
        except (ImportError, AttributeError):
            continue
        for name, value in vars(obj).items():
            if isinstance(value, type) and not name.startswith("_") and value.__module__.startswith("tinit"):
                classes.setdefault(name, value)
    return classes


def _names(text: str) -> set[str]:
    """``tinit.x.y`` in code spans and in python blocks."""
    names = {m.group(1) for span in _code_spans(text) if (m := _NAME.match(span.strip()))}
    for block in _python_blocks(text):
        names |= set(re.findall(r"(?<![\w.])(tinit(?:\.\w+)+)", block))
    return names


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_tinit_class_attributes_resolve(doc):
    """``Scheme.spec``, ``Mode.TAIL``, ``InitSpec.segments``: a code span naming an attribute of a
    tinit class names one it has."""
    classes = _tinit_classes()
    missing = []
    for span in _code_spans(_text(doc)):
        match = re.match(r"^([A-Z]\w*)\.(\w+)(?:\(|$)", span.strip())
        if match and match.group(1) in classes and not hasattr(classes[match.group(1)], match.group(2)):
            missing.append(span)
    assert not missing, f"{_doc_id(doc)} names attributes tinit's classes do not have: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_tinit_names_resolve(doc):
    names = _names(_text(doc))
    unresolved = []
    for name in sorted(names):
        try:
            _resolve(name)
        except (ImportError, AttributeError) as err:
            unresolved.append(f"{name} ({type(err).__name__}: {err})")
    assert not unresolved, f"{_doc_id(doc)} names what tinit does not have: {unresolved}"


@functools.cache
def _repository_file_names() -> frozenset[str]:
    names = set()
    for top in TOP_DIRS:
        names |= {p.name for p in (ROOT / top).rglob("*") if p.is_file()}
    return frozenset(names | {p.name for p in ROOT.iterdir()})


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_bare_file_names_exist(doc):
    """A native or shell file named without its folder in a code span (``philox.h``), or a test,
    benchmark or generator script (``test_gpu.py``, ``bench_gpu.py``, ``gen_coverage.py``), is a file
    of the repository. Other bare ``.py`` names are the reference implementations' files."""
    pattern = r"[\w.-]+\.(?:h|cuh|cu|cpp|sh)|(?:test|bench|gen)_\w+\.py"
    bare = {span.strip() for span in _code_spans(_text(doc)) if re.fullmatch(pattern, span.strip())}
    missing = sorted(name for name in bare if name not in _repository_file_names())
    assert not missing, f"{_doc_id(doc)} names files the repository does not have: {missing}"


@functools.cache
def _test_functions() -> frozenset[str]:
    names = set()
    for path in (ROOT / "tests").rglob("*.py"):
        names |= set(re.findall(r"^(?:async )?def (test_\w+)", _text(path), re.MULTILINE))
    return frozenset(names)


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_named_tests_exist(doc):
    """A test function named in a code span (``test_gpt2_against_hf_gpt2``) is one of the suite."""
    named = {span.strip() for span in _code_spans(_text(doc)) if re.fullmatch(r"test_\w+", span.strip())}
    missing = sorted(named - _test_functions())
    assert not missing, f"{_doc_id(doc)} names tests that do not exist: {missing}"


def _command_flags(span: str) -> tuple[str, set[str]] | None:
    """(what runs, its flags) for a code span that runs tinit's CLI or a repository script."""
    span = span.strip()
    cli = re.match(r"^(?:\S*/)?(?:tinit|python -m tinit)(?:\s+(\w+))?", span)
    if cli and not span.startswith(("tinit.", "python -m tinit.")):
        sub = cli.group(1) if cli.group(1) in _subcommands() else ""
        return f"tinit {sub}".strip(), set(_FLAG.findall(span))
    script = re.match(r"^(?:\S*python\S*\s+)?((?:scripts|bench)/\w+\.py)\b", span)
    if script:
        return script.group(1), set(_FLAG.findall(span))
    return None


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_cli_flags_exist(doc):
    text = _text(doc)
    spans = _code_spans(text) + re.findall(r"^```(?:bash|sh)?\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    every_cli_flag = set().union(*(_cli_options(s) for s in ["", *_subcommands()]))
    named_sources = set()
    for path in _paths(text):
        for hit in glob.glob(str(ROOT / path)):
            hit = Path(hit)
            files = [hit] if hit.is_file() else [*hit.glob("*.py"), *hit.glob("*.sh")]
            named_sources |= {f for f in files if f.suffix in (".py", ".sh")}
    source_flags = set().union(*(set(_FLAG.findall(_text(f))) for f in named_sources))
    unknown = []
    for block in spans:
        for span in block.splitlines() if "\n" in block else [block]:
            span = re.sub(r"^\$ ", "", span.strip())
            command = _command_flags(span)
            if command is not None:
                what, flags = command
                if what.startswith("tinit"):
                    known = _cli_options(what.partition(" ")[2])
                else:
                    known = set(_FLAG.findall(_text(ROOT / what))) if (ROOT / what).is_file() else set()
                unknown += [f"{what} {flag}" for flag in sorted(flags - known - {"--help"})]
            elif re.fullmatch(r"(--[\w-]+)(?:[ =]\S+)?(?:/--[\w-]+)*", span):
                for flag in _FLAG.findall(span):
                    if flag not in every_cli_flag | source_flags | OTHER_TOOLS_FLAGS:
                        unknown.append(flag)
    assert not unknown, f"{_doc_id(doc)} quotes flags no parser has: {unknown}"


def test_the_checks_can_fail(tmp_path):
    """The helpers reject what does not exist (so a passing test means something)."""
    with pytest.raises((ImportError, AttributeError)):
        _resolve("tinit.no_such_module.thing")
    with pytest.raises(AttributeError):
        _resolve("tinit.no_such_function")
    assert "--no-such-flag" not in _cli_options("init") and "--compare" in _cli_options("init")
    assert _paths("see `tinit/nothing_here.py` and scripts/{a,b}.py") == {
        "tinit/nothing_here.py",
        "scripts/a.py",
        "scripts/b.py",
    }
    assert _slug("Keys under `patch_torch_init(seed=s)`") == "keys-under-patch_torch_initseeds"
    assert _code_spans("``a.b`` and `c`") == ["a.b", "c"]
    assert "Scheme" in _tinit_classes() and not hasattr(_tinit_classes()["Scheme"], "no_such_method")


def _doc_number(text: str) -> float:
    """``8``, ``8.3``, ``1/64``, ``2¹⁰⁰``, ``0xFFFFFF7F`` as a float."""
    superscripts = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
    if text.startswith("2") and len(text) > 1 and text[1] in "⁰¹²³⁴⁵⁶⁷⁸⁹⁻":
        return 2.0 ** int(text[1:].translate(superscripts))
    if "/" in text:
        num, den = text.split("/")
        return float(num) / float(den)
    return float(int(text, 16)) if text.startswith("0x") else float(text)


def test_stream_record_and_thresholds_match_the_code():
    """docs/stream.md's record fields, mode values and host thresholds are those of the code."""
    params = _resolve("tinit.params")
    text = _text(ROOT / "docs" / "stream.md")
    section = text.split("### The record", 1)[1]
    fields = re.search(r"tied by a round-trip test:\n`([^`]+)`", section, re.DOTALL).group(1)
    assert [f.strip() for f in fields.replace("\n", " ").split(",")] == list(params.TruncNormalParams._fields)
    modes = dict(re.findall(r"`(\w+)` = (\d+)", section.split("The host's thresholds", 1)[0]))
    assert {name: int(v) for name, v in modes.items()} == {m.name: int(m) for m in params.Mode}
    rows = re.findall(r"^\| `(_\w+)` \| ([^|]+) \|", section, re.MULTILINE)
    assert rows
    for name, value in rows:
        actual = getattr(params, name)
        actual = set(actual.values()) if isinstance(actual, dict) else {actual}
        assert actual == {_doc_number(value.strip())}, f"docs/stream.md: {name} = {value.strip()}, code {actual}"


@functools.cache
def _source_text() -> str:
    """Every source file of the repository (not the benchmark results), concatenated."""
    suffixes = {".py", ".h", ".cpp", ".cu", ".cuh", ".sh", ".toml", ".yaml"}
    chunks = [_text(ROOT / name) for name in ("setup.py", "pyproject.toml") if (ROOT / name).is_file()]
    for top in TOP_DIRS:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in suffixes and "results" not in path.parts:
                chunks.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(chunks)


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_identifiers_exist_in_the_source(doc):
    """A function, constant or class named alone in a code span (``ndtri_segment``, ``_linear_window``,
    ``TruncNormalParams``, ``split()``) occurs in the repository's source: a rename that leaves the
    docs behind fails here. The reference implementations' names are in ``tests/`` (their tests or
    vendored copies)."""
    spans = {span.strip().removesuffix("()") for span in _code_spans(_text(doc))}
    identifiers = {
        s for s in spans if re.fullmatch(r"[A-Za-z_]\w*", s) and ("_" in s.strip("_") or re.search(r"[a-z][A-Z]", s))
    }
    source = _source_text()
    missing = sorted(s for s in identifiers if not re.search(rf"\b{re.escape(s)}\b", source))
    assert not missing, f"{_doc_id(doc)} names identifiers no source file has: {missing}"


def _op_map() -> str:
    text = _text(ROOT / "CONTRIBUTING.md")
    start = text.index("## Where each op lives")
    return text[start : text.index("\n## ", start + 1)]


def test_every_kernel_file_is_in_the_op_map():
    """CONTRIBUTING's "Where each op lives" names every kernel source (so from any one of them the
    others, the callers, tests and benchmarks are found), and every file that points there is in it."""
    op_map = _op_map()
    kernels = [*(ROOT / "csrc" / "cpu").glob("*.cpp"), *(ROOT / "csrc" / "cuda").glob("*.cu")]
    kernels += [p for p in (ROOT / "triton_kernels").glob("*.py") if not p.name.startswith("_")]
    pointing = [
        p
        for top in ("csrc", "triton_kernels", "tinit")
        for p in (ROOT / top).rglob("*")
        if p.suffix in {".py", ".cpp", ".cu", ".h", ".cuh"} and '"Where each op lives"' in p.read_text()
    ]
    missing = sorted({str(p.relative_to(ROOT)) for p in kernels + pointing} - set(re.findall(r"`([\w/.]+)`", op_map)))
    assert not missing, f"not in CONTRIBUTING.md's op map: {missing}"
    assert len(pointing) >= 9, "the kernel files lost their pointer to the op map"


# The source whose comments and docstrings are checked as the markdown is, and the suffixes read.
SOURCE_DIRS = ("tinit", "triton_kernels", "csrc", "bench", "scripts")
SOURCE_SUFFIXES = {".py", ".h", ".cpp", ".cu", ".cuh"}
_CXX_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
_CXX_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def _python_prose(text: str) -> str:
    """The comments and docstrings of a Python source (module, class and function docstrings)."""
    parts = [tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            parts.append(ast.get_docstring(node, clean=False) or "")
    return "\n".join(parts)


def _cxx_prose(text: str) -> str:
    """The ``//`` and ``/* */`` comments of a C++/CUDA source (string literals dropped first)."""
    return "\n".join(_CXX_COMMENT.findall(_CXX_STRING.sub('""', text)))


def _source_files() -> list[Path]:
    files = []
    for top in SOURCE_DIRS:
        for folder, dirs, names in os.walk(ROOT / top):  # not through tinit/triton_kernels, a link
            dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "results"))
            files += [Path(folder) / n for n in sorted(names) if Path(n).suffix in SOURCE_SUFFIXES]
    return files


@pytest.mark.parametrize("top", SOURCE_DIRS)
def test_paths_in_comments_and_docstrings_exist(top):
    """A repository path a comment or docstring quotes (``csrc/...``, ``tinit/....py``,
    ``docs/....md``, ``bench/...``, ``tests/...``) exists, as in the markdown."""
    missing = []
    for path in (p for p in _source_files() if p.relative_to(ROOT).parts[0] == top):
        text = _text(path)
        prose = _python_prose(text) if path.suffix == ".py" else _cxx_prose(text)
        missing += [f"{path.relative_to(ROOT)}: {p}" for p in sorted(_paths(prose)) if not glob.glob(str(ROOT / p))]
    assert not missing, f"comments and docstrings name paths that do not exist: {missing}"


def test_the_prose_of_sources_is_found():
    python = '"""Module: see tinit/a.py."""\nx = "tinit/not_prose.py"  # but tinit/b.py\n'
    assert _paths(_python_prose(python)) == {"tinit/a.py", "tinit/b.py"}
    cxx = 'auto s = "// tinit/not.py";\n// csrc/a.h\n/* csrc/b.cpp\n */ int x;\n'
    assert _paths(_cxx_prose(cxx)) == {"csrc/a.h", "csrc/b.cpp"}


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout


def _stream_version_at(commit: str) -> int | None:
    """``tinit.STREAM_VERSION`` as assigned in the package at ``commit``; None where it is not assigned
    (before it existed: stream version 1 was implicit)."""
    grep = subprocess.run(
        ["git", "-C", str(ROOT), "grep", "-h", "^STREAM_VERSION = ", commit, "--", "tinit"],
        capture_output=True,
        text=True,
        check=False,
    )  # exit status 1: no match
    found = re.findall(r"^STREAM_VERSION = (\d+)", grep.stdout, re.MULTILINE)
    return int(found[0]) if found else None


def test_stream_version_1_commit_is_in_the_history():
    """docs/stream.md and CHANGELOG.md name, by its hash, the last commit of stream version 1: it is an
    ancestor of HEAD, it has version 1 (no ``STREAM_VERSION`` yet, tinit 0.1.0), and the next commit
    towards HEAD has version 2."""
    row = re.search(r"^\| 1 \| .*?`([0-9a-f]{12,40})`", _text(ROOT / "docs" / "stream.md"), re.MULTILINE)
    assert row, "docs/stream.md's version table names no commit for version 1"
    full = max(re.findall(rf"\b({row.group(1)}[0-9a-f]*)\b", _text(ROOT / "docs" / "stream.md")), key=len)
    assert len(full) == 40 and full in _text(ROOT / "CHANGELOG.md"), "CHANGELOG.md names another commit"
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (or no git): the history cannot be read")
    if _git("rev-parse", "--is-shallow-repository").strip() == "true":
        pytest.skip("a shallow clone: the commit of stream version 1 may be outside the fetched history")
    ancestor = subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", full, "HEAD"], check=False)
    assert ancestor.returncode == 0, f"{full} is not in the history of HEAD"
    assert _stream_version_at(full) in (None, 1)
    assert re.search(r'^__version__ = "0\.1\.0"', _git("show", f"{full}:tinit/__init__.py"), re.MULTILINE)
    child = _git("rev-list", "--ancestry-path", "--reverse", f"{full}..HEAD").split()[0]
    assert _stream_version_at(child) == 2, f"{full} is not the last commit of version 1"


def test_stream_version_2_commit_is_in_the_history():
    """docs/stream.md and CHANGELOG.md name, by its hash, the last commit of stream version 2: an
    ancestor of HEAD with ``STREAM_VERSION = 2``; HEAD has version 3."""
    row = re.search(r"^\| 2 \| .*?`([0-9a-f]{12,40})`", _text(ROOT / "docs" / "stream.md"), re.MULTILINE)
    assert row, "docs/stream.md's version table names no commit for version 2"
    full = max(re.findall(rf"\b({row.group(1)}[0-9a-f]*)\b", _text(ROOT / "docs" / "stream.md")), key=len)
    assert len(full) == 40 and full in _text(ROOT / "CHANGELOG.md"), "CHANGELOG.md names another commit"
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (or no git): the history cannot be read")
    if _git("rev-parse", "--is-shallow-repository").strip() == "true":
        pytest.skip("a shallow clone: the commit of stream version 2 may be outside the fetched history")
    ancestor = subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", full, "HEAD"], check=False)
    assert ancestor.returncode == 0, f"{full} is not in the history of HEAD"
    assert _stream_version_at(full) == 2
    assert _stream_version_at("HEAD") == 3
