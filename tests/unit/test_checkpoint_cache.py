"""The checkpoint cache: one writer at a time, nothing half-written left behind, tied Llama embeddings accepted."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from rlhf_exp.checkpoints.checks import check_checkpoint
from rlhf_exp.checkpoints.generate import TMP_SUFFIX, generation_lock, preset_dir, resolve_checkpoint
from rlhf_exp.config.errors import ConfigError


def test_jobs_generating_the_same_preset_at_once_write_it_once(tmp_path: Path) -> None:
    out = preset_dir("tiny", "causal_lm", "fp16", str(tmp_path))
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(resolve_checkpoint("tiny", None, "causal_lm", "fp16", str(tmp_path))))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [out] * 3 and not list(tmp_path.glob(f"*{TMP_SUFFIX}*"))
    check_checkpoint("model.actor.preset", out, "causal_lm")


def test_what_a_killed_writer_left_is_removed_before_the_next_write(tmp_path: Path) -> None:
    out = preset_dir("tiny", "value", "fp16", str(tmp_path))
    stale = out.with_name(out.name + f"{TMP_SUFFIX}99999")
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"half")
    out.mkdir()  # a dir without the complete marker: never trusted
    resolve_checkpoint("tiny", None, "value", "fp16", str(tmp_path))
    assert not stale.exists() and (out / ".complete").exists()


def test_a_cache_that_cannot_be_created_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match=r"^model\.cache_dir: cannot use .*a-file/cache: Not a directory"):
        with generation_lock(blocker / "cache"):
            pass


def test_a_llama_with_tied_embeddings_is_accepted(tmp_path: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, vocab_size=128, tie_word_embeddings=True
    )
    LlamaForCausalLM(config).to(torch.float16).save_pretrained(tmp_path / "tied")
    check_checkpoint("model.actor.path", tmp_path / "tied", "causal_lm")
    check_checkpoint("model.critic.path", tmp_path / "tied", "value")
