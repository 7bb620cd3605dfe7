"""Record real failure output on a CPU for the "pasted excerpt" fixtures (issue 13, family 3).

Needs torch (CPU is enough), e.g. the venv of tools/record_bridge_summary.py:
    /work/venv-bridge/bin/python tools/record_failure_excerpts.py

- torchrun-root-cause-traceback: `torchrun --nproc_per_node 2` of a script whose rank 1 raises under
  torch's `@record`; kept from torchrun's own traceback on (the ChildFailedError summary people paste).
- torchrun-root-cause-signal: the same with rank 1 killed by SIGKILL (what the kernel OOM killer does).
- excerpt-cut-traceback: torch's real "can't optimize a non-leaf Tensor" traceback, cut after the frame's
  `raise` line as excerpts in issue threads often are (the exception line is dropped, nothing else).

Paths are rewritten: the venv's site-packages -> /usr/local/lib/python3.11/dist-packages/, its bin/ ->
/usr/local/bin/, the temporary script directory -> /workspace/. Timestamps, pids and hosts are as recorded.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"

TRAIN_SCRIPT = """\
import os, sys
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    rank = int(os.environ["RANK"])
    if sys.argv[1] == "raise" and rank == 1:
        raise ValueError("micro batch size (4) times data parallel size (2) must divide global batch size (30)")
    if sys.argv[1] == "kill" and rank == 1:
        os.kill(os.getpid(), 9)


if __name__ == "__main__":
    main()
"""
NON_LEAF = """\
import torch

x = torch.ones(4, requires_grad=True)
optimizer = torch.optim.Adam([x.mul(2)], lr=1e-3)
"""


def rewrite(text: str, workdir: str) -> str:
    site = sysconfig.get_paths()["purelib"].rstrip("/") + "/"
    bindir = str(Path(sys.executable).parent) + "/"
    return (
        text.replace(site, "/usr/local/lib/python3.11/dist-packages/")
        .replace(bindir, "/usr/local/bin/")
        .replace(workdir.rstrip("/") + "/", "/workspace/")
    )


def run(args: list[str], cwd: str) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr


def from_agent_traceback(output: str) -> str:
    """The part users paste: torchrun's own traceback and the ChildFailedError summary."""
    lines = output.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    return "".join(lines[starts[-1] :])


def cut_after_raise(output: str) -> str:
    lines = output.splitlines(keepends=True)
    last_raise = max(i for i, line in enumerate(lines) if line.strip().startswith("raise "))
    return "".join(lines[: last_raise + 1])


def main() -> int:
    torchrun = str(Path(sys.executable).parent / "torchrun")
    outputs = {}
    with tempfile.TemporaryDirectory() as workdir:
        (Path(workdir) / "train.py").write_text(TRAIN_SCRIPT)
        (Path(workdir) / "make_optimizer.py").write_text(NON_LEAF)
        for case, mode, port in (
            ("torchrun-root-cause-traceback", "raise", "29541"),
            ("torchrun-root-cause-signal", "kill", "29542"),
        ):
            output = run([torchrun, "--nproc_per_node", "2", "--master_port", port, "train.py", mode], workdir)
            outputs[case] = from_agent_traceback(rewrite(output, workdir))
        output = run([sys.executable, "make_optimizer.py"], workdir)
        outputs["excerpt-cut-traceback"] = cut_after_raise(rewrite(output, workdir))
    for case, text in outputs.items():
        target = FIXTURES / case
        target.mkdir(exist_ok=True)
        (target / "job.log").write_text(text)
        print(f"{target / 'job.log'}: {len(text.splitlines())} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
