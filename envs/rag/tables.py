"""The facts of the rag family's fictional climbing world, from which the corpus is written.

Stations near Taipei (only their names are real), the crags nearest them, and the pools of
seasons, grades, route names and buses that :mod:`planarena.envs.rag.corpus` draws each crag's
facts from; also where the written corpus is shipped. The env reads the station table to pick
questions, so it lives apart from the corpus tool (``python -m planarena.envs.rag.corpus``).
"""

from __future__ import annotations

from pathlib import Path

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
