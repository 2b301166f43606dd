#!/usr/bin/env bash
# The GPU check of issue 3, in one run on a fresh GPU machine (torch, triton,
# nvcc already installed; no network), in under 8 minutes:
#   1. build the extension with its CUDA kernels (sm_90 unless
#      TORCH_CUDA_ARCH_LIST says otherwise; fails if CUDA cannot be built),
#   2. python -m tinit.info,
#   3. the GPU tests (tests/test_gpu.py; a GPU backend that cannot run fails),
#   4. the quick CPU-side tests, if time allows,
#   5. the grouped-fill benchmark (bench/bench_gpu_grouped.py: whole-model
#      init, one big tensor and a Shard(1) half, Triton grouped) with two
#      fifths of the benchmarks' time, at most 75 s,
#   6. the GPU benchmark (bench/bench_gpu.py) with the time that is left.
# Results: bench/results/gpu_<date>_<commit>.{json,md} and
# gpu_<date>_<commit>_grouped.{json,md}; with $OUT set also
# $OUT/bench_gpu.{json,md}, $OUT/bench_gpu_grouped.{json,md},
# $OUT/gpu_check.log and $OUT/gpu_tests.xml.
#
#   bash bench/gpu_check.sh
#   TINIT_COMMIT=$(git rev-parse --short=12 HEAD) bash bench/gpu_check.sh   # where .git is absent
# Environment: PYTHON (default python3), TINIT_CHECK_BUDGET_S (default 450),
# TORCH_CUDA_ARCH_LIST (default 9.0), TINIT_COMMIT, and TINIT_CHECK_CPU=1 for a
# rehearsal on a machine without a GPU (CPU-only build, GPU tests skipped,
# benchmark pipelines on small CPU tensors, Triton interpreted, results under /tmp).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
BUDGET_S="${TINIT_CHECK_BUDGET_S:-450}"
LOG_DIR="${OUT:-$ROOT/bench/results}"
[[ "${TINIT_CHECK_CPU:-0}" == 1 && -z "${OUT:-}" ]] && LOG_DIR="${TMPDIR:-/tmp}/tinit_gpu_check"
mkdir -p "$LOG_DIR"
LOG="$LOG_DIR/gpu_check.log"
: >"$LOG"
START=$(date +%s)
FAILED=()
export PYTHONUNBUFFERED=1
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}"
export MAX_JOBS="${MAX_JOBS:-$(nproc)}"
# ninja and the console scripts live beside the interpreter.
PATH="$(dirname "$("$PY" -c 'import sys; print(sys.executable)')"):$PATH"
export PATH
if [[ -z "${TINIT_COMMIT:-}" ]]; then
  TINIT_COMMIT="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
fi
export TINIT_COMMIT
CPU_REHEARSAL="${TINIT_CHECK_CPU:-0}"
FORCE_CUDA=1
BENCH_ARGS=()
GROUPED_ARGS=()
GROUPED_ENV=(env)
if [[ "$CPU_REHEARSAL" == 1 ]]; then
  FORCE_CUDA=0
  BENCH_ARGS=(--device cpu --sizes 1M,4M --out-dir "${TMPDIR:-/tmp}/tinit_gpu_check")
  GROUPED_ARGS=(--device cpu --blocks 2 --out-dir "${TMPDIR:-/tmp}/tinit_gpu_check")
  GROUPED_ENV=(env TRITON_INTERPRET=1)
fi

elapsed() { echo $(($(date +%s) - START)); }
left() { echo $((BUDGET_S - $(elapsed))); }

# step NAME TIMEOUT_S COMMAND...: run, log, time, remember failures.
step() {
  local name="$1" limit="$2"
  shift 2
  echo "=== [$(elapsed) s] $name (limit ${limit} s)" | tee -a "$LOG"
  local t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc after $(($(date +%s) - t0)) s" | tee -a "$LOG"
  [[ $rc -eq 0 ]] || FAILED+=("$name (exit $rc)")
  return "$rc"
}

{
  echo "tinit GPU check: commit $TINIT_COMMIT, $(date -Is), budget ${BUDGET_S} s"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
} | tee -a "$LOG"

if ! step "build (TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST)" 300 \
  env TINIT_FORCE_CUDA="$FORCE_CUDA" "$PY" -m pip install --no-build-isolation --no-deps --no-index -e . ; then
  echo "gpu_check: the build failed; nothing else can run" | tee -a "$LOG"
  exit 1
fi

step "tinit.info" 60 "$PY" -m tinit.info

junit=()
[[ -n "${OUT:-}" ]] && junit=(--junitxml "$OUT/gpu_tests.xml")
tests_limit=$(( $(left) > 330 ? 240 : $(left) - 90 ))
step "GPU tests" "$(( tests_limit > 30 ? tests_limit : 30 ))" \
  env TINIT_GPU_REQUIRE=1 "$PY" -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider -rs "${junit[@]}"

if (( $(left) > 240 )); then
  step "quick CPU-side tests" 60 "$PY" -m pytest -q -p no:cacheprovider -x \
    tests/test_cuda_compile.py tests/test_dispatch.py tests/test_info.py tests/test_philox.py
else
  echo "=== quick CPU-side tests skipped: $(left) s left" | tee -a "$LOG"
fi

# The grouped-fill benchmark: two fifths of the benchmarks' time (after ~10 s
# of its own start-up), at most 75 s, and only when bench_gpu.py still gets 30 s.
avail=$(( $(left) - 45 ))
grouped_budget=$(( (avail - 10) * 2 / 5 ))
(( grouped_budget > 75 )) && grouped_budget=75
if (( grouped_budget >= 20 && avail - grouped_budget - 10 > 30 )); then
  step "grouped-fill GPU benchmark" $((grouped_budget + 40)) "${GROUPED_ENV[@]}" \
    "$PY" bench/bench_gpu_grouped.py --budget-s "$grouped_budget" "${GROUPED_ARGS[@]}"
else
  echo "=== grouped-fill GPU benchmark skipped: $(left) s left" | tee -a "$LOG"
  FAILED+=("grouped-fill GPU benchmark (no time left)")
fi

bench_budget=$(( $(left) - 45 ))
if (( bench_budget > 30 )); then
  step "GPU benchmark" $((bench_budget + 40)) "$PY" bench/bench_gpu.py --budget-s "$bench_budget" "${BENCH_ARGS[@]}"
else
  echo "=== GPU benchmark skipped: $(left) s left" | tee -a "$LOG"
  FAILED+=("GPU benchmark (no time left)")
fi

echo "=== done in $(elapsed) s" | tee -a "$LOG"
if ((${#FAILED[@]})); then
  printf 'gpu_check: FAILED: %s\n' "${FAILED[@]}" | tee -a "$LOG"
  exit 1
fi
echo "gpu_check: all steps passed" | tee -a "$LOG"
