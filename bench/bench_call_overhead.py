"""Per-call time of ``tinit.trunc_normal_`` on a 64x64 fp32 tensor beside torch's ``normal_``, in one process.

    python bench/bench_call_overhead.py LABEL
    PYTHONPATH=/path/to/other/checkout python bench/bench_call_overhead.py other   # interleave the two

Prints the best of 21 rounds of 1000 calls (microseconds a call) for ``tinit.trunc_normal_``,
torch's ``Tensor.normal_``, ``tinit.nn.init.normal_`` and ``tinit.fill_`` on the same tensor: the
Python and dispatch overhead of a call, which the fill of 4096 elements barely adds to.
"""

import sys

import torch
from _env import best_us

import tinit

torch.set_num_threads(2)

w = torch.empty(64, 64)


def med(fn, n=1000, rounds=21):
    return best_us(fn, n, rounds)


for _ in range(200):
    tinit.trunc_normal_(w, std=0.02)
    w.normal_(0, 0.02)
a = med(lambda: tinit.trunc_normal_(w, std=0.02))
b = med(lambda: w.normal_(0, 0.02))
c = med(lambda: tinit.nn.init.normal_(w, 0, 0.02))
d = med(lambda: tinit.fill_(w, "normal", role="attn_q", seed=1))
print(
    f"{sys.argv[1]}: trunc_normal_ {a:.2f} us  torch normal_ {b:.2f} us  nn.init.normal_ {c:.2f} us  fill_ {d:.2f} us"
)
