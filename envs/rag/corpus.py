"""The ``rag`` family's corpus: short climbing-guide documents written for planarena.

Every document is generated deterministically from the small tables of
:mod:`planarena.envs.rag.tables` (stations near Taipei, crags, routes, grades, seasons,
access) with templated English sentences. The crags, routes and their facts are fictional;
the stations are only place names. The generated corpus is shipped as
``envs/rag/data/rag_climbing.jsonl`` (``python -m planarena.envs.rag.corpus`` rewrites it,
``--help`` for its options; a test checks the file matches this module).

Kinds of document (``kind``): ``nearest_crag`` (a station guide naming the nearest open crag),
``beginner_routes`` (a crag's easiest route and its grade), ``season``, ``access``, ``route``
(one route) and ``general`` (grades, gear, gyms: distractors). Some facts also exist in an
**outdated** near-duplicate (an old guide: dated years ago, shorter and so ranked first by a
vague query): a station guide naming a crag that has been closed since, or an old season or
beginner-route page. That is the retrieval trap.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from planarena.envs.rag.tables import (
    BUSES,
    CLOSED_REASONS,
    CORPUS_SEED,
    DATA_FILE,
    GENERAL,
    GRADES,
    OUTDATED_SEASONS,
    ROUTE_FIRST,
    ROUTE_SECOND,
    SEASONS,
    STATIONS,
    STYLES,
    WHY_SEASON,
)
from planarena.envs.rng import derive_rng

__all__ = ["DATA_FILE", "STATIONS", "build_corpus", "crag_table", "main", "write_corpus"]

Doc = dict[str, Any]


def _route_names(crag: str, n: int) -> list[str]:
    rng = derive_rng(CORPUS_SEED, "routes", crag)
    names: list[str] = []
    while len(names) < n:
        name = f"{rng.choice(ROUTE_FIRST)} {rng.choice(ROUTE_SECOND)}"
        if name not in names:
            names.append(name)
    return names


def crag_table() -> dict[str, dict[str, Any]]:
    """Every crag's facts (open ones from the station table, then the closed ones)."""
    crags: dict[str, dict[str, Any]] = {}
    for i, (station, crag, minutes, closed, old_year) in enumerate(STATIONS):
        rng = derive_rng(CORPUS_SEED, "crag", crag)
        routes = _route_names(crag, 8)
        grades = [GRADES[0 if i % 2 == 0 else 1]]  # the easiest route: one unique grade
        grades += sorted(rng.sample(GRADES[2:], 7), key=GRADES.index)
        crags[crag] = {
            "name": crag,
            "station": station,
            "open": True,
            "minutes": minutes,
            "bus": BUSES[i],
            "stop": f"{crag.split()[0]} Trailhead",
            "walk": rng.choice((10, 15, 20)),
            "season": SEASONS[i % len(SEASONS)],
            "why": WHY_SEASON[i % len(WHY_SEASON)],
            "outdated_season": OUTDATED_SEASONS[i % 3] if i % 3 == 1 else None,
            "outdated_season_year": 2013 + i % 5,
            "routes": [
                {"name": r, "grade": g, "style": rng.choice(STYLES), "length": rng.randint(10, 30)}
                for r, g in zip(routes, grades, strict=True)
            ],
            "old_easiest": None,
        }
        if i % 4 == 2:  # an old guide names a route since retro-bolted and regraded
            crags[crag]["old_easiest"] = {
                "name": routes[1],
                "grade": "5.5",
                "year": 2012 + i % 6,
            }
        if closed is not None:
            crng = derive_rng(CORPUS_SEED, "closed", closed)
            old = _route_names(closed, 4)
            crags[closed] = {
                "name": closed,
                "station": station,
                "open": False,
                "closed_since": (old_year or 2016) + 3,
                "closed_reason": CLOSED_REASONS[i % len(CLOSED_REASONS)],
                "guide_year": old_year,
                "minutes": minutes - 10,
                "season": SEASONS[(i + 2) % len(SEASONS)],
                "routes": [
                    {"name": r, "grade": g, "style": crng.choice(STYLES), "length": 15}
                    for r, g in zip(old, ("5.6", "5.8", "5.9", "5.10b"), strict=True)
                ],
            }
    return crags


