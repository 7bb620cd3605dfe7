from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from offloaddoctor.api import load_catalog
from offloaddoctor.catalog.loader import CatalogError, builtin_signature_dir

from tests.conftest import schema_validator

GOOD = (builtin_signature_dir() / "recompute-cpu-offload.yaml").read_text()


def write(directory: Path, name: str, text: str) -> None:
    (directory / f"{name}.yaml").write_text(text)


def test_builtin_catalogue_loads_and_is_sorted_by_priority(catalog):
    priorities = [s.priority for s in catalog.signatures]
    assert priorities == sorted(priorities, reverse=True)


@pytest.mark.parametrize("path", sorted(builtin_signature_dir().glob("*.yaml")), ids=lambda p: p.stem)
def test_every_signature_file_satisfies_the_published_json_schema(path):
    schema_validator("signature.schema.json").validate(yaml.safe_load(path.read_text()))


def test_all_problems_are_reported_at_once(tmp_path):
    write(tmp_path, "broken-one", "id: broken-one\ntitle: x\nseverity: fatal\npriority: 500\n")
    write(tmp_path, "broken-two", GOOD.replace("id: recompute-cpu-offload", "id: wrong-name"))
    write(
        tmp_path,
        "broken-three",
        GOOD.replace("id: recompute-cpu-offload", "id: broken-three").replace("'CPU\\s+offloading", "'(CPU"),
    )
    with pytest.raises(CatalogError) as caught:
        load_catalog([tmp_path], include_builtin=False)
    text = str(caught.value)
    problems = {(Path(p.path).stem, p.field) for p in caught.value.problems}
    assert ("broken-one", "severity") in problems
    assert ("broken-one", "priority") in problems
    assert ("broken-one", "match") in problems
    assert ("broken-one", "examples") in problems
    assert ("broken-two", "id") in problems
    assert ("broken-three", "match.patterns[0]") in problems
    assert "does not compile" in text


def test_unknown_config_key_is_a_problem(tmp_path):
    write(
        tmp_path,
        "typo",
        GOOD.replace("id: recompute-cpu-offload", "id: typo").replace(
            "{key: model.cpu_offloading, eq: true}", "{key: model.cpu_ofloading, eq: true}"
        ),
    )
    with pytest.raises(CatalogError, match=r"unknown config key 'model\.cpu_ofloading'"):
        load_catalog([tmp_path], include_builtin=False)


def test_duplicate_id_across_directories_is_a_clear_error(tmp_path):
    write(tmp_path, "recompute-cpu-offload", GOOD)
    with pytest.raises(CatalogError) as caught:
        load_catalog([tmp_path])
    message = str(caught.value)
    assert "\n" not in message  # one problem, one line
    assert message.startswith(f"{tmp_path / 'recompute-cpu-offload.yaml'}: id: duplicate id 'recompute-cpu-offload'")
    assert (
        f"also defined in {builtin_signature_dir() / 'recompute-cpu-offload.yaml'} (the built-in catalogue)" in message
    )


def test_duplicate_id_between_two_team_directories_names_both_files(tmp_path):
    team_text = GOOD.replace("id: recompute-cpu-offload", "id: team-thing")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        write(tmp_path / name, "team-thing", team_text)
    with pytest.raises(CatalogError) as caught:
        load_catalog([tmp_path / "a", tmp_path / "b"])
    [problem] = caught.value.problems
    assert problem.path == str(tmp_path / "b" / "team-thing.yaml")
    assert str(tmp_path / "a" / "team-thing.yaml") in problem.reason and "built-in" not in problem.reason


def test_the_same_directory_named_twice_is_loaded_once(tmp_path, monkeypatch):
    write(tmp_path, "team-thing", GOOD.replace("id: recompute-cpu-offload", "id: team-thing"))
    monkeypatch.chdir(tmp_path.parent)
    # e.g. once from the project file and once on the command line, spelled differently
    catalog = load_catalog([tmp_path, Path(tmp_path.name), Path(".") / tmp_path.name / "."])
    assert catalog.ids.count("team-thing") == 1


def test_a_team_signature_directory_adds_signatures(tmp_path):
    write(tmp_path, "team-thing", GOOD.replace("id: recompute-cpu-offload", "id: team-thing"))
    catalog = load_catalog([tmp_path])
    assert "team-thing" in catalog.ids and "recompute-cpu-offload" in catalog.ids


def test_not_yaml_and_not_a_mapping(tmp_path):
    write(tmp_path, "a", "id: [unclosed")
    write(tmp_path, "b", "- just\n- a list\n")
    with pytest.raises(CatalogError) as caught:
        load_catalog([tmp_path], include_builtin=False)
    reasons = [p.reason for p in caught.value.problems]
    assert any("cannot parse" in r for r in reasons) and any("mapping" in r for r in reasons)


def test_predicate_errors_name_the_field(tmp_path):
    write(
        tmp_path,
        "bad-pred",
        GOOD.replace("id: recompute-cpu-offload", "id: bad-pred").replace(
            "{key: model.cpu_offloading, eq: true}", "{key: model.cpu_offloading, eq: true, gt: 1}"
        ),
    )
    with pytest.raises(CatalogError, match="exactly one operator"):
        load_catalog([tmp_path], include_builtin=False)


