#!/usr/bin/env bash
# The GPU check, in one run on a fresh GPU machine (torch, triton,
# nvcc already installed; no network, no scipy), inside TINIT_CHECK_BUDGET_S
# (default 520 s, for a 560 s limit). Throughput numbers come first:
#   1. the extension: the prebuilt abi3 wheel's when one was carried
#      (TINIT_CHECK_WHEEL, default dist/cu13/tinit-*.whl, built by
#      `bash scripts/build_wheels.sh --cuda 13` against this machine's torch
#      2.13 and sent with the run's carry: the first load of a stable-ABI build
#      into another torch, e.g. the GPU machine's 2.11), its tinit/_C.abi3.so
#      put into the checkout, which is installed without building; else a
#      build with its CUDA kernels (sm_90 unless TORCH_CUDA_ARCH_LIST says
#      otherwise; fails if CUDA cannot be built); at most 240 s,
#   2. python -m tinit.tools.info,
#   3. the static SASS budget of the CUDA kernels (bench/sass_budget.py
#      --no-triton, ~10 s idle, at most 90 s): the estimate column of steps 4 and 5; the Triton
#      kernels' SASS compiles in the background meanwhile (~1 min of one core)
#      and is added to step 4's report after step 5 (bench_gpu.py --annotate),
#   4. the GPU benchmark (bench/bench_gpu.py: 2^28 then 2^24 elements, fp32
#      and bf16, five windows, cuda and triton against torch), with a budget
#      of what is left less 170 s, at least 120 s and at most 240 s; it starts
#      ~15 s after the build, prints every row as it is measured and rewrites
#      its report after each size and dtype,
#   5. the grouped-fill benchmark (bench/bench_gpu_grouped.py), its three
#      cases' seconds decided here (GROUPED_CASE_S: large 10, model 20,
#      triton 10; all three scaled down when less is left),
#   6. the host CPU's engines (tests/test_isa.py, tests/test_stream_version.py,
#      at most 60 s): a GPU machine's Xeon or EPYC usually has AVX-512, which
#      the development machines lack, so this is where the AVX-512 engine is
#      compared bit for bit with the scalar one and with the pinned digests,
#   7. the GPU tests (the gpu-marked cases of GPU_TEST_FILES: test_gpu,
#      test_backends, test_stream_contract, ...) with the time that is left
#      less 25 s,
#   8. the quick CPU-side tests, only when 70 s remain (not test_cuda_compile:
#      the build compiled every CUDA source, and its harnesses take minutes).
# A step over its limit gets SIGINT (pytest still writes its summary and
# junit XML; the benchmarks keep the reports written so far), then SIGKILL
# 15 s later.
# Results: bench/results/gpu_<date>_<commit>.{json,md} and
# gpu_<date>_<commit>_grouped.{json,md}; with $OUT set also
# $OUT/bench_gpu.{json,md}, $OUT/bench_gpu_grouped.{json,md},
# $OUT/sass_budget_<date>_<commit>[_with_triton].json, $OUT/gpu_check.log and $OUT/gpu_tests.xml.
#
#   bash bench/gpu_check.sh
#   TINIT_COMMIT=$(git rev-parse --short=12 HEAD) bash bench/gpu_check.sh   # where .git is absent
# Environment: PYTHON (default python3; .venv/bin/python in a rehearsal when
# present), TINIT_CHECK_BUDGET_S, TORCH_CUDA_ARCH_LIST (default 9.0),
# TINIT_COMMIT, and TINIT_CHECK_CPU=1 for a rehearsal on a machine without a
# GPU (CPU-only build, GPU tests skipped, benchmark pipelines on small CPU
# tensors, Triton interpreted, results under /tmp).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CPU_REHEARSAL="${TINIT_CHECK_CPU:-0}"
PY="${PYTHON:-python3}"
[[ "$CPU_REHEARSAL" == 1 && -z "${PYTHON:-}" && -x "$ROOT/.venv/bin/python" ]] && PY="$ROOT/.venv/bin/python"
BUDGET_S="${TINIT_CHECK_BUDGET_S:-520}"
LOG_DIR="${OUT:-$ROOT/bench/results}"
[[ "$CPU_REHEARSAL" == 1 && -z "${OUT:-}" ]] && LOG_DIR="${TMPDIR:-/tmp}/tinit_gpu_check"
mkdir -p "$LOG_DIR"
LOG="$LOG_DIR/gpu_check.log"
: >"$LOG"
START=$(date +%s)
FAILED=()
export PYTHONUNBUFFERED=1
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}"
export MAX_JOBS="${MAX_JOBS:-$(nproc)}"
# ninja and the console scripts live beside the interpreter; nvcc in the CUDA home.
PATH="$(dirname "$("$PY" -c 'import sys; print(sys.executable)')"):$PATH"
if ! command -v nvcc >/dev/null; then
  for home in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    if [[ -n "$home" && -x "$home/bin/nvcc" ]]; then PATH="$home/bin:$PATH"; break; fi
  done
