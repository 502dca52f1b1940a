#!/usr/bin/env bash
# Record Qwen2.5-Coder-1.5B-Instruct on report and file, simple and medium, six planners, the
# default faults, task indices FROM..TO (n_tasks=FROM..TO): one cell at a time, into one
# response cache, so that a stopped session resumes where it stopped (a cell whose run ended
# with status 0 is marked .done and skipped; a cell cut short replays its recorded replies).
#
#   bash record.sh WORK FROM TO
#
# WORK holds cache/ (unpacked from this folder's llm_cache.tar.xz when missing), runs/ and
# progress.log. The model must be served on 127.0.0.1:8080 (planarena-local serve), and
# `planarena` must be on PATH, from the commit the README names.
set -u
work=$(realpath "$1"); from=$2; to=$3
here=$(dirname "$(realpath "$0")")
mkdir -p "$work/runs"
if [ ! -d "$work/cache" ] && [ -f "$here/llm_cache.tar.xz" ]; then
  tar -C "$work" -xJf "$here/llm_cache.tar.xz"
fi
for n in $(seq "$from" "$to"); do for c in simple medium; do for e in report file; do
  d=$work/runs/n$n-$c-$e
  if [ -f "$d/.done" ]; then continue; fi
  echo "$(date -u +%FT%TZ) start n=$n $c $e" >> "$work/progress.log"
  planarena llm=local llm.cache_dir="$work/cache" env=$e complexity=$c n_tasks=$n \
    'planner=[react,reflexion,plan_execute,plan_execute_replan,topo,tot]' \
    budget.max_tokens_per_episode=12000 hydra.run.dir="$d" > "$d.log" 2>&1
  rc=$?
  echo "$(date -u +%FT%TZ) end n=$n $c $e rc=$rc" >> "$work/progress.log"
  if [ $rc -eq 0 ]; then touch "$d/.done"; fi
done; done; done
