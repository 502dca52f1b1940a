"""Seeded tasks of a family: the declaration's templates drawn into one task's plain data.

A task is built in phases, each reading what the phases before it wrote (a phase is a
function here): the task's variables, the layers' sizes, the nodes and their parents, each
node's variables, its trap, its result (and its trap's), then the calls that make it (args
resolved against the parents' results), the unreachable node and the goal. Every draw comes
from one stream named by the task (seed, family, complexity, index), in that order, so a task
is the same whatever the tasks generated with it. A draw in which two nodes make the same call
(the world could not tell their results apart) is drawn again from a stream named also by the
attempt.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from planarena.envs.base import COMPLEXITIES, Task, task_id
from planarena.envs.family.schema import FamilyDecl, LayerDecl
from planarena.envs.family.templates import (
    RefSpec,
    TemplateError,
    expand,
    fmt,
    literal,
    slugify,
)
from planarena.envs.rng import derive_rng

Node = dict[str, Any]


def generate(
    decl: FamilyDecl,
    n: int,
    *,
    seed: int,
    complexity: str,
    unreachable_rate: float = 0.0,
    start: int = 0,
) -> list[Task]:
    """``n`` seeded tasks of the family at one complexity (plain data in ``Task.world``), from
    task number ``start`` on."""
    if complexity not in COMPLEXITIES:
        raise ValueError(f"complexity must be one of {COMPLEXITIES}, got {complexity!r}")
    return [
        _one_task(decl, seed, complexity, index, unreachable_rate)
        for index in range(start, start + n)
    ]


@dataclass
class _Draft:
    """A task being built: the phases add to its nodes in place."""

    decl: FamilyDecl
    rng: random.Random
    tvars: dict[str, Any]
    nodes: list[Node] = field(default_factory=list)
    by_layer: list[list[int]] = field(default_factory=list)
    by_key: dict[str, Node] = field(default_factory=dict)

    @property
    def last(self) -> int:
        return len(self.by_layer) - 1

    def ctx(self, nd: Mapping[str, Any]) -> dict[str, Any]:
        return _node_ctx(self.tvars, nd, self.by_key)


MAX_DRAWS = 20
"""Draws of one task before its calls are declared ambiguous (:func:`_ambiguous_call`)."""


def _one_task(
    decl: FamilyDecl, seed: int, complexity: str, index: int, unreachable_rate: float
) -> Task:
    for draw in range(MAX_DRAWS):
        # the first draw's stream is the task's own, so a task drawn right the first time is
        # the same as before the redraw existed
        extra = (draw,) if draw else ()
        rng = derive_rng(seed, "task", decl.name, complexity, index, *extra)
        tvars: dict[str, Any] = {}
        for k, spec in decl.vars.items():
            tvars[k] = expand(spec, tvars, rng, f"vars.{k}")
        d = _Draft(decl, rng, tvars)
        _add_nodes(d, _layers(decl, complexity, rng))
        _add_vars(d)
        _add_traps(d)
        _add_results(d)
        _add_calls(d)
        clash = _ambiguous_call(d)
        if clash is None:
            break
    else:
        raise TemplateError(
            f"templates: {MAX_DRAWS} draws of {task_id(decl.name, complexity, index)} each gave "
            f"two nodes the same call ({clash}), so the world cannot tell their results apart "
            "(draw the variable that tells them apart from a wider range)"
        )
    missing = None
    if decl.unreachable is not None:  # one node of the declared layer does not exist
        u = derive_rng(seed, "unreachable", decl.name, complexity, index)
        if u.random() < unreachable_rate:
            layer = d.by_layer[0 if decl.unreachable.where == "first" else d.last]
            missing = f"n{layer[u.randrange(len(layer))]}"
    sinks = [f"n{i}" for i in d.by_layer[d.last]]
    _check_sinks(d, sinks)
    goal = _goal(d, sinks)
    for nd in d.nodes:
        if nd["trap"] is not None:
            nd["trap"].pop("ctx", None)
    return Task(
        task_id=task_id(decl.name, complexity, index),
        env=decl.name,
        complexity=complexity,
        goal=str(goal),
        world={"nodes": d.nodes, "sinks": sinks, "missing": missing, "vars": tvars},
        unreachable=missing is not None,
    )


def _draw(value: int | tuple[int, int], rng: random.Random) -> int:
    if isinstance(value, tuple):
        return rng.randint(value[0], value[1])
    return value


def _layers(
    decl: FamilyDecl, complexity: str, rng: random.Random
) -> list[tuple[str, LayerDecl, int]]:
    """(template, layer declaration, width) of every layer, repeats drawn and unrolled."""
    default = next(iter(decl.templates))
    layers: list[tuple[str, LayerDecl, int]] = []
    for layer in decl.sizes[complexity].layers:  # type: ignore[index]
        for _ in range(_draw(layer.repeat, rng)):
            if layer.width == "prev":
                width = layers[-1][2] if layers else 1
            else:
                width = _draw(layer.width, rng)
            layers.append((layer.node or default, layer, width))
    return layers


class _Names:
    """Node names drawn without repeats from each template's pool (or the family's), shuffled
    on first use; a pool used up starts again with a number (``Cache 2``)."""

    def __init__(self, decl: FamilyDecl, rng: random.Random) -> None:
        self.decl = decl
        self.rng = rng
        self.pools: dict[str, list[str]] = {}
        self.used: dict[str, int] = {}

    def next(self, tname: str) -> str:
        own = self.decl.templates[tname].names
        source = own or self.decl.names
        pid = tname if own else ""
        if pid not in self.pools:
            self.pools[pid] = list(source)
            self.rng.shuffle(self.pools[pid])
        k = self.used.get(pid, 0)
        self.used[pid] = k + 1
        pool = self.pools[pid]
        return pool[k % len(pool)] + (f" {k // len(pool) + 1}" if k >= len(pool) else "")


def _parents(
    layer: LayerDecl, prev: list[int], pos: int, width: int, rng: random.Random
) -> list[int]:
    """The node at ``pos`` of a layer ``width`` wide: its parents in the layer before."""
    if layer.link == "all":
        return list(prev)
    if layer.link == "aligned":
        return [prev[min(pos, len(prev) - 1)]]
    if layer.link == "split":
        return [prev[pos * len(prev) // width]]
    if layer.link == "merge":
        r = max(1, len(prev) // width)
        return prev[pos * r : (pos + 1) * r if pos < width - 1 else len(prev)]
    k = min(len(prev), rng.randint(*layer.fan_in))
    return sorted(rng.sample(prev, k))


def _add_nodes(d: _Draft, layers: list[tuple[str, LayerDecl, int]]) -> None:
    names = _Names(d.decl, d.rng)
    for li, (tname, layer, width) in enumerate(layers):
        ids = []
        for pos in range(width):
            i = len(d.nodes)
            parents = _parents(layer, d.by_layer[li - 1], pos, width, d.rng) if li > 0 else []
            d.nodes.append(
                {
                    "key": f"n{i}",
                    "template": tname,
                    "layer": li,
                    "pos": pos,
                    "name": (name := names.next(tname)),
                    "slug": slugify(name),
                    "parents": [f"n{p}" for p in parents],
                }
            )
            ids.append(i)
        d.by_layer.append(ids)
    d.by_key = {nd["key"]: nd for nd in d.nodes}


def _add_vars(d: _Draft) -> None:
    """Each node's name (when its template makes one) and variables, parents first (layers
    are in order), so a child's template can read them."""
    for nd in d.nodes:
        tpl = d.decl.templates[nd["template"]]
        if tpl.name is not None:
            nd["name"] = str(fmt(tpl.name, d.ctx(nd), f"templates.{nd['template']}.name"))
            nd["slug"] = slugify(nd["name"])
        ctx = d.ctx(nd)
        nd["vars"] = {}
        for k, spec in tpl.vars.items():
            nd["vars"][k] = expand(spec, ctx, d.rng, f"templates.{nd['template']}.vars.{k}")
            ctx[k] = nd["vars"][k]


