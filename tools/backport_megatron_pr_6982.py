#!/usr/bin/env python3
"""Copy an installed megatron-core (SITE, as tools/megatron_wheel_setup.sh installs it) to DEST with
NVIDIA/Megatron-LM#6982 applied: the distributed optimizer's shard of an fp32 model parameter detached, as its
bf16/fp16 branch already is (commit d5ff7ea72cffe1eb1daedaa2c7b2858694ab0d3c on main; megatron-core 0.19.0 does not
have it). A run with PYTHONPATH=DEST stands for "a Megatron-Core with NVIDIA/Megatron-LM#6982", which
optimizer-offload-fp32-model's and optimizer-offload-fp32-params' fixes name.

    python3 tools/backport_megatron_pr_6982.py /tmp/site /tmp/site-6982
"""

import shutil
import sys
from pathlib import Path

BEFORE = "shard_model_param = model_param.view(-1)[param_range.start : param_range.end]"
AFTER = "shard_model_param = model_param.detach().view(-1)[param_range.start : param_range.end]"


def main(site: Path, dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(site, dest, symlinks=True)
    path = dest / "megatron/core/optimizer/distrib_optimizer.py"
    text = path.read_text()
    if text.count(BEFORE) != 1:
        sys.exit(f"{path}: the fp32 branch's line is not there once; is this megatron-core 0.19.0?")
    path.write_text(text.replace(BEFORE, AFTER))
    print(f"{dest}: NVIDIA/Megatron-LM#6982 applied")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
