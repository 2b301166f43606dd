"""The written public boundary of tinit, checked on the source (the AST), without running any fill.

- No tinit module uses another module's underscore names (``from m import _x`` or ``m._x`` on an
  imported tinit module), ``tinit.schemes`` included; importing a private module (``tinit._plan``,
  ``tinit._C``) is not such a use, the names inside it have no underscore.
- Every public module (no underscore in its dotted path) has ``__all__``, every name in it exists,
  and the API, the union of the library's public modules' ``__all__`` (``tinit.tools`` left out),
  has at most ``API_CAP`` names (CONTRIBUTING.md, "What is public").
- The dotted ``tinit.*`` names the docs quote are exported ones, and every API name is quoted.
- Every library function's body (its docstring excluded) has at most ``MAX_BODY_LINES`` lines;
  Triton ``@triton.jit`` kernels are exempt.
- ``import tinit`` loads no tool: ``tinit.report`` is resolved on first use.

The source walks take the repository root, so the same counts can be taken on another checkout
(``python -c "import test_boundary as b; print(len(b.private_uses(Path('/other/checkout'))))"``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
API_CAP = 100
MAX_BODY_LINES = 60
# The Triton kernels' source folder and the package they ship as.
TRITON_DIR, TRITON_PACKAGE = "triton_kernels", "tinit.triton_kernels"
# Modules whose underscore names their own package may share (the recipes' common core).
SHARED_PRIVATE: tuple[str, ...] = ()  # packages whose modules may share underscore names: none
DOCS = ("README.md", "CONTRIBUTING.md", "docs/*.md")
# What users read: these quote the API only. CONTRIBUTING also names the internals a contributor edits
# (``tinit._plan.Plan``), which tests/test_docs.py checks exist.
USER_DOCS = ("README.md", "docs/*.md")


def package_modules(root: Path) -> dict[str, Path]:
    """Every Python module of the package under ``root``: {dotted name: file}.

    ``tinit/**.py`` and ``triton_kernels/**.py`` (as ``tinit.triton_kernels``); a package is its
    ``__init__.py``. The ``tinit/triton_kernels`` link of a development checkout is not followed.
    """
    modules = {}
    for top, package in (("tinit", "tinit"), (TRITON_DIR, TRITON_PACKAGE)):
        for folder, dirs, files in os.walk(root / top):  # does not follow symlinks
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            rel = Path(folder).relative_to(root / top).parts
            for name in sorted(f for f in files if f.endswith(".py")):
                stem = name.removesuffix(".py")
                parts = (package, *rel) if stem == "__init__" else (package, *rel, stem)
                modules[".".join(parts)] = Path(folder) / name
    return modules


def is_private(module: str) -> bool:
    """A module is private when a component of its dotted name starts with an underscore."""
    return any(part.startswith("_") for part in module.split("."))


def is_tool(module: str) -> bool:
    return module == "tinit.tools" or module.startswith("tinit.tools.")


def _is_package(modules: dict[str, Path], module: str) -> bool:
    return modules[module].name == "__init__.py"


def _is_submodule(modules: dict[str, Path], module: str, name: str) -> bool:
    """``name`` of ``module`` is a module of its own (a file, a package or the native ``_C``)."""
    return f"{module}.{name}" in modules or (module == "tinit" and name == "_C")


def _is_underscore_name(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _absolute(modules: dict[str, Path], module: str, node: ast.ImportFrom) -> str:
    """The module an ``import from`` names, relative levels resolved against ``module``."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if _is_package(modules, module) else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _canonical(name: str) -> str:
    """``triton_kernels.x`` (as a test or a tool might import it) is ``tinit.triton_kernels.x``."""
    if name == TRITON_DIR or name.startswith(TRITON_DIR + "."):
        return TRITON_PACKAGE + name[len(TRITON_DIR) :]
    return name


@dataclass(frozen=True)
class PrivateUse:
    """One use of another module's underscore name: where, whose, which."""

    user: str
    line: int
    owner: str
    name: str

    def __str__(self) -> str:
        return f"{self.user}:{self.line} uses {self.owner}.{self.name}"


def _module_bindings(tree: ast.Module, modules: dict[str, Path], module: str) -> dict[str, str]:
    """Local names bound to tinit modules anywhere in the file: {local name: dotted module}."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _canonical(alias.name)
                if target.split(".")[0] != "tinit":
                    continue
                if alias.asname:
                    bound[alias.asname] = target
                else:
                    bound[target.split(".")[0]] = target.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            source = _canonical(_absolute(modules, module, node))
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{source}.{alias.name}"
    return bound


def _attribute_chain(node: ast.Attribute) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None when the chain does not start at a plain name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else None


def _uses_in(tree: ast.Module, modules: dict[str, Path], module: str) -> Iterator[PrivateUse]:
    """The underscore names of other tinit modules that ``module``'s source imports or reads."""
    bound = _module_bindings(tree, modules, module)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _canonical(_absolute(modules, module, node))
            if source in modules and source != module:
                for alias in node.names:
                    if _is_underscore_name(alias.name) and not _is_submodule(modules, source, alias.name):
                        yield PrivateUse(module, node.lineno, source, alias.name)
        elif isinstance(node, ast.Attribute):  # every chain and its inner chains: a set keeps each use once
            chain = _attribute_chain(node)
            if not chain or chain[0] not in bound:
                continue
            owner = bound[chain[0]]
            rest = chain[1:]
            while rest and f"{owner}.{rest[0]}" in modules:
                owner, rest = f"{owner}.{rest[0]}", rest[1:]
            private = rest and _is_underscore_name(rest[0]) and not _is_submodule(modules, owner, rest[0])
            if private and owner != module:
                yield PrivateUse(module, node.lineno, owner, rest[0])


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _shares_private(user: str, owner: str) -> bool:
    """Both modules inside one package of SHARED_PRIVATE."""
    return any(_within(user, p) and _within(owner, p) for p in SHARED_PRIVATE)


def private_uses(root: Path) -> list[PrivateUse]:
    """Every use, in the package under ``root``, of another tinit module's underscore name.

    Both ``from m import _x`` and ``m._x`` on a name bound to a tinit module count; an underscore
    name that is a module (``from tinit import _C``, ``tinit._plan``) does not, nor a use between
    two modules of a package in SHARED_PRIVATE (none: the recipes' core, ``tinit.schemes._core``,
    names what the scheme modules share without an underscore). The uses are found in the whole file
    (function bodies too), each once per line.
    """
    modules = package_modules(root)
    found: set[PrivateUse] = set()
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found.update(use for use in _uses_in(tree, modules, module) if not _shares_private(use.user, use.owner))
    return sorted(found, key=lambda u: (u.user, u.line, u.owner, u.name))


def test_no_module_uses_another_modules_private_names():
    uses = private_uses(ROOT)
    assert not uses, f"{len(uses)} uses of another module's underscore names:\n" + "\n".join(map(str, uses))


def test_the_private_name_walk_finds_both_forms(tmp_path):
    """The walk finds ``from m import _x`` (absolute and relative) and ``m._x`` through any binding,
    and leaves private modules, dunders and a module's own names alone."""
    files = {
        "tinit/__init__.py": "from tinit import _C\nfrom tinit.a import pub\n",
        "tinit/a.py": "_own = 1\nx = _own\n",
        "tinit/_p.py": "",
        "tinit/b.py": "from tinit.a import _x\nimport tinit.a as m\nm._y\nfrom tinit import _p\n",
        "tinit/c.py": "import tinit\ntinit.a._z\ntinit.__version__\ntinit._p.name\n",
        "tinit/schemes/__init__.py": "from tinit.schemes._core import _k\n",
        "tinit/schemes/_core.py": "from tinit.a import _w\n",
        "triton_kernels/__init__.py": "",
        "triton_kernels/k.py": "from ._host import _h\nfrom . import _host\n_host._g\n",
        "triton_kernels/_host.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert [str(u) for u in private_uses(tmp_path)] == [
        "tinit.b:1 uses tinit.a._x",
        "tinit.b:3 uses tinit.a._y",
        "tinit.c:2 uses tinit.a._z",
        "tinit.schemes:1 uses tinit.schemes._core._k",
        "tinit.schemes._core:1 uses tinit.a._w",
        "tinit.triton_kernels.k:1 uses tinit.triton_kernels._host._h",
        "tinit.triton_kernels.k:3 uses tinit.triton_kernels._host._g",
    ]


# ------------------------------------------------------------------ __all__ and the API


def public_modules(root: Path) -> list[str]:
    """The public modules: every module of the package whose dotted path has no underscore part."""
    return sorted(m for m in package_modules(root) if not is_private(m))


def _declared_all(path: Path) -> list[str] | None:
    """The module-level ``__all__`` of a source file as written (a list or tuple of strings), or None."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return list(ast.literal_eval(node.value))
    return None


def api_names(root: Path = ROOT) -> dict[str, list[str]]:
    """The API: one entry per distinct exported object, {name: the public modules exporting it}.

    The union of the ``__all__`` of the library's public modules (``tinit.tools`` left out); a
    re-export of the same object under the same name (``tinit.trunc_normal_`` is
    ``tinit.nn.init.trunc_normal_``) counts once, and torch's own objects that ``tinit.nn.init``
    re-exports unchanged (``calculate_gain``, ``zeros_``, ``orthogonal_``, ...: torch's API, kept so
    the module replaces ``torch.nn.init`` whole) not at all. Modules without ``__all__`` add nothing.
    """
    found: dict[tuple[str, int], list[str]] = {}
    for module in public_modules(root):
        if is_tool(module):
            continue
        declared = _declared_all(package_modules(root)[module]) or []
        obj = importlib.import_module(module)
        for name in declared:
            value = getattr(obj, name, None)
            if getattr(value, "__module__", "").startswith("torch."):
                continue
            found.setdefault((name, id(value)), []).append(module)
    return {f"{modules[0]}.{name}": modules for (name, _), modules in sorted(found.items())}


def test_every_public_module_declares_all_and_its_names_exist():
    missing_all, missing_names = [], []
    modules = package_modules(ROOT)
    for module in public_modules(ROOT):
        declared = _declared_all(modules[module])
        if declared is None:
            missing_all.append(module)
            continue
        obj = importlib.import_module(module)
        missing_names += [f"{module}.{name}" for name in declared if not hasattr(obj, name)]
    assert not missing_all, f"{len(missing_all)} public modules without __all__: {missing_all}"
    assert not missing_names, f"names in __all__ that the module does not have: {missing_names}"


def test_the_api_has_at_most_the_cap():
    api = api_names()
    assert len(api) <= API_CAP, f"the API has {len(api)} names (cap {API_CAP}): {sorted(api)}"


# ------------------------------------------------------------------ the names the docs quote

_CODE_SPAN = re.compile(r"(?<!`)(`+)([^`\n]+?)\1(?!`)")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
_DOTTED = re.compile(r"(?<![\w.])(tinit(?:\.\w+)+)")
# ``from tinit.x import a, b`` on one line, or a parenthesised list over several.
_FROM_IMPORT = re.compile(r"^\s*from (tinit(?:\.\w+)*) import (\([\w, \n]+\)|[\w, ]+)", re.MULTILINE)


def doc_files(root: Path = ROOT, patterns: tuple[str, ...] = DOCS) -> list[Path]:
    return sorted({p for pattern in patterns for p in root.glob(pattern)})


def quoted_names(text: str) -> set[str]:
    """The dotted ``tinit.*`` names of a markdown text: code spans starting with one, and in python
    blocks every dotted name and every ``from tinit.x import a, b`` (as ``tinit.x.a``, ``tinit.x.b``)."""
    spans = [span.strip() for _, span in _CODE_SPAN.findall(_FENCE.sub("", text))]
    names = {m.group(1) for span in spans if (m := _DOTTED.match(span))}
    for block in _PYTHON_BLOCK.findall(text):
        names |= set(_DOTTED.findall(block))
        for module, imported in _FROM_IMPORT.findall(block):
            for alias in imported.strip("()").replace("\n", " ").split(","):
                if alias.split():
                    names.add(f"{module}.{alias.split()[0]}")
    return names


def _exported(name: str, modules: dict[str, Path]) -> str | None:
    """None when ``name`` is a public module, a name in a public module's ``__all__`` or an attribute
    of one; otherwise why not."""
    parts = name.split(".")
    cut = max(k for k in range(1, len(parts) + 1) if ".".join(parts[:k]) in modules)
    module, rest = ".".join(parts[:cut]), parts[cut:]
    if is_private(module):
        return f"{module} is a private module"
    if not rest:
        return None
    declared = _declared_all(modules[module]) or []
    return None if rest[0] in declared else f"{rest[0]} is not in {module}.__all__"


def test_docs_quote_only_exported_names():
    modules = package_modules(ROOT)
    wrong = []
    for doc in doc_files(ROOT, USER_DOCS):
        for name in sorted(quoted_names(doc.read_text(encoding="utf-8"))):
            if (why := _exported(name, modules)) is not None:
                wrong.append(f"{doc.relative_to(ROOT)}: {name} ({why})")
    assert not wrong, f"{len(wrong)} quoted names that no public __all__ exports:\n" + "\n".join(wrong)


def _quoted_objects(names: set[str]) -> set[int]:
    """ids of the objects the quoted names (or the leading part of a longer one) resolve to."""
    found = set()
    for name in names:
        parts = name.split(".")
        for cut in range(2, len(parts) + 1):
            module, _, attr = ".".join(parts[:cut]).rpartition(".")
            try:
                obj = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError):
                continue
            if not isinstance(obj, (int, float, str, bytes)):  # equal constants may share an object
                found.add(id(obj))
    return found


def test_every_api_name_is_quoted_in_the_docs():
    quoted = set().union(*(quoted_names(doc.read_text(encoding="utf-8")) for doc in doc_files()))
    objects = _quoted_objects(quoted)
    unquoted = []
    for name, modules in api_names().items():
        paths = {f"{m}.{name.rpartition('.')[2]}" for m in modules}
        obj = getattr(importlib.import_module(modules[0]), name.rpartition(".")[2])
        prefixes = {q for q in quoted for p in paths if q == p or q.startswith(p + ".")}
        if not prefixes and id(obj) not in objects:
            unquoted.append(name)
    assert not unquoted, f"{len(unquoted)} API names the docs never quote: {unquoted}"


def test_the_doc_name_checks_can_fail():
    text = "`tinit.x.y` and `tinit.z`\n```python\nfrom tinit.a import b, c as d\nimport tinit.e\n```\n"
    assert quoted_names(text) == {"tinit.x.y", "tinit.z", "tinit.a", "tinit.a.b", "tinit.a.c", "tinit.e"}
    modules = package_modules(ROOT)
    assert _exported("tinit.nn", modules) is None
    assert _exported("tinit.no_such_name", modules) == "no_such_name is not in tinit.__all__"
    private = next(m for m in modules if is_private(m) and m.count(".") == 1)
    assert _exported(f"{private}.anything", modules) == f"{private} is a private module"


# ------------------------------------------------------------------ function length


def _is_triton_jit(decorator: ast.expr) -> bool:
    """``@triton.jit`` or ``@triton.jit(...)``."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "jit" and _attribute_chain(target) == ["triton", "jit"]


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the end of the last one (comments and
    blank lines between them count)."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        if isinstance(body[0].value.value, str) and len(body) > 1:
            body = body[1:]
        elif isinstance(body[0].value.value, str):
            return 0
    return body[-1].end_lineno - body[0].lineno + 1


def long_functions(root: Path, limit: int = MAX_BODY_LINES) -> list[str]:
    """``module:line name (N lines)`` for every function of the package under ``root`` whose body is
    longer than ``limit`` lines; nested functions are measured on their own too, ``@triton.jit``
    kernels are left out."""
    found = []
    for module, path in package_modules(root).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if any(_is_triton_jit(d) for d in node.decorator_list):
                continue
            if (n := body_lines(node)) > limit:
                found.append(f"{module}:{node.lineno} {node.name} ({n} lines)")
    return sorted(found)


def test_every_function_body_is_at_most_the_limit():
    found = long_functions(ROOT)
    assert not found, f"{len(found)} functions longer than {MAX_BODY_LINES} lines:\n" + "\n".join(found)


def test_the_length_count_leaves_out_docstrings_and_kernels(tmp_path):
    (tmp_path / "tinit").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(3))
    (tmp_path / "tinit" / "__init__.py").write_text(
        f'def f():\n    """Doc.\n\n    More.\n    """\n{body}\n\n\n'
        f"@triton.jit\ndef k():\n{body}\n\n\n"
        f"@triton.jit(do_not_specialize=['n'])\ndef k2():\n{body}\n\n\n"
        f"def g():\n{body}\n    # a comment\n\n{body}\n"
    )
    assert long_functions(tmp_path, limit=2) == ["tinit:1 f (3 lines)", "tinit:25 g (8 lines)"]


# ------------------------------------------------------------------ import tinit loads no tool


def test_import_tinit_loads_no_tool_and_report_resolves_on_first_use():
    probe = (
        "import inspect, sys, tinit\n"
        "print(sorted(m for m in sys.modules if m == 'tinit.tools' or m.startswith('tinit.tools.')))\n"
        "print('report' in dir(tinit))\n"
        "import tinit.tools.report as module\n"
        "print(inspect.isfunction(tinit.report) and tinit.report is module.report)\n"
        "from tinit import report\n"
        "print(report is module.report)\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:4] == ["[]", "True", "True", "True"], run.stdout


def test_no_module_shares_a_name_with_a_public_function():
    """A module named like a public name would shadow it (or be shadowed by it) on ``import tinit.<name>``."""
    import tinit

    modules = {m.rpartition(".")[2] for m in package_modules(ROOT) if m.count(".") == 1}
    for name in tinit.__all__:
        if name in modules:
            assert inspect.ismodule(getattr(tinit, name)), f"tinit.{name} is not the module tinit/{name}.py"


def test_api_page_is_current():
    """docs/api.md lists the API as the ``__all__`` lists give it (``scripts/gen_api.py --check``)."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_api.py"), "--check"], check=False, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