def _where_ok(where: str, layer: int, last: int) -> bool:
    return {
        "any": True,
        "first": layer == 0,
        "last": layer == last,
        "middle": 0 < layer < last,
        "not_first": layer > 0,
        "not_last": layer < last,
    }[where]


def _add_traps(d: _Draft) -> None:
    """At most one trap a node: the first of its template's traps that applies where the
    node is and wins its draw."""
    for nd in d.nodes:
        tpl = d.decl.templates[nd["template"]]
        nd["trap"] = None
        for ti, trap in enumerate(tpl.traps):
            if not _where_ok(trap.where, nd["layer"], d.last) or d.rng.random() >= trap.p:
                continue
            where = f"templates.{nd['template']}.traps[{ti}]"
            ctx = d.ctx(nd)
            label = fmt(d.rng.choice(trap.names), ctx, f"{where}.names")
            tctx = {**ctx, "name": label, "slug": slugify(label), "node": dict(ctx)}
            tv: dict[str, Any] = {}
            for k, spec in trap.vars.items():
                tv[k] = expand(spec, tctx, d.rng, f"{where}.vars.{k}")
                tctx[k] = tv[k]
            nd["trap"] = {"index": ti, "kind": trap.kind, "name": label, "vars": tv}
            break


def _add_results(d: _Draft) -> None:
    """Each node's result and its trap's. A result may list links to the node's children
    (and to its first-parent children's traps) and to distractor names."""
    children: dict[str, list[dict[str, Any]]] = {nd["key"]: [] for nd in d.nodes}
    for nd in d.nodes:
        ctx = d.ctx(nd)
        for p in nd["parents"][:1]:
            children[p].append(ctx)
            if nd["trap"] is not None:
                children[p].append({**ctx, "name": nd["trap"]["name"], **nd["trap"]["vars"]})
    taken = {nd["name"] for nd in d.nodes}
    distractor_pool = [
        n
        for pool in [d.decl.names, *(t.names or [] for t in d.decl.templates.values())]
        for n in pool
        if n not in taken
    ]
    for nd in d.nodes:
        tpl = d.decl.templates[nd["template"]]
        ctx = d.ctx(nd)
        ctx["_children"] = children[nd["key"]]
        d.rng.shuffle(distractor_pool)  # in place: each node reshuffles the last order
        ctx["_distractors"] = list(distractor_pool)
        ctx["_base"] = str(d.tvars.get("base", ""))
        nd["result"] = expand(tpl.result, ctx, d.rng, f"templates.{nd['template']}.result")
        if nd["trap"] is not None:
            _add_trap_result(d, nd, ctx)


