"""SASS text -> functions -> basic blocks -> CFG -> loops -> hot path (for bench/sass_budget.py).

Reads the text of ``nvdisasm -c`` (one ``.section .text.<symbol>`` per kernel,
with its ``$__internal_*`` subroutines after its EXIT). No GPU is needed.

Definitions (the ones bench/sass_budget.py reports):

- Basic blocks start at every label and after every branch, unpredicated
  EXIT, RET, BRX/JMX. A predicated EXIT does not end a block. A CALL to a
  subroutine does not end one either: it returns, and the callee's own
  fast path (below) is added to the block's weight. A CALL to a label of
  the function's own code (``@P0 CALL.REL.NOINC `(.L_x_7)``, how ptxas
  leaves a loop for sm_80) is a branch.
- Edges: a conditional BRA (a guard predicate other than PT, or a predicate
  operand such as ``@P0 BRA P1, target``) goes to its target and falls
  through; an unconditional BRA only to its target; BRX/JMX (a jump table,
  Triton's run-time mode switch) to the BRANCH_TARGETS nvdisasm lists.
- Loops: retreating edges of a depth-first walk from the entry (back edges
  for the reducible graphs nvcc and Triton emit); a loop is the natural loop
  of its header (the union over its latches). The hot loop is an innermost
  loop holding a global store (STG, or a generic ST: the grouped kernels
  write through pointers read from a table), preferring the widest store,
  then the fewest stores narrower than it (the interior loop, not the loop
  of the edge units that also stores element by element), then the most
  store bits in its body (an unrolled loop, not its remainder).
- Fast path (interior): with back edges removed the loop is a DAG; the
  fast path is the path from the header to a latch that passes through a
  block holding the widest store, holds the fewest stores narrower than it,
  then stores the most bits (predicated stores count) and, among those, has
  the fewest instructions (each CALL costs its callee's fast path). Without
  a loop (Triton) it is the same from the entry to an EXIT block. This
  picks the side of every compiler slow-path test (``@!P0 BRA`` around a
  CALL to ``__internal_*_slowpath``, the scalar edge-store tail, the
  compute-only fold) that skips the rare work. Narrower stores come first:
  a masked store block that the compiler placed after an if-converted
  vector store (``@!P1 STG.E.128`` then ``@!P1 BRA`` over the block of
  ``@P2 STG.E``) lies on a path through the vector store too, and "the most
  bits" alone would add it to the aligned path.
- Edge path (``kind="edge"``): the path through a store narrower than the
  widest with the fewest widest stores, then the most bits, then the fewest
  instructions: the element-by-element stores of a tensor's edge unit, or
  of a Triton program that is masked (misaligned or at a tensor's end).
- Slow path: the loop's blocks off the fast path (each once), plus the static
  size of every subroutine they call.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_LABEL = re.compile(r"^([.$A-Za-z_][\w.$]*):\s*$")
_INST = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;?\s*$")
_GUARD = re.compile(r"^(@!?U?P(?:T|\d))\s+")
_TARGET = re.compile(r"`\(([^)]+)\)")
_ENDS = {"BRA", "BRX", "JMP", "JMX", "RET"}
STORES = ("STG", "ST")
_CONVERSIONS = {"F2F", "I2F", "F2I", "I2I", "F2FP", "I2FP", "F2IP"}


@dataclass
class Inst:
    offset: int
    guard: str  # "" when unpredicated, else "@P0", "@!P1", ...
    op: str  # opcode with modifiers, e.g. "STG.E.128"
    args: str

    @property
    def base(self) -> str:
        return self.op.split(".")[0]

    @property
    def target(self) -> str | None:
        found = _TARGET.search(self.args)
        return found.group(1) if found else None

    @property
    def local_call(self) -> bool:
        """A CALL to a label of the function's own code (``@P0 CALL.REL.NOINC `(.L_x_7)``, how
        ptxas leaves a loop for sm_80): a branch that returns nowhere, not a subroutine call."""
        return self.base == "CALL" and (self.target or "").startswith(".L")

    @property
    def subroutine(self) -> str | None:
        """The subroutine a CALL enters (``$__internal_*``), else None."""
        return self.target if self.base == "CALL" and not self.local_call else None

    @property
    def conditional(self) -> bool:
        return self.guard not in ("", "@PT") or re.match(r"!?U?P\d\s*,", self.args) is not None


@dataclass
class Block:
    label: str
    insts: list[Inst] = field(default_factory=list)
    succs: list[int] = field(default_factory=list)


@dataclass
class Function:
    name: str
    blocks: list[Block]
    labels: dict[str, int]  # label -> index of the block it starts


def store_bits(inst: Inst) -> int:
    """Bits one store instruction writes per thread (STG.E.128 -> 128, STG.E.U16 -> 16, STG.E -> 32)."""
    for part in inst.op.split(".")[1:]:
        digits = re.sub(r"^[US]", "", part)
        if digits in ("8", "16", "32", "64", "128", "256"):
            return int(digits)
    return 32


def is_fp64(inst: Inst) -> bool:
    """DADD/DMUL/DFMA/DSETP/DMNMX..., conversions from or to .F64, MUFU.*64H."""
    base, mods = inst.base, inst.op.split(".")[1:]
    if base.startswith("D") and base != "DEPBAR":
        return True
    return (base in _CONVERSIONS or base == "FRND") and "F64" in mods or base == "MUFU" and "64" in inst.op


def is_conversion(inst: Inst) -> bool:
    """F2F, I2F, F2I, I2I, F2FP, I2FP, F2IP."""
    return inst.base in _CONVERSIONS


def is_table_load(inst: Inst) -> bool:
    """A load of table data: LDG, a generic LD, or an LDC indexed by a register (``c[0x3][R2]``);
    not ULDC nor an LDC of a fixed kernel-parameter slot (the fill kernels read nothing else
    from memory in their loops: outputs are written only)."""
    if inst.base in ("LDG", "LD"):
        return True
    return inst.base == "LDC" and re.search(r"c\[0x[0-9a-f]+\]\s*\[\s*U?R\d", inst.args) is not None


def is_shared(inst: Inst) -> bool:
    """A shared-memory access or a barrier: LDS, LDSM, STS, STSM, BAR (a layout conversion)."""
    return inst.base in ("LDS", "LDSM", "STS", "STSM", "BAR")


def parse(text: str) -> dict[str, Function]:
    """Functions of an nvdisasm listing, keyed by symbol (mangled for nvcc, plain for Triton)."""
    items: dict[str, list] = {}
    current = None
    for line in text.splitlines():
        section = _SECTION.match(line)
        if section:
            current = items.setdefault(section.group(1), [])
            continue
        if current is None:
            continue
        inst = _INST.match(line)
        if inst:
            body = inst.group(2).strip().rstrip(";").strip()
            guard = _GUARD.match(body)
            if guard:
                body = body[guard.end() :]
            op, _, args = body.partition(" ")
            current.append(Inst(int(inst.group(1), 16), guard.group(1) if guard else "", op, args.strip()))
            continue
        label = _LABEL.match(line.strip())
        if label:
            current.append(label.group(1))
    return {name: _blocks(name, seq) for name, seq in items.items()}


def _blocks(name: str, seq: list) -> Function:
    blocks: list[Block] = []
    labels: dict[str, int] = {}
    pending: list[str] = []
    open_block: Block | None = None
    for item in seq:
        if isinstance(item, str):
            pending.append(item)
            open_block = None
            continue
        if open_block is None:
            open_block = Block(pending[0] if pending else f"@{item.offset:x}")
            for label in pending:
                labels[label] = len(blocks)
            pending = []
            blocks.append(open_block)
        open_block.insts.append(item)
        if item.base in _ENDS or item.local_call or item.base == "EXIT" and not item.conditional:
            open_block = None
    for label in pending:  # labels after the last instruction (the .size end label)
        labels[label] = len(blocks)
    for i, block in enumerate(blocks):
        last = block.insts[-1]
        falls = i + 1 < len(blocks)
        if last.base == "BRA" or last.local_call:
            target = labels.get(last.target or "")
            block.succs = ([target] if target is not None and target < len(blocks) else []) + (
                [i + 1] if last.conditional and falls else []
            )
        elif last.base in ("BRX", "JMX"):  # indirect: nvdisasm lists the jump table's targets
            listed = re.search(r"BRANCH_TARGETS\s+([^\"*]+)", last.args)
            names = [t.strip() for t in listed.group(1).split(",")] if listed else []
            block.succs = [labels[t] for t in names if labels.get(t, len(blocks)) < len(blocks)] + (
                [i + 1] if last.conditional and falls else []
            )
        elif last.base in ("EXIT", "RET", "JMP"):
            block.succs = [i + 1] if last.conditional and falls else []
        elif falls:
            block.succs = [i + 1]
    return Function(name, blocks, labels)


def _walk(fn: Function, entry: int) -> tuple[list[int], set[tuple[int, int]]]:
    """(blocks reachable from entry in reverse post-order, retreating edges)."""
    state: dict[int, int] = {}  # 1 on the stack, 2 done
    order: list[int] = []
    back: set[tuple[int, int]] = set()
    stack = [(entry, iter(fn.blocks[entry].succs))]
    state[entry] = 1
    while stack:
        node, succs = stack[-1]
        for nxt in succs:
            if state.get(nxt) == 1:
                back.add((node, nxt))
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(fn.blocks[nxt].succs)))
                break
        else:
            stack.pop()
            state[node] = 2
            order.append(node)
    return order[::-1], back


def _preds(fn: Function, nodes) -> dict[int, list[int]]:
    preds: dict[int, list[int]] = {n: [] for n in nodes}
    for n in nodes:
        for s in fn.blocks[n].succs:
            if s in preds:
                preds[s].append(n)
    return preds


def loops(fn: Function, entry: int = 0) -> dict[int, set[int]]:
    """Natural loops reachable from entry: header -> its blocks."""
    order, back = _walk(fn, entry)
    preds = _preds(fn, order)
    found: dict[int, set[int]] = {}
    for latch, header in back:
        body = found.setdefault(header, {header})
        work = [latch]
        while work:
            node = work.pop()
            if node not in body:
                body.add(node)
                work.extend(preds[node])
    return found


@dataclass
class Path:
    """One fast path: its blocks, its instructions (callees' fast paths spliced in), and the loop it is in."""

    blocks: list[int]
    insts: list[Inst]
    header: int | None  # loop header, None for a straight-line kernel
    region: set[int]  # the loop's blocks (every reachable block without a loop)
    nested: bool = False  # the region holds a loop without a store (counted as one trip)

    def stores(self) -> list[Inst]:
        return [i for i in self.insts if i.base in STORES]

    def stored_bits(self) -> int:
        """Bits one trip of the path writes per thread (predicated stores count)."""
        return sum(map(store_bits, self.stores()))

    def histogram(self) -> Counter:
        return Counter(i.base for i in self.insts)


class Analyzer:
    """Hot-path queries on one function."""

    def __init__(self, fn: Function):
        self.fn = fn
        self._callee: dict[str, tuple[int, list[Inst]]] = {}

    def callee_path(self, label: str, depth: int = 0) -> tuple[int, list[Inst]]:
        """Instruction count and instructions of a subroutine's shortest entry -> RET path."""
        if label not in self._callee:
            start = self.fn.labels.get(label)
            self._callee[label] = (0, [])
            if start is not None and depth < 8:
                order, back = _walk(self.fn, start)
                sinks = {b for b in order if not self.fn.blocks[b].succs}
                found = self._shortest(order, back, start, sinks, [], depth + 1)
                if found:
                    self._callee[label] = (found[0][-1], self._expand(found[1], depth + 1))
        return self._callee[label]

    def weight(self, block: int, depth: int = 0, widest: int | None = None, kind: str = "interior") -> tuple:
        """The cost a path adds through one block, compared as a tuple (smaller is preferred).

        Args:
            block: index of the block in the function.
            depth: subroutine nesting (callees deeper than 8 cost nothing).
            widest: bits of the widest store of the region; None: stores are not told apart by width.
            kind: "interior" (stores narrower than widest first) or "edge" (stores of the widest first).

        Returns:
            (stores to avoid, -bits stored, instructions), its callees' fast paths included;
            the first term is 0 when widest is None.
        """
        insts = self.fn.blocks[block].insts
        widths = [store_bits(i) for i in insts if i.base in STORES]
        if widest is None:
            avoid = 0
        elif kind == "edge":
            avoid = sum(w >= widest for w in widths)
        else:
            avoid = sum(w < widest for w in widths)
        return (
            avoid,
            -sum(widths),
            len(insts) + sum(self.callee_path(i.subroutine, depth)[0] for i in insts if i.subroutine),
        )

    def _expand(self, blocks: list[int], depth: int = 0) -> list[Inst]:
        out: list[Inst] = []
        for b in blocks:
            for inst in self.fn.blocks[b].insts:
                out.append(inst)
                if inst.subroutine:
                    out.extend(self.callee_path(inst.subroutine, depth)[1])
        return out

    def _shortest(self, order, back, source, sinks, waypoints, depth=0, widest=None, kind="interior"):
        """Path source -> waypoints (in topological order) -> any sink with back edges removed of the least
        weight() (widest, kind: as there): ((avoided stores, -bits, instructions), blocks)."""
        allowed = set(order)
        rank = {n: k for k, n in enumerate(order)}
        stops = [source, *sorted(waypoints, key=rank.__getitem__)]
        cost, path = self.weight(source, depth, widest, kind), [source]
        for k, start in enumerate(stops):
            targets = {stops[k + 1]} if k + 1 < len(stops) else set(sinks)
            dist, prev = {start: (0, 0, 0)}, {}
            for node in order[rank[start] :]:
                if node not in dist:
                    continue
                for nxt in self.fn.blocks[node].succs:
                    if nxt in allowed and (node, nxt) not in back:
                        w = self.weight(nxt, depth, widest, kind)
                        d = tuple(a + b for a, b in zip(dist[node], w, strict=True))
                        if nxt not in dist or d < dist[nxt]:
                            dist[nxt], prev[nxt] = d, node
            reached = [t for t in targets if t in dist]
            if not reached:
                return None
            end = min(reached, key=lambda t: (dist[t], rank[t]))
            segment = [end]
            while segment[-1] != start:
                segment.append(prev[segment[-1]])
            cost = tuple(a + b for a, b in zip(cost, dist[end], strict=True))
            path += segment[::-1][1:]
        return cost, path

    def store_blocks(self, region) -> dict[int, int]:
        """Blocks of region holding a global store -> their widest store (bits)."""
        found = {}
        for b in region:
            widths = [store_bits(i) for i in self.fn.blocks[b].insts if i.base in STORES]
            if widths:
                found[b] = max(widths)
        return found

    def hot_loops(self) -> list[tuple[int, set[int]]]:
        """Innermost loops holding a global store: (header, blocks), the widest store first, then
        the fewest narrower stores (an interior loop with only its vector store before the loop
        of the tensor's edge units, which also holds their scalar stores), then the most store
        bits in the body (an unrolled main loop before its remainder loop)."""
        with_stores = [(h, body) for h, body in loops(self.fn).items() if self.store_blocks(body)]
        inner = [(h, body) for h, body in with_stores if not any(other < body for _, other in with_stores)]

        def key(item):
            bits = self.store_widths(item[1])
            return -max(bits), sum(b < max(bits) for b in bits), -sum(bits), item[0]

        return sorted(inner, key=key)

    def store_widths(self, body) -> list[int]:
        """The width (bits) of every global store in the blocks of body."""
        return [store_bits(i) for b in body for i in self.fn.blocks[b].insts if i.base in STORES]

    def shifted_loops(self) -> list[int]:
        """Headers of the loops that realign units straddling vector boundaries: more stores of
        the widest width in one iteration than the hot loop has, next to narrower ones (a run's
        first and last elements), in a kernel whose hot loop has only the widest."""
        loops = self.hot_loops()
        if not loops:
            return []
        hot = self.store_widths(loops[0][1])
        widest = max(hot)
        if any(b < widest for b in hot):
            return []
        return [
            h
            for h, body in loops[1:]
            if (w := self.store_widths(body)).count(widest) > hot.count(widest)
            and max(w) == widest
            and any(b < widest for b in w)
        ]

    def fast_path(self, header: int | None = None, through: int | None = None, kind: str = "interior") -> Path | None:
        """The fast path of the loop at header (None: of the whole function, entry to EXIT).

        Args:
            header: the loop's header block; None for the entry-to-EXIT path.
            through: a block the path must also visit (to enumerate the per-mode paths
                of a kernel whose mode is a run-time branch).
            kind: "interior", through a widest store with the fewest narrower ones (the
                aligned path), or "edge", through a narrower store with the fewest widest
                ones (the element-by-element stores); the module docstring states both rules.

        Returns:
            The path, or None when the region has no store of that kind.
        """
        order, back = _walk(self.fn, 0 if header is None else header)
        if header is None:
            region = set(order)
            sinks = {b for b in order if not self.fn.blocks[b].succs}
        else:
            region = loops(self.fn)[header]
            order = [b for b in order if b in region]
            sinks = {u for u, v in back if v == header and u in region}
        widest = max(self.store_widths(region), default=None)
        if widest is None:
            return None
        if kind == "edge":
            ways_of = [b for b in region if any(w < widest for w in self.store_widths([b]))]
        else:
            ways_of = [b for b, w in self.store_blocks(region).items() if w == widest]
        best = None
        for block in ways_of:
            ways = [block] + ([through] if through is not None and through != block else [])
            if header in ways:
                ways.remove(header)
            found = self._shortest(order, back, order[0], sinks, ways, 0, widest, kind)
            if found and (best is None or found[0] < best[0]):
                best = found
        if best is None:
            return None
        nested = any(v != header and v in region for _, v in back)
        return Path(best[1], self._expand(best[1]), header, region, nested)

    def _dag(self) -> tuple[list[int], set[tuple[int, int]]]:
        """(blocks reachable from the entry in reverse post-order, retreating edges), cached."""
        if not hasattr(self, "_dag_cache"):
            self._dag_cache = _walk(self.fn, 0)
        return self._dag_cache

    def dag_insts(self, sources, targets=None) -> int | None:
        """Fewest instructions on a path from a block of sources to a block of targets (both ends
        counted, callees' fast paths included) with the retreating edges of the entry's walk removed:
        every loop on the way is passed in zero trips. targets None: to an EXIT, predicated or not
        (counted up to it). None when no such path exists."""
        order, back = self._dag()
        rank = {n: k for k, n in enumerate(order)}
        starts = [b for b in sources if b in rank]
        if not starts:
            return None
        dist = {b: self.weight(b)[-1] for b in starts}
        ends = []
        for node in order[min(rank[b] for b in starts) :]:
            if node not in dist:
                continue
            insts = self.fn.blocks[node].insts
            if targets is None:
                at = next((k for k, i in enumerate(insts) if i.base == "EXIT"), None)
                if at is not None:
                    ends.append(dist[node] - len(insts) + at + 1)
            elif node in targets:
                ends.append(dist[node])
            for nxt in self.fn.blocks[node].succs:
                if nxt in rank and (node, nxt) not in back:
                    d = dist[node] + self.weight(nxt)[-1]
                    if d < dist.get(nxt, d + 1):
                        dist[nxt] = d
        return min(ends) if ends else None

    def reaches(self, source: int, target: int) -> bool:
        """Whether target is reachable from source without a retreating edge (source before target)."""
        return source == target or self.dag_insts([source], [target]) is not None

    def prologue(self, header: int | None) -> int:
        """Instructions from the entry to a loop's header, the header excluded (the fewest, every
        loop on the way passed in zero trips); 0 without a loop."""
        if header is None or header == 0:
            return 0
        found = self.dag_insts([0], [header])
        return 0 if found is None else found - self.weight(header)[-1]

    def epilogue(self, path: Path) -> int:
        """Instructions from leaving the loop of path to an EXIT (the fewest), from a successor
        outside the loop of a block of the path (the header's own instructions count again when
        the loop is left from it: a top-tested loop); 0 without a loop, or when it is left by a
        predicated EXIT inside (that is the last trip's)."""
        return self._leave(path) or 0

    def _leave(self, path: Path, targets=None) -> int | None:
        """Fewest instructions from leaving the loop of path to a block of targets (both counted;
        None: to an EXIT, as ``epilogue`` counts), every other loop in zero trips; None when the
        loop has no exit that reaches one."""
        if path.header is None:
            return None
        best = None
        for k, u in enumerate(path.blocks):
            # Left where the trip still has work after u (a loop tested at its top): the blocks up
            # to u run once more. Left at the trip's end (the latch, or a predicated CALL before
            # a latch that is only its BRA): that was the last trip.
            rest = (i.base != "BRA" for b in path.blocks[k + 1 :] for i in self.fn.blocks[b].insts)
            prefix = sum(self.weight(b)[-1] for b in path.blocks[: k + 1]) if any(rest) else 0
            for v in self.fn.blocks[u].succs:
                if v in path.region:
                    continue
                rest = self.dag_insts([v], targets)
                if rest is not None and (best is None or prefix + rest < best):
                    best = prefix + rest
        return best

    def enclosing(self, header: int) -> int | None:
        """Header of the innermost loop that holds the loop at header (a grouped kernel's walk over
        the entries of its table), or None."""
        every = loops(self.fn)
        inner = every.get(header, {header})
        around = [h for h, body in every.items() if h != header and inner < body]
        return min(around, key=lambda h: len(every[h]), default=None)

    def crossing(self, path: Path) -> int | None:
        """Instructions from leaving the loop of path back to its header through one trip of the
        loop around it (``enclosing``): for a grouped kernel, from the end of one entry's part to
        the loop of the next entry of the same mode (the walk's tests, the entry and record loads,
        the mode switch, the loop's set-up). The loop's exit is counted as ``epilogue`` counts it,
        then to a latch of the enclosing loop, then from its header to path's header (excluded),
        every other loop in zero trips. None without an enclosing loop or such a path."""
        outer = None if path.header is None else self.enclosing(path.header)
        if outer is None:
            return None
        _, back = self._dag()
        leave = self._leave(path, {u for u, v in back if v == outer})
        enter = self.dag_insts([outer], [path.header])
        if leave is None or enter is None:
            return None
        return leave + enter - self.weight(path.header)[-1]

    def cycle_insts(self, header: int) -> int:
        """Fewest instructions of one trip of the loop at header (header to a latch)."""
        order, back = _walk(self.fn, header)
        region = loops(self.fn)[header]
        order = [b for b in order if b in region]
        latches = {u for u, v in back if v == header and u in region}
        found = self._shortest(order, back, header, latches, [])
        return found[0][-1] if found else 0

    def search_loops(self, header: int) -> list[int]:
        """Headers of the innermost loops without a store that come before the loop at header (it is
        reachable from them without a retreating edge): a grouped kernel's search of its table."""
        every = loops(self.fn)
        return sorted(
            h
            for h, body in every.items()
            if h != header
            and not self.store_blocks(body)
            and not any(other < body for other in every.values())
            # not inside a loop of stores (a transform's own loop inside an edge loop)
            and not any(h in other for _, other in self.hot_loops())
            and self.reaches(h, header)
        )

    def _idom(self) -> tuple[dict[int, int], dict[int, int]]:
        """(immediate dominator, reverse post-order rank) of every block reachable from the entry,
        by the iteration of Cooper, Harvey and Kennedy ("A Simple, Fast Dominance Algorithm")."""
        if not hasattr(self, "_idom_cache"):
            order, _ = self._dag()
            rank = {n: k for k, n in enumerate(order)}
            preds = _preds(self.fn, order)
            idom = {order[0]: order[0]}

            def meet(a, b):
                while a != b:
                    while rank[a] > rank[b]:
                        a = idom[a]
                    while rank[b] > rank[a]:
                        b = idom[b]
                return a

            changed = True
            while changed:
                changed = False
                for b in order[1:]:
                    done = [p for p in preds[b] if p in idom]
                    if not done:
                        continue
                    new = done[0]
                    for p in done[1:]:
                        new = meet(p, new)
                    if idom.get(b) != new:
                        idom[b], changed = new, True
            self._idom_cache = (idom, rank, meet)
        return self._idom_cache[:2]

    def _dom_depth(self, block: int) -> int:
        idom, _ = self._idom()
        depth = 0
        while idom.get(block, block) != block:
            block, depth = idom[block], depth + 1
        return depth

    def owner(self, header: int, heads: list[int]) -> int | None:
        """Which of heads (the hot loops of a kernel, one per mode) the loop at header belongs to:
        the one with the deepest common dominator (the mode's branch of a run-time switch, or,
        with one head, that head); None when two tie or the loop is unreachable."""
        idom, _ = self._idom()
        meet = self._idom_cache[2]
        if header not in idom:
            return None
        depths = sorted(((self._dom_depth(meet(header, h)), h) for h in heads if h in idom), reverse=True)
        if not depths or len(depths) > 1 and depths[0][0] == depths[1][0]:
            return depths[0][1] if len(depths) == 1 else None
        return depths[0][1]

    def related(self, path: Path, heads: list[int] | None = None) -> dict:
        """The other loops of the code that path's loop belongs to (one mode of a kernel).

        Args:
            path: an interior fast path (``fast_path``).
            heads: the headers of every mode's hot loop in the function (a kernel whose mode is
                a run-time value); None: path's alone. A loop belongs to the head ``owner`` picks.

        Returns:
            dict with "edge": the costliest edge path (``kind="edge"``) of path's own region
            (a masked store block beside the vector one) or, when it has none, of the other
            loops of its mode that store element by element (a tensor's edge units), or None;
            "shifted": the fast paths of its mode's loops that realign misaligned units
            (``shifted_loops``); "search": [(header, instructions a trip)] of
            ``search_loops``; "prologue" and "epilogue": instruction counts (``prologue``,
            ``epilogue``); "entry": the instructions from the loop's exit back to its header
            through the loop around it (``crossing``), or None.
        """
        own = self.fast_path(path.header, kind="edge") if path.header is not None else self.fast_path(kind="edge")
        edge = own if own is not None and own.stores() else None
        shifted = []
        if path.header is not None:
            heads = heads or [path.header]
            shifted_heads = set(self.shifted_loops())
            others = []
            for h, _ in self.hot_loops():
                if h in heads or self.owner(h, heads) != path.header:
                    continue
                found = self.fast_path(h) if h in shifted_heads else self.fast_path(h, kind="edge")
                if found is not None:
                    (shifted if h in shifted_heads else others).append(found)
            if edge is None and others:
                edge = max(others, key=lambda q: len(q.insts) / max(1, q.stored_bits()))
        return {
            "edge": edge,
            "shifted": shifted,
            "search": [(h, self.cycle_insts(h)) for h in self.search_loops(path.header)]
            if path.header is not None
            else [],
            "prologue": self.prologue(path.header),
            "epilogue": self.epilogue(path),
            "entry": self.crossing(path),
        }

    def slow_insts(self, path: Path, others: set[int] = frozenset()) -> int:
        """Static instructions of the region's blocks off the path, and of their callees.

        others: the blocks of the other modes' fast paths (a kernel whose mode is a
        run-time branch); then only blocks reachable from the path's first block
        not in others count, and none of others.
        """
        side = path.region - set(path.blocks) - set(others)
        own = [b for b in path.blocks if b not in others]
        if others and own:
            side &= set(_walk(self.fn, own[0])[0])
        total = sum(len(self.fn.blocks[b].insts) for b in side)
        callees = {i.subroutine for b in side for i in self.fn.blocks[b].insts if i.subroutine}
        for label in callees:
            start = self.fn.labels.get(label)
            if start is not None:
                total += sum(len(self.fn.blocks[b].insts) for b in _walk(self.fn, start)[0])
        return total


def distance(a: Counter, b: Counter) -> float:
    """L1 distance of two opcode histograms relative to the size of b (0 = same mix and count)."""
    keys = set(a) | set(b)
    return sum(abs(a[k] - b[k]) for k in keys) / max(1, sum(b.values()))


def match(paths: list[Path], refs: dict) -> list[tuple]:
    """Greedy one-to-one (path, mode, distance) by opcode-histogram distance to the reference modes."""
    pairs = sorted((distance(p.histogram(), h), i, m) for i, p in enumerate(paths) for m, h in refs.items())
    done, used, out = set(), set(), []
    for d, i, m in pairs:
        if i not in done and m not in used:
            done.add(i)
            used.add(m)
            out.append((paths[i], m, d))
    return sorted(out, key=lambda c: c[1])


def paths_of(an: Analyzer, per_mode: bool) -> list[Path]:
    """Fast paths of a function: its widest-store loops (every one when per_mode, else the first);
    without a loop, the entry-to-EXIT path, or (per_mode) the path through each block in turn."""
    loops = an.hot_loops()
    if loops:
        # The interior loops: the widest store and, like the hottest loop, as few narrower ones
        # (not the edge-unit loops, nor the shifted-run loops of misaligned tensors).
        def profile(body):
            w = an.store_widths(body)
            return max(w), sum(b < max(w) for b in w)

        heads = [h for h, body in loops if profile(body) == profile(loops[0][1])]
        paths = [an.fast_path(h) for h in (heads if per_mode else heads[:1])]
    else:
        first = an.fast_path()
        paths = [first] + ([an.fast_path(through=b) for b in sorted(first.region)] if per_mode and first else [])
    seen, out = set(), []
    for p in paths:
        if p is not None and tuple(p.blocks) not in seen:
            seen.add(tuple(p.blocks))
            out.append(p)
    return out


def metrics(an: Analyzer, path: Path, elems: float, others=frozenset()) -> dict:
    """The per-element columns of one fast path.

    Args:
        an: the function's Analyzer.
        path: its fast path (``fast_path``).
        elems: elements one trip of path stores per thread.
        others: blocks of the other modes' fast paths (``slow_insts``).

    Returns:
        dict of counts per element (sass, slow, fp64, mufu, cvt, table_loads, shared), the
        widest store, the bits stored and the opcode histogram of the path.
    """
    stores = path.stores()
    widest = max(stores, key=store_bits)
    return {
        "fast_insts": len(path.insts),
        "elems": elems,
        "sass_per_elem": len(path.insts) / elems,
        "slow_per_elem": an.slow_insts(path, others) / elems,
        "fp64_per_elem": sum(map(is_fp64, path.insts)) / elems,
        "mufu_per_elem": sum(i.base == "MUFU" for i in path.insts) / elems,
        "cvt_per_elem": sum(map(is_conversion, path.insts)) / elems,
        "table_loads_per_elem": sum(map(is_table_load, path.insts)) / elems,
        "shared_per_elem": sum(map(is_shared, path.insts)) / elems,
        "local_ops_fast": sum(i.base in ("LDL", "STL") for i in path.insts),
        "store": widest.op,
        "store_bits": store_bits(widest),
        "stored_bits": sum(map(store_bits, stores)),
        "nested_loop": path.nested,
        "histogram": dict(path.histogram().most_common()),
    }
