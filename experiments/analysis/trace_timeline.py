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


def _fit_label(text: str, fraction: float) -> str:
    """The tool name shortened to fit a bar of ``fraction`` of the axis ('' if too narrow)."""
    room = int(fraction * _CHARS_PER_AXIS) - 1
    if room >= len(text):
        return text
    return text[: room - 1] + "." if room >= 4 else ""


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
    ax: Any, calls: list[dict[str, Any]], lanes: list[int], n_lanes: int, span: float
) -> None:
    for call, lane in zip(calls, lanes, strict=True):
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
        label = _fit_label(str(call.get("tool", "")), (t1 - t0) / span)
        if label:
            ax.text((t0 + t1) / 2, y, label, ha="center", va="center", fontsize=5, clip_on=True)


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


def draw_timeline(ax: Any, trace: EpisodeTrace) -> None:
    """Draw the episode's timeline into ``ax``: rows from the top, the LLM lane, the tool
    lanes (:func:`assign_lanes`), the event lane; a legend of what is drawn."""
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
    _draw_tool_calls(ax, calls, lanes, n_lanes, span)
    _draw_events(ax, trace.events, event_y)
    ticks = [llm_y, *range(n_lanes, 0, -1), event_y]
    labels = ["LLM", *(f"tools {i + 1}" for i in range(n_lanes)), "events"]
    ax.set_yticks(ticks, labels)
    ax.set_ylim(event_y - 0.7, llm_y + 0.7)
    ax.set_xlim(0.0, span * 1.01)
    ax.set_xlabel("simulated seconds")
    ax.set_title("timeline (overlapping bars on separate lanes ran in parallel)", loc="left")
    _timeline_legend(ax, trace, llm)