def test_hostile_signature_files_are_problems_not_crashes_or_hangs(tmp_path):
    import os

    from offloaddoctor.api import load_catalog
    from offloaddoctor.catalog.loader import CatalogError

    (tmp_path / "deep.yaml").write_text("- " * 50_000)
    os.mkfifo(tmp_path / "pipe.yaml")
    (tmp_path / "huge.yaml").write_text("a: " + "x" * (300 * 1024))
    with pytest.raises(CatalogError) as raised:
        load_catalog([tmp_path])
    message = str(raised.value)
    assert "deep.yaml: nested deeper than 64 levels" in message
    assert "pipe.yaml: not a regular file" in message
    assert "huge.yaml: larger than 256 KiB" in message


def test_fix_tried_is_a_list_of_sentences(tmp_path):
    write(
        tmp_path,
        "tried",
        re.sub(r"\n  tried:\n(    - .*\n)+", "\n  tried: a run\n", GOOD).replace(
            "id: recompute-cpu-offload", "id: tried"
        ),
    )
    with pytest.raises(CatalogError, match=r"fix\.tried.*must be a list of sentences"):
        load_catalog([tmp_path], include_builtin=False)


def test_every_run_a_fix_was_tried_on_names_fixtures_that_are_there(catalog):
    """`fix.tried` (shown on the signature's page) says where the printed fix ran; each sentence names the runs'
    recorded logs, so a claim without its evidence in the repository fails here."""
    root = Path(__file__).resolve().parents[2]
    tried = [(s.id, run) for s in catalog.signatures for run in s.fix.tried]
    assert len(tried) >= 10
    for signature, run in tried:
        named = re.findall(r"fixtures/[\w./-]+\.log(?:\.gz)?", run)
        assert len(named) >= 2, (signature, run)  # the failing run and the run of the fix
        assert all((root / path).is_file() for path in named), (signature, run)


@pytest.mark.parametrize(
    ("printed", "operand", "lower"),
    [
        ("2.11.0+cu130", "2.11", False),
        ("2.11.0a0+gitabcdef", "2.11", False),
        ("2.9.1", "2.11", True),
        ("0.16.1", "0.19", True),
        ("0.19.0rc1", "0.19.0", False),
        ("1.10", "1.9", False),  # numbers, not text: 10 > 9
    ],
)
def test_releases_compare_by_their_numbers(printed, operand, lower):
    from offloaddoctor.catalog.predicates import evaluate, parse_predicate

    def leaf(op):
        return parse_predicate({"key": "runtime.torch_version", op: operand}, "t")

    assert evaluate(leaf("version_lt"), lambda kind, name: printed) is lower
    assert evaluate(leaf("version_ge"), lambda kind, name: printed) is not lower


def test_a_release_that_is_not_one_is_unknown_and_an_operand_that_is_not_one_is_refused():
    from offloaddoctor.catalog.predicates import PredicateError, evaluate, parse_predicate

    leaf = parse_predicate({"key": "runtime.torch_version", "version_lt": "2.11"}, "t")
    assert evaluate(leaf, lambda kind, name: "nightly") is None
    with pytest.raises(PredicateError, match="expected a release"):
        parse_predicate({"key": "runtime.torch_version", "version_lt": "latest"}, "t")


@pytest.mark.parametrize(
    ("instead", "error"),
    [
        ("  instead: a line\n", r"fix\.instead.*must be a list"),
        ("  instead:\n    - {note: no condition}\n", r"fix\.instead\[0\].*`when`"),
        (
            "  instead:\n    - {when: {key: model.nope, eq: 1}, note: n}\n",
            r"fix\.instead\[0\]\.when.*unknown config key",
        ),
        ("  instead:\n    - {when: {key: model.num_layers}, note: n}\n", r"fix\.instead\[0\]\.when"),
        ("  instead:\n    - {when: {key: model.num_layers, eq: 1}, note: n, overrides: line}\n", r"overrides.*list"),
    ],
)
def test_fix_instead_is_a_list_of_conditions_with_a_note_and_lines(tmp_path, instead, error):
    text = GOOD.replace("id: recompute-cpu-offload", "id: instead").replace("\nfix:\n", f"\nfix:\n{instead}")
    write(tmp_path, "instead", text)
    with pytest.raises(CatalogError, match=error):
        load_catalog([tmp_path], include_builtin=False)


def test_a_fix_instead_replaces_the_lines_and_the_summary_where_its_condition_holds(tmp_path):
    from offloaddoctor.api import diagnose_text

    instead = (
        "  instead:\n    - {when: {key: model.transformer_impl, eq: local}, note: The other way., "
        "overrides: [model.cpu_offloading=False]}\n"
    )
    write(tmp_path, "recompute-cpu-offload", GOOD.replace("\nfix:\n", f"\nfix:\n{instead}"))
    catalog = load_catalog([tmp_path], include_builtin=False)
    log = "ValueError: CPU offloading does not work when activation recomputation is enabled"
    config = {"model.cpu_offloading": True, "model.recompute_granularity": "full"}
    [plain] = diagnose_text(log, config, catalog=catalog).findings
    [local] = diagnose_text(log, {**config, "model.transformer_impl": "local"}, catalog=catalog).findings
    assert plain.overrides == ["model.recompute_granularity=null"] and plain.fix_sentences[-1].startswith("Turn")
    assert local.overrides == ["model.cpu_offloading=False"] and local.fix_sentences == ["The other way."]
