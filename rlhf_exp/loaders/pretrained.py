"""low_mem and direct: transformers 5 from_pretrained with a dtype, the library's own low-memory path.

from_pretrained builds the model on the meta device and fills it from memory-mapped safetensors
straight in the target dtype, so no fp32 copy and no private read of the whole file exist.
`direct` also names the rank's device (device_map), so weights never rest on the host: on a GPU
rank they go from the mapped file to the GPU. On CPU ranks the host is the device and `direct`
does what `low_mem` does.
"""

from __future__ import annotations

from torch import nn

from rlhf_exp.loaders.base import LoadRequest, model_class


def load_low_mem(request: LoadRequest) -> nn.Module:
    return model_class(request).from_pretrained(request.checkpoint, dtype=request.dtype)


def load_direct(request: LoadRequest) -> nn.Module:
    return model_class(request).from_pretrained(request.checkpoint, dtype=request.dtype, device_map={"": request.device})
