"""The assumption registry names every chosen value, with the default the code really uses.

A knob that looks sweepable (a skill field, a model role's field, a planner's numeric
setting, a fault rule's rate, a fault config's scale) and is missing from
``experiments/claims/assumptions.yaml`` fails here, and so does a registered default that
differs from the code's or the config's: a finding cannot rest on a value nobody registered.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from planarena.experiments.claims.assumptions import (
    Assumption,
    RegistryError,
    _read,
    load_assumptions,
    provenance_counts,
    render_markdown,
)
from planarena.planners.llm.profiles import SKILLS, SkillProfile

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
ENTRIES = load_assumptions()
BY_NAME = {a.name: a for a in ENTRIES}
BY_KEY = {a.key: a for a in ENTRIES if a.key}
COVERED = {c for a in ENTRIES for c in a.covers}


def _numeric(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, list) and bool(value) and all(_numeric(v) for v in value)


def test_every_skill_field_is_registered_with_the_default_profiles_value() -> None:
    strong = SKILLS["strong"]
    for field in SkillProfile.model_fields:
        if field == "name":
            continue
        if field in COVERED:  # unset by default: it takes the entry's value
            assert getattr(strong, field) is None, field
            continue
        entry = BY_KEY.get(f"llm.skill_overrides.{field}")
        assert entry is not None, f"skill field {field} is not in the assumption registry"
        assert entry.default == getattr(strong, field), field


def test_every_numeric_planner_setting_is_registered_with_its_config_value() -> None:
    for path in sorted((CONFIGS / "planner").glob("*.yaml")):
        spec = yaml.safe_load(path.read_text())
        for key, value in spec.items():
            if key.startswith("_") or not _numeric(value):
                continue
            entry = BY_KEY.get(f"planner.{path.stem}.{key}")
            assert entry is not None, f"planner.{path.stem}.{key} is not in the registry"
            assert entry.default == value, (path.stem, key)


def test_the_model_roles_and_the_faults_are_registered_with_their_config_values() -> None:
    sim = yaml.safe_load((CONFIGS / "llm" / "sim.yaml").read_text())
    for key, entry in BY_KEY.items():
        if key.startswith("llm.models."):
            _, _, role, field = key.split(".")
            assert sim["models"][role][field] == entry.default, key
    assert BY_KEY["llm.models.replanner.error_scale"].default == 1.5
    faults = yaml.safe_load((CONFIGS / "faults" / "default.yaml").read_text())
    for key in ("unreachable_rate", "rate_scale", "duration_scale"):
        assert BY_KEY[f"faults.{key}"].default == faults[key], key
    for rule in faults["rules"]:
        entry = BY_NAME.get(f"{rule['kind']}_rate")
        assert entry is not None, f"fault rule {rule['kind']}'s rate is not in the registry"
        assert entry.default == rule["rate"] and entry.swept_by == "fault_rate_scale"
        if "duration_median_s" in rule:
            median = BY_NAME[f"{rule['kind']}_duration_median_s"]
            assert median.default == rule["duration_median_s"]


def test_every_entry_says_where_it_comes_from_and_can_be_moved() -> None:
    for a in ENTRIES:
        assert a.source.strip(), a.name
        assert a.sweepable or a.swept_by in BY_NAME or a.range is None, a.name
        if a.swept_by:
            assert BY_NAME[a.swept_by].sweepable, a.name
    counts = provenance_counts()
    assert sum(counts.values()) == len(ENTRIES) and counts["chosen"] > counts["cited"]


def test_the_docs_page_is_rendered_from_the_registry() -> None:
    """docs/assumptions.md is the registry's rendering, never typed by hand (regenerate with
    python -m planarena.experiments.claims)."""
    assert (ROOT / "docs" / "assumptions.md").read_text() == render_markdown()


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("{name: x, key: a.b, default: 5, range: [0, 1], provenance: chosen, source: s}",
         "assumption x: default 5 lies outside [0.0, 1.0]"),
        ("{name: x, key: a.b, default: 0.5, range: [0, 1], provenance: guessed, source: s}",
         "assumption x: provenance: Input should be 'measured', 'cited' or 'chosen'"),
        ("{name: x, key: null, default: 1, range: null, provenance: chosen, source: s}",
         "assumption x: entry: Value error, no key and no swept_by"),
    ],
)  # fmt: skip
def test_a_bad_registry_entry_is_one_line_naming_file_and_entry(
    tmp_path: Path, entry: str, says: str
) -> None:
    path = tmp_path / "assumptions.yaml"
    path.write_text(f"assumptions:\n  - {entry}\n")
    with pytest.raises(RegistryError) as err:
        _read(path)
    assert str(err.value).startswith(f"{path}: ") and says.split(": ", 1)[1] in str(err.value)
    assert "\n" not in str(err.value)


def test_levels_round_counts_and_keep_the_default_in_the_middle() -> None:
    replans = BY_NAME["replan_max_replans"]
    assert replans.levels() == (1, 3, 20) and all(isinstance(v, int) for v in replans.levels())
    assert isinstance(BY_NAME["judge_correlation"], Assumption)
    assert BY_NAME["judge_correlation"].levels() == (0.0, 0.5, 1.0)
