#!/usr/bin/env bash
# Refresh requirements/lock.txt: resolve planarena's dependencies afresh (the newest versions
# its pyproject.toml allows, with the extras CI installs) in a throw-away venv and write them
# pinned. Run it from anywhere; review the diff, run the tests, commit the lock.
#   bash requirements/refresh-lock.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$(mktemp -d)/venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
"$venv/bin/python" -m pip install -q -e "$root[dev,joblib,slurm]" >"$venv.log" 2>&1 \
  || { cat "$venv.log"; exit 1; }
{
  echo "# planarena's pinned dependencies: what CI and the README's set-up command install."
  echo "# Made by: bash requirements/refresh-lock.sh ($(date -u +%Y-%m-%d), $("$venv/bin/python" -V), $(uname -sm))"
  echo "# Used as a constraints file (pip install -c), so an extra not installed pins nothing."
  "$venv/bin/python" -m pip freeze --exclude-editable | grep -v -E "^(pip|setuptools|wheel)=="
} > "$root/requirements/lock.txt"
rm -rf "$(dirname "$venv")"
echo "wrote $root/requirements/lock.txt ($(grep -c '==' "$root/requirements/lock.txt") pins)"
