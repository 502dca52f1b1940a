"""The ``rag`` family's corpus: short climbing-guide documents written for planarena.

Every document is generated deterministically from the small tables below (stations near
Taipei, crags, routes, grades, seasons, access) with templated English sentences. The crags,
routes and their facts are fictional; the stations are only place names. The generated
corpus is shipped as ``envs/data/rag_climbing.jsonl`` (``python -m planarena.envs.rag.corpus`` rewrites
it, ``--help`` for its options; a test checks the file matches this module).

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

from planarena.envs.rng import derive_rng

DATA_FILE = Path(__file__).resolve().parent / "data" / "rag_climbing.jsonl"
CORPUS_SEED = "rag-corpus-v1"

# (station, nearest open crag, minutes on foot from the station's exit, closed crag an old
# guide still names as the nearest, year of that old guide)
STATIONS: tuple[tuple[str, str, int, str | None, int | None], ...] = (
    ("Xindian", "Bamboo Slab", 25, "Riverside Quarry", 2016),
    ("Tamsui", "Egret Buttress", 30, None, None),
    ("Beitou", "Sulfur Gully", 20, "Hot Spring Wall", 2015),
    ("Muzha", "Tea Terrace Wall", 35, None, None),
    ("Sanxia", "Kingfisher Wall", 40, "Old Mill Quarry", 2017),
    ("Yingge", "Kiln Rock", 30, None, None),
    ("Keelung", "Harbor Point", 25, "Fort Ledge", 2014),
    ("Ruifang", "Gold Seam Cliff", 35, None, None),
    ("Xizhi", "Dragon Tooth", 30, "Quarry Nine", 2016),
    ("Bitan", "Lantern Cliff", 20, None, None),
    ("Guandu", "Mangrove Arete", 25, "Estuary Slab", 2015),
    ("Nangang", "Cloud Gate Crag", 30, None, None),
)

CLOSED_REASONS = ("a rockfall", "a landslide", "a land dispute", "bird nesting protection")

SEASONS = (
    "October to April",
    "November to March",
    "September to May",
    "October to May",
    "December to April",
    "September to December",
)
OUTDATED_SEASONS = ("June to August", "May to September", "July to October")
WHY_SEASON = (
    "summer afternoons bring thunderstorms and wet rock",
    "the rock faces the afternoon sun and is too hot in summer",
    "the northeast monsoon keeps the cliff cool and dry",
    "typhoon season closes the access trail",
)

GRADES = ("5.6", "5.7", "5.8", "5.9", "5.10a", "5.10b", "5.10c", "5.11a", "5.11b", "5.12a")
STYLES = ("slab", "crack", "face", "arete", "corner", "overhang")
ROUTE_FIRST = (
    "Morning",
    "Jade",
    "Typhoon",
    "Lotus",
    "Iron",
    "Paper",
    "Silent",
    "Red",
    "Monsoon",
    "Temple",
    "Ginger",
    "Pearl",
    "Night",
    "Copper",
    "Willow",
    "Lucky",
    "Tiger",
    "Mist",
)
ROUTE_SECOND = (
    "Ladder",
    "Crack",
    "Dragon",
    "Steps",
    "Lantern",
    "Corner",
    "Rib",
    "Groove",
    "Kite",
    "Arete",
    "Garden",
    "Bridge",
    "Chimney",
    "Smile",
    "Line",
    "Flake",
    "Roof",
    "Ramp",
)
BUSES = ("849", "F712", "BL15", "R25", "795", "1062", "G12", "F906", "1551", "857", "M3", "T21")


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


def _doc(docs: list[dict[str, Any]], **fields: Any) -> None:
    fields.setdefault("outdated", False)
    fields.setdefault("station", None)
    fields.setdefault("crag", None)
    fields.setdefault("facts", {})
    docs.append({"doc_id": f"d{len(docs):03d}", **fields})


def build_corpus() -> list[dict[str, Any]]:
    """The corpus, in a fixed order (doc ids are positions)."""
    crags = crag_table()
    docs: list[dict[str, Any]] = []
    for station, crag, minutes, closed, old_year in STATIONS:
        c = crags[crag]
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
    for name, c in crags.items():
        routes = c["routes"]
        easiest = routes[0]
        if c["open"]:
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
                    text=f"Beginner routes at {name}: the easiest is {old['name']}, "
                    f"graded {old['grade']}.",
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
            access = (
                f"bus {c['bus']} to {c['stop']} stop, then a {c['walk']}-minute walk on the trail"
            )
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
        else:
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
        year = 2025 if c["open"] else c["guide_year"]
        for r in routes:
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
    for text, title in GENERAL:
        _doc(docs, kind="general", year=2024, date="2024-06-01", title=title, text=text)
    return docs


GENERAL: tuple[tuple[str, str], ...] = (
    (
        "Grades in Taiwan use the Yosemite Decimal System. Beginners usually start on 5.6 to "
        "5.8; 5.10 and above need regular training.",
        "Understanding climbing grades",
    ),
    (
        "A first outdoor day needs a harness, helmet, belay device, locking carabiners and "
        "approach shoes. Rent shoes at a gym before buying.",
        "Gear checklist for a first outdoor day",
    ),
    (
        "Indoor gyms in Taipei offer top-rope and bouldering; most run introductory belay "
        "courses on weekday evenings.",
        "Climbing gyms in Taipei",
    ),
    (
        "Sea cliffs on the northeast coast are sandstone; after rain wait a day for the rock "
        "to dry, because wet sandstone breaks.",
        "Climbing on sandstone after rain",
    ),
    (
        "Lead climbing means clipping the rope into bolts as you climb; learn it indoors "
        "with an instructor first.",
        "From top-rope to lead climbing",
    ),
    (
        "Bouldering is climbing short problems without a rope above crash pads; grades use "
        "the V scale.",
        "What is bouldering",
    ),
    (
        "Typhoon warnings close many coastal trails; check the weather bureau before you "
        "go and never climb during a warning.",
        "Typhoons and trail closures",
    ),
    (
        "Leave no trace: pack out tape and food, keep to marked trails and avoid climbing "
        "near nesting birds in spring.",
        "Crag etiquette",
    ),
    (
        "A guided day for two beginners usually includes gear, a guide and three to four "
        "top-rope routes.",
        "Guided climbing days",
    ),
    (
        "Knots every climber should know: the figure-eight follow-through, the clove hitch "
        "and the prusik.",
        "Essential knots",
    ),
    (
        "Check the anchor chains and the rope end before lowering; tie a stopper knot in "
        "the rope end on long routes.",
        "Lowering safely",
    ),
    (
        "Summer humidity in northern Taiwan makes holds greasy; early mornings are best.",
        "Humidity and friction",
    ),
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
    """``python -m planarena.envs.rag.corpus [--out PATH] [--check]``: rewrite (or check) the corpus."""
    parser = argparse.ArgumentParser(
        prog="python -m planarena.envs.rag.corpus",
        description="Generate the rag env's climbing-guide corpus from the tables in "
        "envs/rag_corpus.py and write it as JSON lines (deterministic: the shipped file is "
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
