"""Generated checkpoints are real HF checkpoints, and naive loading reproduces their weights exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoModelForCausalLM

from rlhf_exp.checkpoints.files import checkpoint_bytes, weight_files
from rlhf_exp.checkpoints.generate import resolve_checkpoint
from rlhf_exp.loaders.base import LoadRequest
from rlhf_exp.loaders.registry import get_spec
from rlhf_exp.rank.reward_model import RewardModel, load_value_head


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    cache = str(tmp_path_factory.mktemp("ckpt"))
    return {
        "causal_lm": resolve_checkpoint("tiny", None, "causal_lm", "fp16", cache),
        "value": resolve_checkpoint("tiny", None, "value", "fp16", cache),
    }


def file_weights(ckpt: Path) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for f in weight_files(ckpt):
        out.update(load_file(str(f)))
    return out


def request(ckpt: Path, kind: str) -> LoadRequest:
    return LoadRequest(role="actor", kind=kind, checkpoint=ckpt, dtype=torch.float32, device=torch.device("cpu"), ds_config={})


def test_generated_checkpoint_loads_with_from_pretrained(checkpoints: dict[str, Path]) -> None:
    model = AutoModelForCausalLM.from_pretrained(checkpoints["causal_lm"])
    assert type(model).__name__ == "LlamaForCausalLM"
    assert checkpoint_bytes(checkpoints["causal_lm"]) > 0
    assert type(AutoModel.from_pretrained(checkpoints["value"])).__name__ == "LlamaModel"


@pytest.mark.parametrize("kind", ["causal_lm", "value"])
def test_naive_builds_fp32_with_checkpoint_weights_exactly(checkpoints: dict[str, Path], kind: str) -> None:
    model = get_spec("naive").load_function()(request(checkpoints[kind], kind))
    state = model.state_dict()
    on_disk = file_weights(checkpoints[kind])
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    for name, tensor in on_disk.items():
        assert torch.equal(state[name], tensor.float()), name


def test_value_head_comes_from_the_checkpoint(checkpoints: dict[str, Path]) -> None:
    model = RewardModel(get_spec("naive").load_function()(request(checkpoints["value"], "value")))
    assert load_value_head(model, checkpoints["value"])
    expected = load_file(str(checkpoints["value"] / "value_head.safetensors"))["v_head.weight"]
    assert torch.equal(model.v_head.weight, expected.float())
    values = model.forward_value(torch.tensor([[1, 5, 9]]))
    assert values.shape == (1, 3) and torch.isfinite(values).all()


def test_generation_is_deterministic(tmp_path: Path, checkpoints: dict[str, Path]) -> None:
    again = resolve_checkpoint("tiny", None, "causal_lm", "fp16", str(tmp_path))
    a, b = file_weights(again), file_weights(checkpoints["causal_lm"])
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("preset", ["tiny", "tiny-qwen2", "tiny-gpt_neox"])  # untied, tied lm_head, renamed keys
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])  # converted from the fp16 file, and as stored
def test_fast_read_gives_from_pretrained_weights_bit_for_bit(tmp_path_factory, preset: str, dtype: torch.dtype) -> None:
    from rlhf_exp.loaders.direct import load_fast
    from rlhf_exp.loaders.low_mem import load_low_mem

    ckpt = resolve_checkpoint(preset, None, "causal_lm", "fp16", str(tmp_path_factory.getbasetemp() / "fast"))
    # a 1000-byte chunk splits every weight across chunks and threads
    req = LoadRequest("actor", "causal_lm", ckpt, dtype, torch.device("cpu"), {}, read_threads=3, chunk_bytes=1000)
    fast, library = load_fast(req), load_low_mem(req)
    a, b = fast.state_dict(), library.state_dict()
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype and torch.equal(a[name], b[name]), name
    assert not fast.training
    if fast.config.tie_word_embeddings:
        assert fast.get_output_embeddings().weight is fast.get_input_embeddings().weight


def test_naive_zero_fill_keeps_random_init_weights(checkpoints: dict[str, Path]) -> None:
    """Skipping the random init changes nothing the checkpoint fills (python -m bench run naive-init: time and VmHWM)."""
    from rlhf_exp.loaders.naive import load_naive

    req = request(checkpoints["causal_lm"], "causal_lm")
    a, b = load_naive(req).state_dict(), load_naive(req, random_init=True).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("preset", ["tiny", "tiny-qwen2"])  # untied and tied lm_head
@pytest.mark.parametrize("kind", ["causal_lm", "value"])
def test_copy_twin_gives_the_checkpoint_weights_from_a_lora_engine_model(tmp_path_factory, preset: str, kind: str) -> None:
    """ref/reward copied from actor/critic (LoRA injected, the critic inside RewardModel) equal a fresh read."""
    from rlhf_exp.config.schema import LoraSettings
    from rlhf_exp.loaders.direct import copy_twin
    from rlhf_exp.loaders.low_mem import load_low_mem
    from rlhf_exp.rank.engine import base_model
    from rlhf_exp.rank.lora import apply_lora

    ckpt = resolve_checkpoint(preset, None, kind, "fp16", str(tmp_path_factory.getbasetemp() / "twin"))
    req = LoadRequest("ref", kind, ckpt, torch.bfloat16, torch.device("cpu"), {})
    source = load_low_mem(req)
    source = RewardModel(source) if kind == "value" else source
    lora = LoraSettings(enabled=True, r=4, alpha=8, dropout=0.0, only_optimize_lora=True)
    source = apply_lora(source, lora, torch.device("cpu"), always_train=("v_head",))
    copied, read = copy_twin(req, base_model(source)).state_dict(), load_low_mem(req).state_dict()
    assert copied.keys() == read.keys()
    for name in read:
        assert copied[name].dtype == read[name].dtype and torch.equal(copied[name], read[name]), name
    twin_weights = {t.data_ptr() for t in base_model(source).state_dict().values()}
    assert not twin_weights & {t.data_ptr() for t in copied.values()}  # copies, not the twin's own tensors


@pytest.mark.parametrize("threads", [1, 3, 16])
def test_naives_private_read_holds_what_safetensors_load_of_the_bytes_holds(tmp_path: Path, threads: int) -> None:
    """naive's parallel read gives the tensors `safetensors.torch.load(read_bytes())` gives: dtypes, shapes, bits,
    each in its own storage; also for a tensor at an offset its dtype does not divide, and across chunk borders."""
    from safetensors.torch import load, save_file

    from rlhf_exp.loaders import state_dict

    tensors = {
        "byte": torch.arange(3, dtype=torch.uint8),  # puts the next tensors at odd offsets
        "half": torch.randn(1000, 37, dtype=torch.float16),
        "long": torch.arange(11, dtype=torch.int64),
        "bf16": torch.randn(4097, dtype=torch.bfloat16),
        "f32": torch.randn(5, 7),
    }
    path = tmp_path / "model.safetensors"
    save_file(tensors, path)
    expected = load(path.read_bytes())
    chunk = state_dict.READ_CHUNK
    state_dict.READ_CHUNK = 1000  # many chunks, borders inside tensors
    try:
        got = state_dict.read_file_private(path, threads)
    finally:
        state_dict.READ_CHUNK = chunk
    assert got.keys() == expected.keys()
    for name, tensor in expected.items():
        assert got[name].dtype == tensor.dtype and got[name].shape == tensor.shape and torch.equal(got[name], tensor)
    assert len({t.untyped_storage().data_ptr() for t in got.values()}) == len(got)  # private storages, not views


def test_adapters_moved_in_one_copy_equal_peft_moving_each(checkpoints: dict[str, Path]) -> None:
    """apply_lora's batched move (base weights on the host, adapters made on the rank's device) gives each adapter
    weight the device, dtype, values and own storage that peft's per-adapter move gives: here on a bf16 base, so
    the fp32 adapters are cast, as peft casts them."""
    from peft import LoraConfig, inject_adapter_in_model

    from rlhf_exp.checkpoints.meta import lora_targets
    from rlhf_exp.rank.lora import move_adapters_to_base, peft_move_deferred

    def lora_model(batched: bool) -> torch.nn.Module:
        model = AutoModelForCausalLM.from_pretrained(checkpoints["causal_lm"], dtype=torch.bfloat16)
        config = LoraConfig(r=4, lora_alpha=8, target_modules=lora_targets(model, "auto"))
        torch.manual_seed(0)
        if not batched:
            return inject_adapter_in_model(config, model)
        with peft_move_deferred():
            model = inject_adapter_in_model(config, model)
        assert {p.dtype for n, p in model.named_parameters() if "lora_" in n} == {torch.float32}  # not moved yet
        move_adapters_to_base(model)
        return model

    peft_moved, batched = (dict(lora_model(b).named_parameters()) for b in (False, True))
    adapters = [n for n in peft_moved if "lora_" in n]
    assert adapters and peft_moved.keys() == batched.keys()
    for name in adapters:
        a, b = peft_moved[name], batched[name]
        assert a.dtype == b.dtype == torch.bfloat16 and a.device == b.device and torch.equal(a, b), name
    assert len({batched[n].untyped_storage().data_ptr() for n in adapters}) == len(adapters)
