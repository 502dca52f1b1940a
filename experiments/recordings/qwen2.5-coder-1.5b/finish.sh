#!/usr/bin/env bash
# Turn the recording into a shipped one, once record.sh has finished every cell at n_tasks=N:
# replay all four cells offline in one run (no request may be sent), pack it with its cache,
# fit the simulator to its fit split, measure how the plan reader read its plans, and run
# sim_vs_real on its held-out tasks.
#
#   bash finish.sh WORK [N] [DEST] [OUT]
#
# N: task indices 0..N-1 (default 10); DEST: the recording folder to write (default
# tests/data/recordings/qwen2.5-coder-1.5b); OUT: scratch dir for the replay and sim_vs_real
# runs (default WORK/finish-nN). With N below 10 it is a dry run of the pipeline on the cells
# recorded so far (give a DEST outside tests/). Run from the repository's root.
set -euo pipefail
work=$(realpath "$1"); n=${2:-10}
dest=${3:-tests/data/recordings/qwen2.5-coder-1.5b}; out=${4:-$work/finish-n$n}
planners='planner=[react,reflexion,plan_execute,plan_execute_replan,topo,tot]'
mkdir -p "$out"
planarena llm=local llm.cache_dir="$work/cache" llm.offline=true 'env=[report,file]' \
  'complexity=[simple,medium]' n_tasks="$n" "$planners" budget.max_tokens_per_episode=12000 \
  hydra.run.dir="$out/replay" > "$out/replay.log" 2>&1
planarena-local pack "$out/replay" "$work/cache" "$dest"
planarena-calibrate "$dest/run" --cache "$work/cache" --out "$dest/profile.yaml" \
  --report "$dest/fit.md" --name qwen2.5-coder-1.5b
python -m planarena.experiments.calibrate.plan_reading "$dest" > "$out/plan_reading.md"
planarena experiment=sim_vs_real sim_vs_real.real_run="$dest/run" hydra.run.dir="$out/sim_vs_real" \
  > "$out/sim_vs_real.log" 2>&1
echo "replayed, packed into $dest, fitted; plan reading: $out/plan_reading.md;" \
  "sim_vs_real: $out/sim_vs_real/sim_vs_real.md"