def _doc(docs: list[Doc], **fields: Any) -> None:
    fields.setdefault("outdated", False)
    fields.setdefault("station", None)
    fields.setdefault("crag", None)
    fields.setdefault("facts", {})
    docs.append({"doc_id": f"d{len(docs):03d}", **fields})


def build_corpus() -> list[Doc]:
    """The corpus, in a fixed order (doc ids are positions)."""
    crags = crag_table()
    docs: list[Doc] = []
    _station_docs(docs, crags)
    for name, c in crags.items():
        if c["open"]:
            _open_crag_docs(docs, name, c)
        else:
            _closed_crag_docs(docs, name, c)
        _route_docs(docs, name, c)
    for text, title in GENERAL:
        _doc(docs, kind="general", year=2024, date="2024-06-01", title=title, text=text)
    return docs


def _station_docs(docs: list[Doc], crags: dict[str, dict[str, Any]]) -> None:
    """Each station's current guide and, for a station with a closed crag, the old guide
    that still names that crag as the nearest."""
    for station, crag, minutes, closed, old_year in STATIONS:
        extra = ""
        if closed is not None:
            cl = crags[closed]
            extra = (
                f" {closed}, which older guides list, has been closed since "
                f"{cl['closed_since']} after {cl['closed_reason']}."
            )
        _doc(
            docs,
            kind="nearest_crag",
            station=station,
            crag=crag,
            year=2025,
            date="2025-03-01",
            title=f"{station} station crag guide, current edition",
            text=f"The nearest open crag to {station} station is {crag}, about {minutes} "
            f"minutes from the station exit; it is the closest climbing to {station}.{extra}",
            facts={"crag": crag},
        )
        if closed is not None:
            cl = crags[closed]
            _doc(
                docs,
                kind="nearest_crag",
                station=station,
                crag=closed,
                year=old_year,
                date=f"{old_year}-05-01",
                outdated=True,
                title=f"Climbing near {station} ({old_year} guide)",
                text=f"Climbing near {station}: the nearest crag to {station} station is "
                f"{closed}, {cl['minutes']} minutes on foot.",
                facts={"crag": closed},
            )


def _open_crag_docs(docs: list[Doc], name: str, c: dict[str, Any]) -> None:
    """An open crag's current beginner, season and access pages, and the outdated
    beginner or season page some of them also have."""
    routes = c["routes"]
    easiest = routes[0]
    _doc(
        docs,
        kind="beginner_routes",
        station=c["station"],
        crag=name,
        year=2025,
        date="2025-02-10",
        title=f"{name} beginner routes, current grades (updated 2025)",
        text=f"Current beginner guide for {name}: the easiest route is {easiest['name']}, "
        f"graded {easiest['grade']}, a {easiest['length']} m {easiest['style']}. "
        f"Next up are {routes[1]['name']} ({routes[1]['grade']}) and "
        f"{routes[2]['name']} ({routes[2]['grade']}). Updated 2025 after re-bolting.",
        facts={"route": easiest["name"], "grade": easiest["grade"]},
    )
    old = c.get("old_easiest")
    if old:
        _doc(
            docs,
            kind="beginner_routes",
            station=c["station"],
            crag=name,
            year=old["year"],
            date=f"{old['year']}-04-01",
            outdated=True,
            title=f"{name} beginner routes ({old['year']} guide)",
            text=f"Beginner routes at {name}: the easiest is {old['name']}, graded {old['grade']}.",
            facts={"route": old["name"], "grade": old["grade"]},
        )
    _doc(
        docs,
        kind="season",
        station=c["station"],
        crag=name,
        year=2024,
        date="2024-11-20",
        title=f"{name} season: current best season advice (updated 2024)",
        text=f"Season advice for {name}: the best season to climb is {c['season']}, "
        f"because {c['why']}; outside that season expect poor conditions. Updated 2024.",
        facts={"season": c["season"]},
    )
    if c["outdated_season"]:
        y = c["outdated_season_year"]
        _doc(
            docs,
            kind="season",
            station=c["station"],
            crag=name,
            year=y,
            date=f"{y}-06-01",
            outdated=True,
            title=f"{name} season ({y} guide)",
            text=f"{name} season: best from {c['outdated_season']}.",
            facts={"season": c["outdated_season"]},
        )
    access = f"bus {c['bus']} to {c['stop']} stop, then a {c['walk']}-minute walk on the trail"
    _doc(
        docs,
        kind="access",
        station=c["station"],
        crag=name,
        year=2025,
        date="2025-01-15",
        title=f"Getting to {name}: access and approach",
        text=f"Access to {name}: from the MRT take {access}. "
        "Parking is limited at weekends; the approach trail is signposted.",
        facts={"access": access, "bus": c["bus"]},
    )