def _add_trap_result(d: _Draft, nd: Node, ctx: dict[str, Any]) -> None:
    tpl = d.decl.templates[nd["template"]]
    trap = tpl.traps[nd["trap"]["index"]]
    twhere = f"templates.{nd['template']}.traps[{nd['trap']['index']}]"
    tctx = {**ctx, "name": nd["trap"]["name"], "slug": slugify(nd["trap"]["name"])}
    tctx.update(nd["trap"]["vars"])
    tctx["node"] = {k: v for k, v in ctx.items() if not k.startswith("_")}
    tctx["_children"] = []
    base = trap.result if trap.result is not None else tpl.result
    res = expand(base, tctx if trap.result is not None else ctx, d.rng, f"{twhere}.result")
    for k, spec in trap.override.items():
        res[k] = expand(spec, tctx, d.rng, f"{twhere}.override.{k}")
    nd["trap"]["result"] = res
    nd["trap"]["ctx"] = {k: v for k, v in tctx.items() if not k.startswith("_")}


def _add_calls(d: _Draft) -> None:
    """The calls that make each node (its ways), its trap's call, and its calls on a decoy
    parent's output (which reveal the decoy), with args resolved against the parents'
    results."""
    for nd in d.nodes:
        tpl = d.decl.templates[nd["template"]]
        where = f"templates.{nd['template']}"
        ctx = d.ctx(nd)
        nd["ways"] = [
            {
                "tool": w.tool,
                "args": _resolve_args(d, w.args, ctx, nd, f"{where}.ways[{wi}].args", None),
            }
            for wi, w in enumerate(tpl.ways)
        ]
        trap = nd["trap"]
        if trap is not None:
            tdecl = tpl.traps[trap["index"]]
            twhere = f"{where}.traps[{trap['index']}]"
            spec = tdecl.args if tdecl.args is not None else tpl.ways[0].args
            trap["tool"] = tdecl.tool or tpl.ways[0].tool
            trap["args"] = _resolve_args(d, spec, trap["ctx"], nd, f"{twhere}.args", None)
        nd["on_decoy"] = []
        for p in nd["parents"]:
            ptrap = d.by_key[p]["trap"]
            if ptrap is None or ptrap["kind"] != "decoy" or tpl.on_decoy is None:
                continue
            args = _resolve_args(d, tpl.ways[0].args, ctx, nd, f"{where}.ways[0].args", (p, ptrap))
            if args == nd["ways"][0]["args"]:
                continue  # the call does not read the parent's output
            res = expand(tpl.on_decoy, ctx, d.rng, f"{where}.on_decoy")
            nd["on_decoy"].append(
                {"parent": p, "tool": tpl.ways[0].tool, "args": args, "result": res}
            )


