"""`estimate` on Megatron-Bridge configs: the sequence length and vocabulary where Bridge keeps them, or from the
run's log with `--log` (issue 26, point 6)."""

from __future__ import annotations

import textwrap

from offloaddoctor.cli import app
from offloaddoctor.config.loading import build_store, load_log_config
from offloaddoctor.config.yaml_config import parse_yaml_config

from tests.conftest import FIXTURES, RUNNER

BRIDGE_CASE = FIXTURES / "oom-partial-optimizer-offload-bridge"


def test_the_bridge_example_config_takes_what_it_lacks_from_the_runs_log():
    config, log = str(BRIDGE_CASE / "run_config.yaml"), str(BRIDGE_CASE / "job.log")
    alone = RUNNER.invoke(app, ["estimate", config, "--gpu", "H100-80GB"])
    assert alone.exit_code == 2
    assert alone.stderr.count("\n") == 1 and "model.seq_length" in alone.stderr and "--log LOG" in alone.stderr

    result = RUNNER.invoke(app, ["estimate", config, "--log", log, "--gpu", "H100-80GB"])
    assert result.exit_code == 0, result.output
    assert "Verdict         fits the GPU" in result.stdout
    inputs = result.stdout.split("Inputs:")[1]
    assert "model.seq_length = 1024 (" in inputs and "job.log:722 (arguments block))" in inputs
    assert "model.vocab_size = 32000 (" in inputs and "job.log:830 (arguments block))" in inputs
    # the config still wins where it has the value
    assert "optimizer.optimizer_offload_fraction = 0.5 (" in inputs and "run_config.yaml:348)" in inputs


def _resolved(text: str, key: str):
    return build_store(parse_yaml_config(textwrap.dedent(text), "run_config.yaml")).resolve(key)


def test_a_bridge_yaml_gives_the_dataset_sequence_length_and_the_tokenizer_vocabulary():
    # Bridge 0.3.1's to_yaml: sections in alphabetical order, `model.vocab_size: null` until setup fills it in
    text = """\
        dataset:
          _target_: megatron.bridge.training.config.GPTDatasetConfig
          sequence_length: 4096
        model:
          num_layers: 2
          vocab_size: null
        tokenizer:
          tokenizer_type: NullTokenizer
          vocab_size: 32000
        """
    seq, vocab = _resolved(text, "model.seq_length"), _resolved(text, "model.vocab_size")
    assert (seq.value, seq.source.line) == (4096, 3)
    assert (vocab.value, vocab.source.line) == (32000, 9)


def test_a_finetuning_dataset_spells_it_seq_length():
    text = """\
        dataset:
          _target_: megatron.bridge.training.config.FinetuningDatasetConfig
          seq_length: 2048
        model:
          num_layers: 2
        """
    assert _resolved(text, "model.seq_length").value == 2048


def test_the_model_sections_own_value_wins_over_the_tokenizers():
    # setup.py `_validate_and_set_vocab_size`: a model vocab_size that is set is used (the tokenizer's is smaller)
    text = """\
        dataset:
          sequence_length: 4096
        model:
          seq_length: 4096
          vocab_size: 50304
        tokenizer:
          vocab_size: 50257
        """
    vocab, seq = _resolved(text, "model.vocab_size"), _resolved(text, "model.seq_length")
    assert (vocab.value, vocab.source.line) == (50304, 5)
    assert seq.source.line == 4


def test_bridges_startup_summary_keeps_the_model_vocabulary_over_the_tokenizers(tmp_path):
    log = tmp_path / "job.log"
    log.write_text(
        "=" * 70
        + "\nConfiguration Summary (Non-Default Values vs Megatron Core)\n"
        + "=" * 70
        + "\n\n[model] Non-default values (vs Mcore TransformerConfig):\n"
        "  num_layers: 2  (Mcore default: 0)\n"
        "  vocab_size: 50304\n\n"  # a provider field TransformerConfig lacks: printed without a default
        "[train]:\n  micro_batch_size: 1\n\n"
        "[tokenizer]:\n  tokenizer_type: 'NullTokenizer'\n  vocab_size: 50257\n\n" + "=" * 70 + "\n"
    )
    store = build_store(load_log_config(str(log)))
    assert store.resolve("model.vocab_size").value == 50304