def _closed_crag_docs(docs: list[Doc], name: str, c: dict[str, Any]) -> None:
    """A closed crag has only its old guide's pages: beginner routes, season, access."""
    easiest = c["routes"][0]
    y = c["guide_year"]
    _doc(
        docs,
        kind="beginner_routes",
        station=c["station"],
        crag=name,
        year=y,
        date=f"{y}-05-01",
        outdated=True,
        title=f"{name} beginner routes ({y} guide)",
        text=f"Beginner routes at {name}: the easiest is {easiest['name']}, graded "
        f"{easiest['grade']}.",
        facts={"route": easiest["name"], "grade": easiest["grade"]},
    )
    _doc(
        docs,
        kind="season",
        station=c["station"],
        crag=name,
        year=y,
        date=f"{y}-05-01",
        outdated=True,
        title=f"{name} season ({y} guide)",
        text=f"{name} season: best from {c['season']}.",
        facts={"season": c["season"]},
    )
    _doc(
        docs,
        kind="access",
        station=c["station"],
        crag=name,
        year=y,
        date=f"{y}-05-01",
        outdated=True,
        title=f"{name} approach ({y} guide)",
        text=f"Access to {name}: walk {c['minutes']} minutes from the road end.",
        facts={"access": f"walk {c['minutes']} minutes from the road end"},
    )


def _route_docs(docs: list[Doc], name: str, c: dict[str, Any]) -> None:
    """One page per route of the crag (outdated for a closed crag)."""
    year = 2025 if c["open"] else c["guide_year"]
    for r in c["routes"]:
        _doc(
            docs,
            kind="route",
            station=c["station"],
            crag=name,
            year=year,
            date=f"{year}-01-01",
            outdated=not c["open"],
            title=f"{r['name']} ({r['grade']}), {name}",
            text=f"{r['name']} is a {r['length']} m {r['style']} on {name}, "
            f"graded {r['grade']}. Bolted, lower off from chains.",
            facts={"route": r["name"], "grade": r["grade"]},
        )


def _line(doc: dict[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False, sort_keys=True) + "\n"


def write_corpus(path: Path = DATA_FILE) -> int:
    docs = build_corpus()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for doc in docs:
            fh.write(_line(doc))
    return len(docs)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m planarena.envs.rag.corpus [--out PATH] [--check]``: rewrite (or check)
    the corpus."""
    parser = argparse.ArgumentParser(
        prog="python -m planarena.envs.rag.corpus",
        description="Generate the rag env's climbing-guide corpus from the tables in "
        "envs/rag/tables.py and write it as JSON lines (deterministic: the shipped file is "
        "rewritten byte for byte unless this module changed).",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DATA_FILE,
        help=f"where to write the corpus (default: {DATA_FILE})",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if --out differs from what this module generates",
    )
    args = parser.parse_args(argv)
    if args.check:
        expected = "".join(_line(doc) for doc in build_corpus())
        try:
            current = args.out.read_text(encoding="utf-8")
        except OSError:
            current = None
        if current != expected:
            print(f"{args.out} differs from the generated corpus (rewrite it with {parser.prog})")
            return 1
        print(f"{args.out} matches the generated corpus")
        return 0
    print(f"wrote {write_corpus(args.out)} documents to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