def _ambiguous_call(d: _Draft) -> str | None:
    """A call two nodes make alike (same tool, same literal args), or None. Two items drawn
    the same id (``sku-9474`` twice) would make one ``get_stock`` call answer for both, and
    no agent could solve the task."""
    owner: dict[tuple[str, str], str] = {}
    for nd in d.nodes:
        for way in nd["ways"]:
            key = (way["tool"], json.dumps(literal(way["args"]), sort_keys=True, default=str))
            if owner.setdefault(key, nd["key"]) != nd["key"]:
                return f"{way['tool']}({key[1]}) for {owner[key]} and {nd['key']}"
    return None


def _check_sinks(d: _Draft, sinks: list[str]) -> None:
    """The last layer's results carry every fact the answer states."""
    for s in sinks:
        for f in [*d.decl.answer.facts, d.decl.answer.label]:
            if f not in d.by_key[s]["result"]:
                raise TemplateError(
                    f"answer.facts: expected {f!r} among the result fields of the last layer's "
                    f"template {d.by_key[s]['template']!r}"
                )


def _goal(d: _Draft, sinks: list[str]) -> Any:
    """The goal text: the family's goal template over the task's variables and its shape
    (``{dag}``, ``{items}``, ``{roots}``, ``{n}``, ``{path}``, ``{start.*}``, ``{target.*}``)."""
    by_key = d.by_key
    dag = "\n".join(
        f"- {nd['name']}"
        + (
            f" (after {', '.join(by_key[p]['name'] for p in nd['parents'])})"
            if nd["parents"]
            else ""
        )
        for nd in d.nodes
    )
    chain = [by_key[sinks[0]]]
    while chain[-1]["parents"]:
        chain.append(by_key[chain[-1]["parents"][0]])
    first = d.ctx(d.nodes[0])
    target = d.ctx(by_key[sinks[0]])
    gctx = {
        **d.tvars,
        "dag": dag,
        "items": ", ".join(by_key[s]["name"] for s in sinks),
        "roots": ", ".join(by_key[f"n{i}"]["name"] for i in d.by_layer[0]),
        "n": len(d.nodes),
        "path": " > ".join(nd["name"] for nd in reversed(chain[:-1])),
        "start": {k: v for k, v in first.items() if not k.startswith("_")},
        "target": {k: v for k, v in target.items() if not k.startswith("_")},
    }
    return fmt(d.decl.goal, gctx, "goal")


def _node_ctx(
    tvars: Mapping[str, Any], nd: Mapping[str, Any], by_key: Mapping[str, Any]
) -> dict[str, Any]:
    ctx: dict[str, Any] = {
        **tvars,
        "name": nd["name"],
        "slug": nd["slug"],
        "i": int(nd["key"][1:]),
        "layer": nd["layer"],
        "pos": nd["pos"],
        **nd.get("vars", {}),
    }
    if nd["parents"]:
        p = by_key[nd["parents"][0]]
        ctx["parent"] = {"name": p["name"], "slug": p["slug"], **p.get("vars", {})}
    return ctx


def _resolve_args(
    d: _Draft,
    spec: Mapping[str, Any],
    ctx: Mapping[str, Any],
    nd: Mapping[str, Any],
    where: str,
    decoy: tuple[str, dict[str, Any]] | None,
) -> dict[str, Any]:
    """Literal args; a ``{ref: parent, path}`` becomes ``{"$ref": key, "path", "value"}`` so
    the oracle can write a Ref and the world can index the literal value. With ``decoy``
    (a parent's key and its decoy trap) that parent's output is the decoy's."""
    out: dict[str, Any] = {}
    for k, v in spec.items():
        value = expand(v, ctx, d.rng, f"{where}.{k}")
        if not isinstance(value, RefSpec):
            out[k] = value
            continue
        m = re.fullmatch(r"parent(\d*)", value.target)
        if m is None:
            raise TemplateError(f"{where}.{k}.ref: expected parent or parent<k>")
        idx = int(m.group(1) or 0)
        if idx >= len(nd["parents"]):
            raise TemplateError(f"{where}.{k}.ref: the node has no {value.target}")
        pkey = nd["parents"][idx]
        path = tuple(str(fmt(p, ctx, f"{where}.{k}.path")) for p in value.path)
        source = d.by_key[pkey]["result"]
        if decoy is not None and decoy[0] == pkey:
            source = decoy[1]["result"]
        lit: Any = source
        for part in path:
            lit = lit.get(part) if isinstance(lit, dict) else None
        if lit is None:
            raise TemplateError(
                f"{where}.{k}.path: {list(path)} is not in the parent's result "
                f"(fields: {sorted(source) if isinstance(source, dict) else source!r})"
            )
        out[k] = {"$ref": pkey, "path": list(path), "value": lit}
    return out
