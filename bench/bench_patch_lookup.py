"""What ``tinit.patch_torch_init(seed, model=...)``'s name keys cost, per call, in one process.

    python bench/bench_patch_lookup.py                     # the table, best of --rounds rounds of --iters calls
    python bench/bench_patch_lookup.py --iters 20 --rounds 1   # a smoke run

Rows (microseconds a call, on a --dim x --dim fp32 parameter of a model of --layers linear layers):

- the name lookup alone (``Keys.find`` + ``block_of``): the parameter itself, its ``.data``, a row slice;
- a routed ``torch.nn.init.normal_`` under the patch on each of those, beside the unpatched keyed call
  ``tinit.nn.init.KEYED["normal_"]`` on the same tensor (the difference is the routing and the lookup);
- ``p.data.normal_()`` (a tensor method, routed by the mode);
- another torch call (``torch.add`` of two small tensors, ``Tensor.add_``) with the patch active
  against without: what the patch adds to every other torch call (its tensor methods are attributes
  of ``torch.Tensor``, not a ``TorchFunctionMode``, so this should be noise around 0).

Targets (issue: the name-keyed patch): <= 5 us a lookup, <= 1 us added to another torch call.
"""

from __future__ import annotations

import argparse
import time

import torch

import tinit
from tinit import _keys, _patch
from tinit.nn import init as tinit_init


def best_us(fn, iters: int, rounds: int) -> float:
    """The best of ``rounds`` rounds of ``iters`` calls, in microseconds a call."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        times.append((time.perf_counter() - start) / iters * 1e6)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=2000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds; the best is printed")
    parser.add_argument("--dim", type=int, default=16, help="the parameters' side")
    parser.add_argument("--layers", type=int, default=64, help="linear layers in the model (table size)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = torch.nn.Sequential(*(torch.nn.Linear(args.dim, args.dim) for _ in range(args.layers)))
    param = model[args.layers // 2].weight
    views = {"parameter": lambda: param, ".data": lambda: param.data, "row slice": lambda: param.data[1:3]}
    keys = _keys.Keys()
    keys.add_parts([model])
    a, b = torch.ones(4), torch.ones(4)
    rows = []

    def time_(label, fn):
        fn()  # warm: first-call caches
        rows.append((label, best_us(fn, args.iters, args.rounds)))

    for label, view in views.items():
        tensor = view()
        time_(f"lookup: {label}", lambda t=tensor: _keys.block_of(t, keys.find(t, "bench"), "bench"))
    stream = tinit.stream_for("0.weight")
    for label, view in views.items():
        tensor = view()
        time_(
            f"unpatched KEYED normal_: {label}", lambda t=tensor: tinit_init.KEYED["normal_"](t, seed=0, stream=stream)
        )
    time_("torch.add, no patch", lambda: torch.add(a, b))
    time_("Tensor.add_, no patch", lambda: a.add_(0.0))
    with tinit.patch_torch_init(seed=0, model=model):
        for label, view in views.items():
            tensor = view()
            time_(f"routed nn.init.normal_: {label}", lambda t=tensor: torch.nn.init.normal_(t))
        time_("routed p.data.normal_()", lambda: param.data.normal_())
        time_("torch.add, patch active", lambda: torch.add(a, b))
        time_("Tensor.add_, patch active", lambda: a.add_(0.0))
    assert _patch._State.depth == 0
    width = max(len(label) for label, _ in rows)
    print(f"{'call':<{width}}  us/call")
    for label, value in rows:
        print(f"{label:<{width}}  {value:8.2f}")
    by = dict(rows)
    for what in ("torch.add", "Tensor.add_"):
        print(f"{'added by the patch: ' + what:<{width}}  {by[what + ', patch active'] - by[what + ', no patch']:8.2f}")


if __name__ == "__main__":
    main()
