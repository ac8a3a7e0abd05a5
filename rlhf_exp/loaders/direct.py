"""direct: the weights go straight to the rank's device. On a GPU, by default (loader.fast_read), through
checkpoints/fast_read.py: parallel reads into pinned buffers and host-to-device copies, with no mapping, so no
file page enters the rank's RSS; loader.fast_read=false uses from_pretrained(device_map=device) instead (the
library's path, kept for comparison: python -m bench run time-to-engine). Given a twin (loaders/twin.py: ref after the actor,
reward after the critic), `direct` copies the twin's weights on the GPU instead of reading. On CPU ranks the host is
the device and `direct` does what `low_mem` does (the shared, lazily read mapping keeps CPU ranks' memory low):
no fp32 copy and no private read of the whole file.
"""

from __future__ import annotations

from torch import nn

from rlhf_exp.checkpoints.fast_read import read_safetensors
from rlhf_exp.checkpoints.files import weight_files
from rlhf_exp.checkpoints.meta import is_lora_weight, model_class
from rlhf_exp.loaders.base import LoadRequest, model_of


def load_fast(request: LoadRequest) -> nn.Module:
    """The weights read by fast_read onto the rank's device."""
    files = weight_files(request.checkpoint)
    return model_of(request, read_safetensors(files, request.device, request.dtype, request.read_threads, request.chunk_bytes))


def copy_twin(request: LoadRequest, twin: nn.Module) -> nn.Module:
    """The weights device copies of `twin`'s base weights (LoRA adapters skipped, peft's `base_layer` names mapped
    back to the model's)."""
    state = {
        name.replace(".base_layer", ""): tensor.detach().to(request.dtype if tensor.is_floating_point() else None, copy=True)
        for name, tensor in twin.state_dict().items()
        if not is_lora_weight(name)
    }
    return model_of(request, state)


def load_direct(request: LoadRequest) -> nn.Module:
    if request.twin is not None:
        return copy_twin(request, request.twin)
    files = weight_files(request.checkpoint)
    if request.device.type == "cuda" and request.fast_read and all(f.suffix == ".safetensors" for f in files):
        return load_fast(request)
    return model_class(request.kind).from_pretrained(request.checkpoint, dtype=request.dtype, device_map={"": request.device})
