"""The timeline of an episode (simulated seconds): tool calls on lanes so parallel calls are
visible, LLM calls on their own lane, retries, fallbacks and (re)plans as markers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from planarena.experiments.analysis.trace_load import EpisodeTrace

CALL_OK = "#56B4E9"


CALL_FAILED = "#D55E00"


CALL_INJECTED_OK = "#E69F00"
"""Tool-call bar colours: ok, failed, and injected fault that still returned ok."""


ROLE_COLORS: dict[str, str] = {
    "planner": "#0072B2",
    "executor": "#999999",
    "evaluator": "#CC79A7",
    "replanner": "#882255",
    "rollout": "#DDCC77",
}
"""LLM-lane colours by role (unknown roles are grey)."""


EVENT_MARKERS: dict[str, tuple[str, str]] = {
    "retry": ("v", "#D55E00"),
    "fallback": ("D", "#CC79A7"),
    "plan_rejected": ("X", "#000000"),
    "replan_rejected": ("X", "#882255"),
}
"""Point events drawn on the timeline's event lane (marker, colour)."""


def assign_lanes(intervals: Sequence[tuple[float, float]]) -> list[int]:
    """Greedy interval partitioning: each interval takes the lowest lane free at its start.

    Sequential calls share lane 0; calls that overlap in simulated time land on separate
    lanes, so the number of lanes is the peak parallelism.
    """
    order = sorted(range(len(intervals)), key=lambda i: (intervals[i][0], intervals[i][1], i))
    lane_end: list[float] = []
    lanes = [0] * len(intervals)
    eps = 1e-9
    for i in order:
        t0, t1 = intervals[i]
        for lane, end in enumerate(lane_end):
            if end <= t0 + eps:
                lanes[i] = lane
                lane_end[lane] = t1
                break
        else:
            lanes[i] = len(lane_end)
            lane_end.append(t1)
    return lanes


_CHARS_PER_AXIS = 130
"""About how many 5-pt characters fit across the timeline axis of a 7-inch figure."""


def _fits(text: str, fraction: float) -> bool:
    """Whether ``text`` fits whole in a bar of ``fraction`` of the axis (a character spare)."""
    return len(text) + 1 <= int(fraction * _CHARS_PER_AXIS)


def bar_labels(calls: Sequence[dict[str, Any]], span: float) -> tuple[list[str], dict[str, str]]:
    """The label of each tool-call bar and the key of the short ones.

    A name that fits its bar is written whole; one that does not is replaced by a number
    (one per tool name, in order of first shortening) listed in the key (``{"1":
    "extract_entities"}``), so no name is ever cut; a bar too narrow even for the number
    stays unlabelled (the notes and the HTML list every call).
    """
    labels: list[str] = []
    keys: dict[str, str] = {}
    for call in calls:
        name = str(call.get("tool", ""))
        fraction = (float(call["t1"]) - float(call["t0"])) / span
        if _fits(name, fraction):
            labels.append(name)
            continue
        key = next((k for k, v in keys.items() if v == name), str(len(keys) + 1))
        if _fits(key, fraction):
            keys[key] = name
            labels.append(key)
        else:
            labels.append("")
    return labels, keys


MAX_NOTED_CALLS = 8
"""Failed tool calls listed by name and reason on the figure; more are counted."""


def episode_notes(trace: EpisodeTrace, keys: dict[str, str]) -> list[str]:
    """What the PNG must say in words: why each failed step failed, the failed tool calls
    with their error kind, the tools the LLM invented (``hallucinated_tool``: no time, so
    not on the timeline) and the key of shortened bar labels."""
    notes: list[str] = []
    failed_steps = [
        f"{e.get('id')} ({e.get('tool')}): {e.get('failure') or e.get('error_kind') or '?'}"
        + (f" [{e.get('error_kind')}]" if e.get("failure") and e.get("error_kind") else "")
        for e in trace.events
        if e.get("event") == "step" and not e.get("ok")
    ]
    if failed_steps:
        notes.append("failed steps: " + "; ".join(failed_steps))
    failed_calls = [(i, c) for i, c in enumerate(trace.tool_calls, start=1) if not c.get("ok")]
    if failed_calls:
        shown = [
            f"#{i} {c.get('tool')} at {float(c.get('t0') or 0.0):.1f} s: "
            f"{c.get('error_kind') or 'failed'}{' (injected)' if c.get('injected') else ''}"
            for i, c in failed_calls[:MAX_NOTED_CALLS]
        ]
        more = len(failed_calls) - len(shown)
        notes.append(
            "failed tool calls: "
            + "; ".join(shown)
            + (f"; and {more} more (HTML view)" if more > 0 else "")
        )
    invented: dict[str, int] = {}
    for e in trace.events:
        if e.get("event") == "hallucinated_tool":
            name = str(e.get("tool"))
            invented[name] = invented.get(name, 0) + 1
    if invented:
        notes.append(
            "invented tools (not in the env): "
            + ", ".join(f"{n}" + (f" x{k}" if k > 1 else "") for n, k in invented.items())
        )
    if keys:
        notes.append("bar keys: " + ", ".join(f"{k} = {v}" for k, v in keys.items()))
    return notes


