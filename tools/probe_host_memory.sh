#!/usr/bin/env bash
# How much host memory does a run take? One Megatron-LM run (the entry script of tools/record_memory_calibration.py),
# with the largest process's resident memory sampled every second (ps). On the GPU machine, from the repository root:
#   source tools/megatron_wheel_setup.sh && tools/probe_host_memory.sh $OUT/NAME ARGSFILE [EXTRA FLAGS...]
# ARGSFILE holds the run's Megatron-LM flags; writes NAME.log, NAME.rss (the samples, kB) and NAME.max (the largest,
# and the run's last memory and iteration lines). fixtures/memory-calibration/host-memory was recorded so.
out=$1; args=$2; shift 2
( while sleep 1; do ps -eo rss=,comm= --sort=-rss | head -1; done ) > "$out.rss" &
poller=$!
timeout 400 python3 -m torch.distributed.run --nproc-per-node 1 --master-port 29621 tools/compare_family_pretrain_gpt.py $(cat "$args") "$@" > "$out.log" 2>&1
echo "rc=$?" >> "$out.log"
kill $poller
sort -n "$out.rss" | tail -1 > "$out.max"
grep -E "max allocated|elapsed time per iteration|SIGKILL|rc=" "$out.log" | tail -5 >> "$out.max"
