"""pytest options and JSON metadata for the tinit benchmarks.

--quick        (or TINIT_BENCH_QUICK=1) 1 M-element cases only, for a smoke run
--skip-slow    (or TINIT_BENCH_SKIP_SLOW=1) skip torch.nn.init.trunc_normal_
               at 256 M elements (over 10 s a call on 2 cores)
"""

from __future__ import annotations

import os

import pytest
from _env import environment


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