def _call_style(call: dict[str, Any]) -> tuple[str, str]:
    ok = bool(call.get("ok"))
    injected = bool(call.get("injected"))
    if not ok:
        return CALL_FAILED, "xxxx" if injected else "////"
    return (CALL_INJECTED_OK, "xxxx") if injected else (CALL_OK, "")


def _draw_llm_calls(ax: Any, llm: list[dict[str, Any]], y: float) -> None:
    for e in llm:
        t0, t1 = float(e["t0"]), float(e["t1"])
        ax.barh(
            y,
            t1 - t0,
            left=t0,
            height=0.6,
            color=ROLE_COLORS.get(str(e.get("role")), "#BBBBBB"),
            edgecolor="none",
        )


def _draw_tool_calls(
    ax: Any,
    calls: list[dict[str, Any]],
    lanes: list[int],
    n_lanes: int,
    span: float,
    labels: list[str],
) -> None:
    for call, lane, label in zip(calls, lanes, labels, strict=True):
        t0, t1 = float(call["t0"]), float(call["t1"])
        color, hatch = _call_style(call)
        y = n_lanes - lane
        ax.barh(
            y,
            max(t1 - t0, span * 0.002),
            left=t0,
            height=0.6,
            color=color,
            hatch=hatch,
            edgecolor="black",
            linewidth=0.3,
        )
        if label:
            ax.text(
                (t0 + t1) / 2,
                y,
                label,
                ha="center",
                va="center",
                fontsize=5,
                clip_on=True,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 0.3},
            )


def _draw_events(ax: Any, events: list[dict[str, Any]], y: float) -> None:
    for e in events:
        kind = e.get("event")
        t = e.get("t")
        if not isinstance(t, int | float):
            continue
        if kind in ("plan", "replan"):
            ax.axvline(
                float(t),
                color="#0072B2" if kind == "plan" else "#882255",
                ls="--",
                lw=0.7,
                zorder=0,
            )
        elif kind in EVENT_MARKERS:
            marker, color = EVENT_MARKERS[kind]
            ax.plot([float(t)], [y], marker=marker, color=color, ls="", markersize=4)


def _timeline_legend(ax: Any, trace: EpisodeTrace, llm: list[dict[str, Any]]) -> None:
    handles: list[Any] = [
        Patch(facecolor=CALL_OK, edgecolor="black", linewidth=0.3, label="tool ok"),
        Patch(
            facecolor=CALL_FAILED,
            hatch="////",
            edgecolor="black",
            linewidth=0.3,
            label="tool failed",
        ),
        Patch(
            facecolor=CALL_FAILED,
            hatch="xxxx",
            edgecolor="black",
            linewidth=0.3,
            label="injected fault",
        ),
        Patch(
            facecolor=CALL_INJECTED_OK,
            hatch="xxxx",
            edgecolor="black",
            linewidth=0.3,
            label="injected, returned ok",
        ),
    ]
    roles = sorted({str(e.get("role")) for e in llm})
    handles += [Patch(facecolor=ROLE_COLORS.get(r, "#BBBBBB"), label=f"LLM {r}") for r in roles]
    present = {e.get("event") for e in trace.events if isinstance(e.get("t"), int | float)}
    handles += [
        Line2D([], [], marker=m, color=c, ls="", markersize=4, label=k.replace("_", " "))
        for k, (m, c) in EVENT_MARKERS.items()
        if k in present
    ]
    handles += [
        Line2D([], [], color=c, ls="--", lw=0.7, label=k)
        for k, c in (("plan", "#0072B2"), ("replan", "#882255"))
        if k in present
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=5.5)


def draw_timeline(ax: Any, trace: EpisodeTrace) -> dict[str, str]:
    """Draw the episode's timeline into ``ax``: rows from the top, the LLM lane, the tool
    lanes (:func:`assign_lanes`), the event lane; a legend of what is drawn. Returns the key
    of the bar labels shortened to numbers (:func:`bar_labels`)."""
    calls = [c for c in trace.tool_calls if c.get("t0") is not None and c.get("t1") is not None]
    llm = [e for e in trace.events if e.get("event") == "llm" and "t0" in e and "t1" in e]
    lanes = assign_lanes([(float(c["t0"]), float(c["t1"])) for c in calls])
    n_lanes = max(lanes, default=-1) + 1
    ends = [float(c["t1"]) for c in calls] + [float(e["t1"]) for e in llm]
    ends += [float(e["t"]) for e in trace.events if isinstance(e.get("t"), int | float)]
    span = max(ends, default=1.0) or 1.0
    # rows from the top: LLM lane, tool lanes, event lane
    llm_y = n_lanes + 1
    event_y = 0
    _draw_llm_calls(ax, llm, llm_y)
    labels, keys = bar_labels(calls, span)
    _draw_tool_calls(ax, calls, lanes, n_lanes, span, labels)
    _draw_events(ax, trace.events, event_y)
    ticks = [llm_y, *range(n_lanes, 0, -1), event_y]
    labels = ["LLM", *(f"tools {i + 1}" for i in range(n_lanes)), "events"]
    ax.set_yticks(ticks, labels)
    ax.set_ylim(event_y - 0.7, llm_y + 0.7)
    ax.set_xlim(0.0, span * 1.01)
    ax.set_xlabel("simulated seconds")
    ax.set_title("timeline (overlapping bars on separate lanes ran in parallel)", loc="left")
    _timeline_legend(ax, trace, llm)
    return keys
