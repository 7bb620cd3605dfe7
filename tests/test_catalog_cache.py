"""The parsed-catalogue cache: same catalogue as a fresh parse, keyed by content, never trusted blindly."""

from __future__ import annotations

import json
import shutil

import pytest

from offloaddoctor.catalog import loader
from offloaddoctor.api import load_catalog
from offloaddoctor.catalog.loader import CatalogError, builtin_signature_dir


@pytest.fixture
def cache(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("OFFLOADDOCTOR_CACHE_DIR", str(directory))
    monkeypatch.delenv("OFFLOADDOCTOR_NO_CACHE", raising=False)
    return directory


def _no_yaml(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("parsed YAML although the cache holds these bytes")

    monkeypatch.setattr(loader, "_parse_file", refuse)


def test_second_load_comes_from_the_cache_and_equals_a_fresh_parse(cache, monkeypatch):
    fresh = load_catalog()
    assert len(list(cache.glob("catalog-*.json"))) == 1
    _no_yaml(monkeypatch)
    cached = load_catalog()
    assert cached == fresh
    line = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."
    assert [s.id for s in cached.signatures if s.match and any(p.search(line) for p in s.match.patterns)] == \
           [s.id for s in fresh.signatures if s.match and any(p.search(line) for p in s.match.patterns)]


def test_an_edited_signature_file_is_parsed_again(cache, tmp_path):
    team = tmp_path / "team"
    shutil.copytree(builtin_signature_dir(), team)
    load_catalog([team], include_builtin=False)
    target = team / "oom-capacity.yaml"
    target.write_text(target.read_text().replace("title: ", "title: Edited ", 1))
    assert load_catalog([team], include_builtin=False).get("oom-capacity").title.startswith("Edited ")
    assert len(list(cache.glob("catalog-*.json"))) == 2


def test_a_corrupt_or_foreign_cache_file_is_a_miss(cache):
    fresh = load_catalog()
    (stored,) = cache.glob("catalog-*.json")
    for damage in ("{not json", json.dumps({"key": "other", "files": []}), json.dumps([1, 2]), ""):
        stored.write_text(damage)
        assert load_catalog() == fresh
    assert json.loads(stored.read_text())["files"]  # rewritten whole


def test_cached_data_is_still_validated(cache):
    load_catalog()
    (stored,) = cache.glob("catalog-*.json")
    payload = json.loads(stored.read_text())
    payload["files"][0]["severity"] = "catastrophic"
    stored.write_text(json.dumps(payload))
    with pytest.raises(CatalogError, match="severity: must be one of"):
        load_catalog()


def test_an_unwritable_cache_never_fails_a_load(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("OFFLOADDOCTOR_CACHE_DIR", str(blocker / "cache"))
    assert load_catalog().get("oom-capacity") is not None


def test_no_cache_when_turned_off_or_when_the_catalogue_has_problems(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("OFFLOADDOCTOR_NO_CACHE", "1")
    load_catalog()
    assert not cache.exists()
    monkeypatch.delenv("OFFLOADDOCTOR_NO_CACHE")
    team = tmp_path / "team"
    team.mkdir()
    (team / "broken.yaml").write_text("id: broken\n")
    with pytest.raises(CatalogError):
        load_catalog([team])
    assert not cache.exists()


def test_old_entries_are_pruned(cache, tmp_path, monkeypatch):
    monkeypatch.setattr("offloaddoctor.catalog.cache.KEEP", 2)
    team = tmp_path / "team"
    shutil.copytree(builtin_signature_dir(), team)
    target = team / "oom-capacity.yaml"
    original = target.read_text()
    for edit in range(4):
        target.write_text(original.replace("title: ", f"title: v{edit} ", 1))
        load_catalog([team], include_builtin=False)
    assert len(list(cache.glob("catalog-*.json"))) == 2
