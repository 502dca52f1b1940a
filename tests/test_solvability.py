"""Every shipped env can be solved from what a model sees (``envs/solvability.py``), and a
family that needs a value shown nowhere fails the check naming the task and the value."""

from __future__ import annotations

from pathlib import Path

import pytest
from planarena.envs.base import COMPLEXITIES
from planarena.envs.family import FAMILIES_DIR, FamilyEnv, FamilyError, load_declaration
from planarena.envs.solvability import (
    Seen,
    check_env,
    check_task,
    default_envs,
    load_env,
    main,
    table,
)

# A family whose vaults open only with a code the model is never shown.
VAULT = """\
name: vault
description: Open vaults and report what each holds.
goal: "Report what each of these vaults holds: {roots}. Use send_report."
tools:
  open_vault:
    description: Open a vault with its access code; returns vault and contents.{codes}
    args:
      type: object
      properties: {vault: {type: string}, code: {type: string}}
      required: [vault, code]
    latency: {median_s: 1.0}
  send_report:
    description: Send the report as a list of records {vault, contents}.
    args:
      type: object
      properties: {items: {type: array}}
      required: [items]
    kind: answer
names: [red vault, blue vault, green vault, grey vault]
templates:
  vault:
    vars: {code: {choice: [amber-7, cobalt-3, violet-9]}}
    tool: open_vault
    args: {vault: "{name}", code: "{code}"}
    result: {vault: "{name}", contents: {choice: [gold, silver, jewels]}}
sizes:
  simple: {layers: [{node: vault, width: 1}]}
  medium: {layers: [{node: vault, width: 2}]}
  complex: {layers: [{node: vault, width: 3}]}
answer: {tool: send_report, arg: items, facts: [contents], label: vault}
"""
LISTED = " The codes are amber-7, cobalt-3 and violet-9."


def vault_file(tmp_path: Path, codes: str = "") -> Path:
    path = tmp_path / "vault.yaml"
    path.write_text(VAULT.replace("{codes}", codes))
    return path


@pytest.mark.parametrize("name", default_envs())
def test_every_shipped_env_is_solvable_from_what_a_model_sees(name: str) -> None:
    checks = check_env(load_env(name), n_tasks=3, seed=0)
    assert [c.complexity for c in checks] == list(COMPLEXITIES)
    assert all(len(c.tasks) == 3 for c in checks)
    assert not any(c.failures for c in checks), table(checks)


def test_the_defaults_cover_every_family_and_example() -> None:
    names = set(default_envs())
    files = [*FAMILIES_DIR.glob("*.yaml"), *(FAMILIES_DIR / "examples").glob("*.yaml")]
    assert {"report", "rag", "stock_check"} | {p.stem for p in files} <= names


def test_a_hidden_value_fails_naming_the_task_and_the_value(tmp_path: Path) -> None:
    env = FamilyEnv(path=str(vault_file(tmp_path)))
    checks = check_env(env, n_tasks=2, seed=0)
    for c in checks:
        assert len(c.failures) == 2, table(checks)
        tasks = env.generate(2, seed=0, complexity=c.complexity)
        for t, task in zip(c.failures, tasks, strict=True):
            codes = [nd["vars"]["code"] for nd in task.world["nodes"]]
            assert t.task_id == task.task_id
            assert [(h.tool, h.arg, h.value) for h in t.hidden] == [
                ("open_vault", "code", code) for code in codes
            ]
            assert task.task_id in table(checks) and repr(codes[0]) in t.reason()


def test_the_same_family_with_its_codes_listed_passes(tmp_path: Path) -> None:
    checks = check_env(FamilyEnv(path=str(vault_file(tmp_path, LISTED))), n_tasks=2, seed=0)
    assert not any(c.failures for c in checks), table(checks)


def test_the_command_names_the_task_and_the_value_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = FamilyEnv(path=str(vault_file(tmp_path)))
    code = env.generate(1, seed=5, complexity="simple")[0].world["nodes"][0]["vars"]["code"]
    path = str(vault_file(tmp_path))
    assert main(["--env", path, "--n-tasks", "1", "--seed", "5"]) == 1
    out = capsys.readouterr().out
    assert f"vault-simple-0000: open_vault.code={code!r} not visible" in out
    assert main(["--env", "stock_check", "--n-tasks", "1"]) == 0


def test_visibility_is_light_normalisation_not_guessing() -> None:
    seen = Seen(["Report FY2025 figures for Acme-Corp", "price 41.2"])
    assert seen.shows("2025") and seen.shows("acme corp") and seen.shows("41.2")
    assert not seen.shows("41.20") and not seen.shows("2024") and not seen.shows("corp acme")


@pytest.mark.parametrize(
    ("env", "complexity", "seed", "index", "cause"),
    [
        ("report", "complex", 3, 16, "stale 60.0 beside the current 60.4, read as 60"),
        ("report", "complex", 5, 27, "a stale figure drawn equal to the current one, 71.1"),
        ("stock_check", "medium", 4, 23, "two items drawn the same id, sku-9474"),
    ],
)
def test_tasks_the_check_once_failed_at_other_seeds_are_solvable(
    env: str, complexity: str, seed: int, index: int, cause: str
) -> None:
    """Three grader and world bugs found by the check beyond seed 0 (``cause``)."""
    e = load_env(env)
    task = e.generate(index + 1, seed=seed, complexity=complexity, unreachable_rate=0.0)[-1]
    check = check_task(e, task)
    assert check.solved, (cause, check.reason)


def test_a_family_whose_nodes_always_make_the_same_call_is_refused(tmp_path: Path) -> None:
    """Two items with one id make one call answer for both: a task is drawn again until its
    calls differ, and a family where they never do is refused naming the file and the call."""
    text = (FAMILIES_DIR / "examples" / "stock_check.yaml").read_text(encoding="utf-8")
    narrow = text.replace("sku: {int: [1000, 9999]}", "sku: {int: [1000, 1000]}")
    assert narrow != text
    path = tmp_path / "one_sku.yaml"
    path.write_text(narrow, encoding="utf-8")
    with pytest.raises(FamilyError) as err:
        load_declaration(path)
    assert str(path) in str(err.value) and "sku-1000" in str(err.value)
