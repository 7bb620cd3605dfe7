"""Findings: what a signature says about this run, with its evidence, facts and config verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time, and so does creating their dataclasses
    from typing import Any

    from offloaddoctor.catalog.model import Signature
    from offloaddoctor.config.run_identity import Run
    from offloaddoctor.scanning import Evidence

CONFIRMED, CONTRADICTED, UNKNOWN = "confirmed", "contradicted", "unknown"


class ConfigEvidence(NamedTuple):
    key: str
    known: bool
    value: Any = None
    source: str | None = None
    overridden: tuple[str, ...] = ()  # "value at source" for values that lost to this one


@dataclass
class ConfigVerdict:
    verdict: str
    values: list[ConfigEvidence] = field(default_factory=list)
    explanation: str = ""


@dataclass
class Finding:
    signature: Signature
    evidence: list[Evidence]
    ranks: list[int]
    occurrences: int
    facts: dict[str, Any]
    config: ConfigVerdict
    overrides: list[str]
    first_seen: int
    trigger: str = "log"  # "log": matched log lines; "config": the run's config alone; "metrics": run numbers
    files: list[str] = field(default_factory=list)  # every log file it appeared in (evidence keeps a few)
    known_issues: list = field(default_factory=list)  # report/known_issues.py KnownIssueMatch
    fix_note: str = ""  # why the fix lines differ from the signature's (the numbers, a run that is not Megatron)
    fix_note_replaces_summary: bool = False  # the numbers contradict the signature's fix summary: show the note only
    changes: list = field(default_factory=list)  # the fix as (canonical key, value) pairs (report/fixes.py)
    fix_memory: str = ""  # the memory model's peak for the run with these changes (advice/fix_memory.py)

    @property
    def fix_sentences(self) -> list[str]:
        """The fix's prose, the same in every output format: the note on this run, then the signature's summary
        unless the run's numbers contradict it, then what the changes do to the run's memory."""
        note = " ".join(self.fix_note.split())
        summary = " ".join(self.signature.fix.summary.split())
        return [
            text for text in (note, "" if self.fix_note_replaces_summary and note else summary, self.fix_memory) if text
        ]

    @property
    def id(self) -> str:
        return self.signature.id

    @property
    def sort_key(self) -> tuple:
        # What the log shows leads; config-only findings follow at the same severity.
        return (self.signature.severity_rank, self.trigger == "config", -self.signature.priority, self.first_seen)


class SourceSummary(NamedTuple):  # one per log read: 200,000 rank logs
    path: str
    lines: int


@dataclass
class Report:
    findings: list[Finding]
    unmatched: Evidence | None
    sources: list[SourceSummary]
    notes: list[str]
    run_facts: dict[str, Any]
    ranks_seen: list[int]
    suppressed: dict[str, str] = field(default_factory=dict)  # id -> reason (--ignore, project file)
    suppressed_by: dict[str, str] = field(default_factory=dict)  # id -> "--ignore" or the project file
    suppressed_occurrences: dict[str, int] = field(default_factory=dict)  # id -> lines it matched
    project_file: str | None = None  # the project file read (policy.py), if one was
    note_keys: dict[str, str] = field(default_factory=dict)  # config-vs-log note -> the key it is about
    config_mismatch: str | None = None  # the config is probably from another run: why (also the first note)
    unmatched_traceback: bool = False  # `unmatched` ends a traceback: a crash no signature knows
    # The logs hold several runs (config/run_identity.py): one report each; this one then holds every finding.
    runs: list[Report] = field(default_factory=list)
    run: Run | None = None  # in a report of `runs`: its logs and what tells it apart
    fix_dialect: str = "bridge"  # how the fixes are printed (config/dialect.py): megatron-lm or bridge

    @property
    def has_errors(self) -> bool:
        return any(f.signature.severity == "error" for f in self.findings)
