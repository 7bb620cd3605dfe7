"""The parsed-catalogue cache: same catalogue as a fresh parse, keyed by content, never trusted blindly."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from offloaddoctor.catalog import loader
from offloaddoctor.api import load_catalog
from offloaddoctor.catalog.loader import CatalogError, builtin_signature_dir


class NothingKept(dict):
    """The process's memo of built catalogues, keeping nothing: each load goes to the disk cache."""

    def __setitem__(self, key, value) -> None:
        pass


@pytest.fixture(autouse=True)
def nothing_kept(monkeypatch):
    monkeypatch.setattr(loader, "_BUILT", NothingKept())


@pytest.fixture
def cache(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("OFFLOADDOCTOR_CACHE_DIR", str(directory))
    monkeypatch.delenv("OFFLOADDOCTOR_NO_CACHE", raising=False)
    return directory


def test_a_process_builds_a_catalogue_once_and_again_when_a_file_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(loader, "_BUILT", {})
    team = tmp_path / "team"
    shutil.copytree(builtin_signature_dir(), team)
    first = load_catalog([team], include_builtin=False)
    with monkeypatch.context() as patched:
        _no_yaml(patched)
        patched.setattr(loader, "read_cached", lambda *args: pytest.fail("read the disk cache"))
        assert load_catalog([team], include_builtin=False) is first
    target = team / "oom-capacity.yaml"
    target.write_text(target.read_text().replace("title: ", "title: Edited ", 1))
    assert load_catalog([team], include_builtin=False).get("oom-capacity").title.startswith("Edited ")


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
    assert [s.id for s in cached.signatures if s.match and any(p.search(line) for p in s.match.patterns)] == [
        s.id for s in fresh.signatures if s.match and any(p.search(line) for p in s.match.patterns)
    ]


def test_an_edited_signature_file_is_parsed_again(cache, tmp_path):
    team = tmp_path / "team"
    shutil.copytree(builtin_signature_dir(), team)
    load_catalog([team], include_builtin=False)
    target = team / "oom-capacity.yaml"
    target.write_text(target.read_text().replace("title: ", "title: Edited ", 1))
    assert load_catalog([team], include_builtin=False).get("oom-capacity").title.startswith("Edited ")
    assert len(list(cache.glob("catalog-*.json"))) == 2


def stored_entry(cache):
    (stored,) = cache.glob("catalog-*.json")
    header, body = stored.read_bytes().split(b"\n", 1)
    return stored, json.loads(header), json.loads(body)


def rewrite_entry(stored, header, files, checksum_too: bool) -> None:
    from offloaddoctor.catalog.cache import _checksum

    body = json.dumps(files, ensure_ascii=False).encode()
    if checksum_too:  # a deliberate edit that keeps the entry self-consistent
        header = {**header, "check": _checksum(body)}
    stored.write_bytes(json.dumps(header).encode() + b"\n" + body)


def test_a_corrupt_or_foreign_cache_file_is_a_miss(cache):
    fresh = load_catalog()
    stored, header, _files = stored_entry(cache)
    foreign = json.dumps({**header, "key": "other"}) + "\n[]"
    for damage in ("{not json", foreign, json.dumps([1, 2]), "", json.dumps(header) + "\n{not json"):
        stored.write_text(damage)
        assert load_catalog() == fresh
    assert stored_entry(cache)[2]  # rewritten whole


def test_an_edited_entry_is_a_miss_even_with_the_same_key(cache):
    """Key covers the signature files; the checksum in the header covers the entry's own data."""
    fresh = load_catalog()
    stored, header, files = stored_entry(cache)
    oom = next(f for f in files if f["id"] == "oom-capacity")
    oom["match"]["patterns"] = ["(a+)+b"]
    rewrite_entry(stored, header, files, checksum_too=False)
    assert load_catalog() == fresh


def test_cached_data_that_does_not_validate_falls_back_to_the_yaml(cache):
    fresh = load_catalog()
    stored, header, files = stored_entry(cache)
    files[0]["severity"] = "catastrophic"
    rewrite_entry(stored, header, files, checksum_too=True)
    assert load_catalog() == fresh  # not an error blaming an intact signature file
    assert stored_entry(cache)[2][0]["severity"] != "catastrophic"  # and the entry is written again


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


@pytest.mark.parametrize("variable", ["HOME", "XDG_CACHE_HOME"])
def test_the_cache_never_creates_a_home_directory(tmp_path, monkeypatch, variable):
    monkeypatch.delenv("OFFLOADDOCTOR_CACHE_DIR")
    monkeypatch.delenv("OFFLOADDOCTOR_NO_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    nowhere = tmp_path / "no-such-home"
    monkeypatch.setenv(variable, str(nowhere / "cache" if variable == "XDG_CACHE_HOME" else nowhere))
    assert load_catalog().get("oom-capacity") is not None
    assert not nowhere.exists()


def test_the_cache_creates_dot_cache_inside_an_existing_home(tmp_path, monkeypatch):
    monkeypatch.delenv("OFFLOADDOCTOR_CACHE_DIR")
    monkeypatch.delenv("OFFLOADDOCTOR_NO_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    load_catalog()
    assert list((tmp_path / ".cache" / "offloaddoctor").glob("catalog-*.json"))


def test_a_configured_cache_directory_is_made_only_where_its_parent_exists(tmp_path, monkeypatch):
    monkeypatch.delenv("OFFLOADDOCTOR_NO_CACHE", raising=False)
    monkeypatch.setenv("OFFLOADDOCTOR_CACHE_DIR", str(tmp_path / "missing" / "cache"))
    load_catalog()
    assert not (tmp_path / "missing").exists()
    monkeypatch.setenv("OFFLOADDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    load_catalog()
    assert list((tmp_path / "cache").glob("catalog-*.json"))


class Blocked(BaseException):
    """Not an OSError (TimeoutError is one): the cache must not be able to take it for a miss."""


def _refuse_to_block(signum, frame):
    raise Blocked("the cache read blocked")


@pytest.mark.parametrize("replacement", ["fifo", "link-to-dev-zero", "link-to-a-valid-entry", "too-large"])
def test_an_entry_replaced_by_something_other_than_a_small_regular_file_is_a_miss(
    cache, tmp_path, monkeypatch, replacement
):
    """Issue 27 point 11: a FIFO in an entry's place hung the load forever; a link to /dev/zero was read
    until the kernel killed the process (24 GB)."""
    import os
    import signal

    from offloaddoctor.catalog import cache as catalog_cache

    fresh = load_catalog()
    stored, _header, _files = stored_entry(cache)
    valid = tmp_path / "elsewhere.json"
    shutil.copyfile(stored, valid)
    stored.unlink()
    if replacement == "fifo":
        os.mkfifo(stored)
    elif replacement == "link-to-dev-zero":
        stored.symlink_to("/dev/zero")
    elif replacement == "link-to-a-valid-entry":  # whoever can plant a link chooses what it points at
        stored.symlink_to(valid)
    else:
        shutil.copyfile(valid, stored)
        monkeypatch.setattr(catalog_cache, "MAX_ENTRY_BYTES", stored.stat().st_size - 1)
    _no_yaml_calls = []
    real_parse = loader._parse_file
    monkeypatch.setattr(loader, "_parse_file", lambda *a, **k: _no_yaml_calls.append(1) or real_parse(*a, **k))
    previous = signal.signal(signal.SIGALRM, _refuse_to_block)
    signal.setitimer(signal.ITIMER_REAL, 10)
    try:
        assert load_catalog() == fresh
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert _no_yaml_calls  # a miss: the catalogue came from its YAML
    assert stored.is_file() and not stored.is_symlink()  # and the entry is a regular file again


def test_a_device_is_never_read_as_an_entry():
    from offloaddoctor.catalog.cache import _read_entry

    assert _read_entry(Path("/dev/zero")) is None
