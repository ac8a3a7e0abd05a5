"""Where a checkpoint named by the user lives: a local directory, or a Hugging Face hub id resolved from the
local cache (HF_HUB_CACHE / HF_HOME respected), offline: rlhf_exp never downloads at run time."""

from __future__ import annotations

import re
from pathlib import Path

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+(@[\w./-]+)?")  # org/name, optionally @revision


def is_hub_id(path: str) -> bool:
    return HUB_ID.fullmatch(path) is not None and not Path(path).expanduser().exists()


def hub_cache_dir() -> str:
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def from_hub_cache(hub_id: str) -> Path | None:
    """The cached snapshot of `org/name[@revision]`, or None when it was never downloaded here."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    repo, _, revision = hub_id.partition("@")
    try:
        return Path(snapshot_download(repo, revision=revision or None, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None


def locate(path: str) -> Path:
    """The checkpoint directory for `model.<role>.path` (it may not exist: the checks say so)."""
    if is_hub_id(path):
        cached = from_hub_cache(path)
        if cached is not None:
            return cached
    return Path(path).expanduser().resolve()


def missing_message(path: str) -> str:
    """Why `path` names no checkpoint, as the tail of a one-line error."""
    if is_hub_id(path):
        return (
            f"{path} is not a checkpoint directory, nor a model in the local Hugging Face cache ({hub_cache_dir()}); "
            f"valid: a directory with config.json, or a hub id downloaded beforehand (huggingface-cli download {path})"
        )
    return f"{path} is not a checkpoint directory (no config.json)"
