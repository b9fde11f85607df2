"""DDP communication hooks with gyre's codecs (docs/pytorch.md), drop-in
replacements for ``torch.distributed.algorithms.ddp_comm_hooks``.

Stateless, in place of torch's ``fp16_compress_hook`` and
``bf16_compress_hook`` (the state is the process group, or None for the
default one)::

    model.register_comm_hook(None, gyre.torch.hooks.fp16_hook)
    model.register_comm_hook(None, gyre.torch.hooks.bf16_hook)
    model.register_comm_hook(None, gyre.torch.hooks.int8_hook)

With error feedback (the state keeps one compressor per gradient bucket)::

    model.register_comm_hook(gyre.torch.hooks.CompressionState("int8"), gyre.torch.hooks.compress_hook)
    model.register_comm_hook(gyre.torch.hooks.CompressionState("onebit"), gyre.torch.hooks.compress_hook)

The gradients travel encoded and are summed in float32 at each block's
owner, and the hook's result is the average, as DDP's own reduction is.
Unlike torch's fp16 hook, which casts the whole bucket to float16 before an
ordinary AllReduce (so every partial sum is rounded to float16), gyre's
codecs round only what goes on the wire.
"""

import torch.distributed as dist

from .._types import codec_code
from . import Compressor, ProcessGroupGyre


def _gyre_group(process_group):
    group = process_group if process_group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(group, ProcessGroupGyre):
        raise TypeError(f"gyre's comm hooks need a process group of backend 'gyre', not {type(group).__name__}")
    return group


def _bucket_result(fut):
    return fut.value()[0]


def _stateless(codec):
    code = codec_code(codec)

    def hook(process_group, bucket):
        group = _gyre_group(process_group)
        work = group.allreduce_codec(bucket.buffer(), code, True)
        return work.get_future().then(_bucket_result)

    # (not torch's names: DDP refuses a hook named bf16_compress_hook
    # unless the backend is NCCL)
    hook.__name__ = hook.__qualname__ = f"{codec}_hook"
    hook.__doc__ = f"DDP comm hook: the bucket averaged with {codec} on the wire (no state)."
    return hook


fp16_hook = _stateless("fp16")
bf16_hook = _stateless("bf16")
int8_hook = _stateless("int8")


class CompressionState:
    """A hook's state for codecs with error feedback: the codec, the group,
    and one compressor (gyre's residuals) per bucket, made on first use and
    made again when DDP rebuilds its buckets with other sizes."""

    def __init__(self, codec="onebit", process_group=None, error_feedback=True):
        self.codec = codec_code(codec)
        self.process_group = process_group
        self.error_feedback = error_feedback
        self._compressors = {}

    def compressor(self, index, tensor):
        c = self._compressors.get(index)
        if c is None or not c.fits(tensor):
            c = Compressor(_gyre_group(self.process_group), self.codec, tensor, self.error_feedback)
            self._compressors[index] = c
        return c

    def reset(self):
        """Forgets every residual (a restarted model)."""
        self._compressors.clear()


def compress_hook(state, bucket):
    """DDP comm hook: the bucket averaged through its compressor (the
    state's codec, with error feedback)."""
    tensor = bucket.buffer()
    work = state.compressor(bucket.index(), tensor).allreduce(tensor, True)
    return work.get_future().then(_bucket_result)


__all__ = ["CompressionState", "bf16_hook", "compress_hook", "fp16_hook", "int8_hook"]
