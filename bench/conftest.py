"""pytest options, JSON metadata and the on-screen throughput table of the tinit benchmarks.

bench_trunc_normal.py's cases record their medians (``record_throughput``); at the end of the run
the terminal summary prints bench/report.py's table from them (G elements/s, write GB/s, the
ratios to torch's fills and the fraction of ``zero_``), with the machine and versions, so one
command shows the figures without the JSON.

--quick        (or TINIT_BENCH_QUICK=1) 1 M-element cases only, for a smoke run
--skip-slow    (or TINIT_BENCH_SKIP_SLOW=1) skip torch.nn.init.trunc_normal_
               at 256 M elements (over 10 s a call on 2 cores)
"""

from __future__ import annotations

import os

import pytest
from _env import environment

_THROUGHPUT = pytest.StashKey[list]()


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "0") not in ("", "0", "false", "False")


def pytest_addoption(parser):
    group = parser.getgroup("tinit benchmarks")
    group.addoption(
        "--quick",
        action="store_true",
        default=_env_flag("TINIT_BENCH_QUICK"),
        help="1 M-element cases only (also TINIT_BENCH_QUICK=1)",
    )
    group.addoption(
        "--skip-slow",
        action="store_true",
        default=_env_flag("TINIT_BENCH_SKIP_SLOW"),
        help="skip torch.nn.init.trunc_normal_ at 256 M elements (also TINIT_BENCH_SKIP_SLOW=1)",
    )


@pytest.fixture(scope="session")
def bench_options(request):
    return {"quick": request.config.getoption("--quick"), "skip_slow": request.config.getoption("--skip-slow")}


def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info["tinit_env"] = environment()
    machine_info["tinit_quick"] = config.getoption("--quick")


@pytest.fixture
def record_throughput(request):
    """``record(benchmark)``: keep a finished pedantic benchmark's extra_info and median for the table."""

    def record(benchmark) -> None:
        stats = getattr(benchmark, "stats", None)
        if stats is None:  # --benchmark-disable: nothing was timed
            return
        rows = request.config.stash.setdefault(_THROUGHPUT, [])
        rows.append(
            {
                "extra_info": dict(benchmark.extra_info),
                "stats": {"median": stats.stats.median, "rounds": stats.stats.rounds},
            }
        )

    return record


@pytest.hookimpl(trylast=True)  # after pytest-benchmark's own tables
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    benchmarks = config.stash.get(_THROUGHPUT, [])
    if not benchmarks:
        return
    import report  # bench/report.py: the same table as the report from the JSON

    rows = report.summarise({"benchmarks": benchmarks})
    terminalreporter.section("tinit throughput")
    terminalreporter.write(report.markdown(rows, environment(), None, config.getoption("--quick")))