fi
export PATH
if [[ -z "${TINIT_COMMIT:-}" ]]; then
  TINIT_COMMIT="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
fi
export TINIT_COMMIT
SASS_JSON="$LOG_DIR/sass_budget_$(date +%F)_${TINIT_COMMIT}.json"
SASS_ALL_JSON="$LOG_DIR/sass_budget_$(date +%F)_${TINIT_COMMIT}_with_triton.json"
FORCE_CUDA=1
BENCH_ARGS=()
GROUPED_ARGS=()
BENCH_ENV=(env)
if [[ "$CPU_REHEARSAL" == 1 ]]; then
  FORCE_CUDA=0
  BENCH_ARGS=(--device cpu --sizes 256K,64K --out-dir "$LOG_DIR")
  GROUPED_ARGS=(--device cpu --blocks 2 --out-dir "$LOG_DIR")
  BENCH_ENV=(env TRITON_INTERPRET=1)
fi

elapsed() { echo $(($(date +%s) - START)); }
left() { echo $((BUDGET_S - $(elapsed))); }
clamp() { local v=$1 lo=$2 hi=$3; ((v < lo)) && v=$lo; ((v > hi)) && v=$hi; echo "$v"; }

# step NAME TIMEOUT_S COMMAND...: run, log, time, remember failures.
step() {
  local name="$1" limit="$2"
  shift 2
  echo "=== [$(elapsed) s] $name (limit ${limit} s)" | tee -a "$LOG"
  local t0=$(date +%s)
  timeout -s INT --kill-after=15 "$limit" "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc after $(($(date +%s) - t0)) s" | tee -a "$LOG"
  [[ $rc -eq 0 ]] || FAILED+=("$name (exit $rc)")
  return "$rc"
}

{
  echo "tinit GPU check: commit $TINIT_COMMIT, $(date -Is), budget ${BUDGET_S} s"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
} | tee -a "$LOG"

# The prebuilt wheel (a rehearsal takes the CPU one): its extension, unpacked into the checkout that
# the benchmarks and tests import, so that they run the wheel's binary, not a build made here.
WHEEL_GLOB="${TINIT_CHECK_WHEEL:-dist/cu13/tinit-*.whl}"
[[ "$CPU_REHEARSAL" == 1 && -z "${TINIT_CHECK_WHEEL:-}" ]] && WHEEL_GLOB="dist/cpu/tinit-*.whl"
WHEEL="$(compgen -G "$WHEEL_GLOB" | head -n 1 || true)"
install_wheel() {
  rm -f tinit/_C*.so
  "$PY" - "$1" <<'PY' || return 1
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    names = [n for n in wheel.namelist() if n.startswith("tinit/_C") and n.endswith(".so")]
    assert names, f"no tinit/_C*.so in {sys.argv[1]}"
    for name in names:
        wheel.extract(name, ".")
        print(f"gpu_check: {name} from {sys.argv[1]}")
PY
  TINIT_NO_EXTENSION=1 "$PY" -m pip install --no-build-isolation --no-deps --no-index -e .
}
if [[ -n "$WHEEL" ]]; then
  # step runs its command under timeout, which runs programs, not shell functions.
  export -f install_wheel
  export PY
  if ! step "install the prebuilt wheel's extension ($WHEEL)" 240 bash -c 'install_wheel "$1"' _ "$WHEEL"; then
    echo "gpu_check: the wheel did not install; nothing else can run" | tee -a "$LOG"
    exit 1
  fi
elif ! step "build (TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST)" 240 \
  env TINIT_FORCE_CUDA="$FORCE_CUDA" "$PY" -m pip install --no-build-isolation --no-deps --no-index -e . ; then
  echo "gpu_check: the build failed; nothing else can run" | tee -a "$LOG"
  exit 1
fi

step "tinit.tools.info" 30 "$PY" -m tinit.tools.info

step "SASS budget (CUDA kernels)" 90 "$PY" bench/sass_budget.py --arch sm_90 --no-triton --json "$SASS_JSON"

# The Triton kernels' SASS (sm_90, the GPU here) takes a minute or two of one CPU core: it runs beside the
# benchmarks (which wait on the GPU, not the CPU) and its estimates are added to the report after.
echo "=== [$(elapsed) s] SASS budget (CUDA and Triton kernels), in the background" | tee -a "$LOG"
"$PY" bench/sass_budget.py --arch sm_90 --json "$SASS_ALL_JSON" >"$LOG_DIR/sass_budget_all.log" 2>&1 &
SASS_ALL_PID=$!

bench_budget=$(clamp $(( $(left) - 170 )) 120 240)
step "GPU benchmark" $((bench_budget + 30)) "${BENCH_ENV[@]}" \
  "$PY" bench/bench_gpu.py --budget-s "$bench_budget" --sass-json "$SASS_JSON" "${BENCH_ARGS[@]}"

