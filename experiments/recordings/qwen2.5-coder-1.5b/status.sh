#!/usr/bin/env bash
# Where the recording stands: each cell's largest finished run (n_tasks=N ended with status 0,
# marked .done; it holds tasks 0..N-1) merged by planarena-report into WORK/status
# (summary.md: completion per cell and planner with intervals, failure modes, tokens).
#
#   bash status.sh WORK
set -euo pipefail
work=$(realpath "$1")
dirs=()
for cell in simple-report simple-file medium-report medium-file; do
  best=$(for d in "$work"/runs/n*-"$cell"; do
    if [ -f "$d/.done" ]; then echo "${d##*/n}" | cut -d- -f1; fi; done | sort -n | tail -1)
  [ -n "$best" ] && dirs+=("$work/runs/n$best-$cell")
done
rm -rf "$work/status"
planarena-report --out "$work/status" "${dirs[@]}" > /dev/null
echo "cells: ${dirs[*]##*/}"
awk '/^## Cost/{exit} {print}' "$work/status/summary.md"
