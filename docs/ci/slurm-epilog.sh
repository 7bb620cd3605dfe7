#!/usr/bin/env bash
# Slurm epilog: diagnose a finished job's logs and leave offloaddoctor.json next to them.
# Install as Epilog= in slurm.conf (or call from your own epilog). It never fails the epilog: a non-zero
# epilog would drain the node, and a diagnosis is advice, not an error of the node.
# Assumes jobs write their logs under $LOG_ROOT/$SLURM_JOB_ID (set LOG_ROOT to your layout).
set -u
LOG_ROOT="${LOG_ROOT:-/shared/training-logs}"
job_dir="$LOG_ROOT/${SLURM_JOB_ID:-unknown}"
[ -d "$job_dir" ] || exit 0
command -v offloaddoctor >/dev/null 2>&1 || exit 0
# stderr goes to a name diagnose does not read as a log (*.log, *.out, *.err, *.txt) on a later run.
timeout 300 offloaddoctor diagnose "$job_dir" --recursive --format json --fail-on never \
  > "$job_dir/offloaddoctor.json.tmp" 2> "$job_dir/offloaddoctor.stderr" \
  && mv "$job_dir/offloaddoctor.json.tmp" "$job_dir/offloaddoctor.json"
rm -f "$job_dir/offloaddoctor.json.tmp"
exit 0