# This script owns the run's time: each grouped case gets its seconds here, scaled to what is left.
GROUPED_CASE_S=(large=10 model=20 triton=10)
grouped_total=40
if (( $(left) > 90 )); then
  scale=$(clamp $(( ($(left) - 150) * 100 / grouped_total )) 50 100)
  case_s=""
  for item in "${GROUPED_CASE_S[@]}"; do
    case_s+="${case_s:+,}${item%%=*}=$(( ${item#*=} * scale / 100 ))"
  done
  step "grouped-fill GPU benchmark ($case_s)" $(( grouped_total * scale / 100 + 30 )) "${BENCH_ENV[@]}" \
    "$PY" bench/bench_gpu_grouped.py --case-s "$case_s" --sass-json "$SASS_JSON" "${GROUPED_ARGS[@]}"
else
  echo "=== grouped-fill GPU benchmark skipped: $(left) s left" | tee -a "$LOG"
  FAILED+=("grouped-fill GPU benchmark (no time left)")
fi

# The benchmark's Triton rows get their estimates once the background compile is done.
wait_s=$(clamp $(( $(left) - 120 )) 0 90)
for ((i = 0; i < wait_s && $(kill -0 "$SASS_ALL_PID" 2>/dev/null && echo 1 || echo 0); i++)); do sleep 1; done
if kill -0 "$SASS_ALL_PID" 2>/dev/null; then
  kill -INT "$SASS_ALL_PID" 2>/dev/null
  echo "=== Triton SASS budget not done after waiting ${wait_s} s: the Triton rows keep no estimate" | tee -a "$LOG"
  FAILED+=("Triton SASS budget (not done in time)")
elif wait "$SASS_ALL_PID" && [[ -s "$SASS_ALL_JSON" ]]; then
  report_json="$(ls -t "$LOG_DIR"/bench_gpu.json "$LOG_DIR"/gpu_*.json bench/results/gpu_*.json 2>/dev/null \
    | grep -v _grouped | head -1)"
  out_dir=bench/results
  [[ "$CPU_REHEARSAL" == 1 ]] && out_dir="$LOG_DIR"
  if [[ -n "$report_json" ]]; then
    step "estimates for the Triton rows" 30 "$PY" bench/bench_gpu.py --annotate "$report_json" \
      --sass-json "$SASS_ALL_JSON" --out-dir "$out_dir"
  fi
else
  echo "=== Triton SASS budget failed (see $LOG_DIR/sass_budget_all.log)" | tee -a "$LOG"
  FAILED+=("Triton SASS budget")
fi

# The AVX-512 engine runs only where the CPU has AVX-512 (qemu has none): the GPU machine's host CPU
# is the one such CPU this project is lent, so its engines are compared here, after the throughput.
{
  echo "host CPU: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2-)"
  echo "AVX-512 flags: $(grep -m1 -o 'avx512[a-z_0-9]*' /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ')"
} | tee -a "$LOG"
step "CPU engines (tinit.ops.cpu_isas, AVX-512 where present)" 60 "$PY" -m pytest -q -p no:cacheprovider \
  tests/test_isa.py tests/test_stream_version.py -rs

# The test files with gpu-marked cases that import without scipy (the GPU machine has none); the others'
# cuda and triton cases run where a GPU and scipy meet. tests/test_bench_gpu.py collects this list.
GPU_TEST_FILES=(tests/test_gpu.py tests/test_backends.py tests/test_stream_contract.py tests/test_philox.py
  tests/test_sharding.py tests/test_grouped_triton.py tests/test_native_refusals.py)
junit=()
[[ -n "${OUT:-}" ]] && junit=(--junitxml "$OUT/gpu_tests.xml")
tests_limit=$(( $(left) - 25 ))
if (( tests_limit >= 30 )); then
  step "GPU tests" "$tests_limit" env TINIT_GPU_REQUIRE=1 "$PY" -m pytest -q -m gpu "${GPU_TEST_FILES[@]}" \
    -p no:cacheprovider -rs --durations=25 "${junit[@]}"
else
  echo "=== GPU tests skipped: $(left) s left" | tee -a "$LOG"
  FAILED+=("GPU tests (no time left)")
fi

if (( $(left) > 70 )); then
  step "quick CPU-side tests" $(clamp $(( $(left) - 10 )) 30 90) "$PY" -m pytest -q -p no:cacheprovider -x \
    tests/test_dispatch.py tests/test_info.py tests/test_philox.py tests/test_params_record.py
else
  echo "=== quick CPU-side tests skipped: $(left) s left" | tee -a "$LOG"
fi

echo "=== done in $(elapsed) s" | tee -a "$LOG"
if ((${#FAILED[@]})); then
  printf 'gpu_check: FAILED: %s\n' "${FAILED[@]}" | tee -a "$LOG"
  exit 1
fi
echo "gpu_check: all steps passed" | tee -a "$LOG"
