"""What a scan of a run's logs leaves: the aggregates of catalogue hits, the failure lines, the iteration
sample, the config the logs print, the ranks. Its own module so that run facts and the report read it without
the scanner that fills it (`check` reads no log)."""

from __future__ import annotations

from dataclasses import dataclass, field

from offloaddoctor.metrics.parameter_lines import ParameterCounts
from offloaddoctor.scanning.evidence import Aggregate, Evidence

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from offloaddoctor.config.from_log import LogConfigCollector
    from offloaddoctor.metrics.iteration_lines import IterationMetrics

MAX_EXCEPTIONS = 64  # the last exception lines kept: the report cites the last one that is not a launcher's


@dataclass
class ScanResult:
    aggregates: list[Aggregate] = field(default_factory=list)
    exceptions: list[Evidence] = field(default_factory=list)  # last line of each traceback, the last MAX_EXCEPTIONS
    last_error_line: Evidence | None = None
    # a pasted frame's raise/assert or statement outside any traceback with a header (PastedExcerpt)
    last_source_line: Evidence | None = None
    iterations: dict[tuple[str, int], list[IterationMetrics]] = field(default_factory=dict)  # (path, segment) -> sample
    collectors: list[LogConfigCollector] = field(default_factory=list)
    lines_read: dict[str, int] = field(default_factory=dict)
    ranks_seen: set[int] = field(default_factory=set)
    rank_logs: dict[int, str] = field(default_factory=dict)  # rank -> the first log its lines were seen in
    rank_clashes: set[tuple[str, str]] = field(default_factory=set)  # (earlier log, later log) sharing a rank
    warnings: list[str] = field(default_factory=list)
    skipped: set[str] = field(default_factory=set)  # listed logs gone or not text by the time they were read
    parameters: ParameterCounts = field(default_factory=ParameterCounts)
    # whose training code the tracebacks ran: "megatron-lm" (megatron/training/) and "bridge" (megatron/bridge/), for
    # the fixes' dialect when the run prints no config (failure_lines.training_code)
    training_code: set[str] = field(default_factory=set)
    megatron_startup: bool = False  # a line Megatron's training loop prints at start-up (MegatronStartup)
    # where Megatron's `[after training is done]` was last read, (path, line) (MegatronStartup)
    training_done: tuple[str, int] | None = None
    # where Megatron's `successfully saved checkpoint` was last read, (path, line) (MegatronStartup)
    checkpoint_saved: tuple[str, int] | None = None
    # (path, line) of `successfully loaded checkpoint`: a resumed run, whose optimizer state came with the checkpoint
    checkpoint_loaded: tuple[str, int] | None = None
    # (path, line) of the last line read after NCCL's `Last error:` and kept as the last error line: what NCCL says
    # failed, an echo where another finding is the cause (report/engine.py _unexplained_failure)
    nccl_reason: tuple[str, int] | None = None
    # a traceback frame where runpy.run_path ran a script's top level: multiprocessing's spawn re-running the training
    # script in a child (no `if __name__ == "__main__":` guard), the first one read (TracebackTracker)
    script_rerun: list[Evidence] = field(default_factory=list)
    # run fact -> the first traceback frame that says the model is frozen so (failure_lines.FROZEN_MODEL_FRAMES:
    # adapter code, a LoRA run's; megatron-core's `linear_with_frozen_weight`, a weight that takes no gradient)
    frozen_frames: dict[str, Evidence] = field(default_factory=dict)

    def remember_exception(self, evidence: Evidence) -> None:
        self.exceptions.append(evidence)
        if len(self.exceptions) > MAX_EXCEPTIONS:
            del self.exceptions[:-MAX_EXCEPTIONS]
