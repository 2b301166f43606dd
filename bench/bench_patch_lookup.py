"""What ``tinit.patch_torch_init(seed, model=...)``'s name keys cost, per call, in one process.

    python bench/bench_patch_lookup.py                     # the table, best of --rounds rounds of --iters calls
    python bench/bench_patch_lookup.py --iters 20 --rounds 1   # a smoke run

Rows (microseconds a call, on a --dim x --dim fp32 parameter of a model of --layers linear layers),
through the public API only:

- a routed ``torch.nn.init.normal_`` under the patch on the parameter, its ``.data`` and a row slice,
  beside the unpatched keyed call ``tinit.nn.init.KEYED["normal_"]`` on the same tensor with the
  same stream; the difference is what the patch adds to a call: the routing and the name lookup
  (finding the parameter, placing the view in it);
- ``p.data.normal_()`` (a tensor method, routed by an attribute of ``torch.Tensor``);
- another torch call (``torch.add`` of two small tensors, ``Tensor.add_``) with the patch active
  against without: what the patch adds to every other torch call (nothing is set up for them, so
  this should be noise around 0).

Targets (issue: the name-keyed patch): <= 5 us added a routed call, <= 1 us added to another torch call.
The rounds of each pair are interleaved, so load changes hit both sides.
"""

from __future__ import annotations

import argparse

import torch
from _env import best_us

import tinit
from tinit.nn import init as tinit_init


def interleaved_us(patched, plain, patch, iters: int, rounds: int) -> tuple[float, float]:
    """(best us a call of ``patched`` with ``patch`` active, of ``plain`` without), rounds alternating."""
    with patch:
        patched()  # warm: first-call caches
    plain()
    got_patched, got_plain = [], []
    for _ in range(rounds):
        with patch:
            got_patched.append(best_us(patched, iters, 1))
        got_plain.append(best_us(plain, iters, 1))
    return min(got_patched), min(got_plain)


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
    layer = args.layers // 2
    param = model[layer].weight
    stream = tinit.stream_for(f"{layer}.weight")
    views = {"parameter": param, ".data": param.data, "row slice": param.data[1:3]}
    a, b = torch.ones(4), torch.ones(4)
    rows = []
    patch = tinit.patch_torch_init(seed=0, model=model)
    for label, tensor in views.items():
        routed, plain = interleaved_us(
            lambda t=tensor: torch.nn.init.normal_(t),
            lambda t=tensor: tinit_init.KEYED["normal_"](t, seed=0, stream=stream),
            patch,
            args.iters,
            args.rounds,
        )
        rows += [(f"routed nn.init.normal_: {label}", routed), (f"unpatched KEYED normal_: {label}", plain)]
        rows.append((f"added by the patch: {label}", routed - plain))
    with patch, torch.no_grad():
        rows.append(("routed p.data.normal_()", best_us(lambda: param.data.normal_(), args.iters, args.rounds)))
    for label, call in (("torch.add", lambda: torch.add(a, b)), ("Tensor.add_", lambda: a.add_(0.0))):
        active, idle = interleaved_us(call, call, patch, args.iters, args.rounds)
        rows += [(f"{label}, patch active", active), (f"{label}, no patch", idle), (f"added: {label}", active - idle)]
    assert "normal_" not in torch.Tensor.__dict__, "the patch left torch.Tensor.normal_ set"
    width = max(len(label) for label, _ in rows)
    print(f"{'call':<{width}}  us/call")
    for label, value in rows:
        print(f"{label:<{width}}  {value:8.2f}")


if __name__ == "__main__":
    main()
