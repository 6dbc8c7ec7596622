"""Uniform random numbers (`rand`, `rand_like`: dropout's masks) computed inside ember's
kernels from one seed drawn from torch's generator, as inductor does with Philox.

Through ATen, `rand_like` fills a tensor with a serial Mersenne twister (5% of a BERT
training step on one core), which the dropout kernel then reads back. Here each call
draws ONE 64-bit seed with `randint` (ATen, so `torch.manual_seed` reproduces a run and
the generator advances), and element i of the result is SplitMix64's output for
(seed, i): a counter-based generator, so every element is computed where it is used,
in parallel, fused into the consumer, and the backward may recompute a mask instead of
saving it.

    before: u = aten.rand_like(x)                                  (ATen, serial)
            mask = gt(u, 0.1)
    after:  seed = aten.randint(0, 2**62, [])                       (ATen, one number)
            i = arange(n0) * n1 + arange(n1)                      (linear index)
            z = mix(mix(i * GAMMA + seed))                          (SplitMix64)
            u = (z >>> 40) * 2**-24                                 (f32: 24 bits)
            mask = gt(u, 0.1)                                       (one fused kernel)

The values differ from eager's for the same seed (as dropout's already did) and have
the same distribution: uniform on [0, 1) on the dtype's grid (24 bits for f32, 8 for
bf16, 11 for f16, 53 for f64), so 1.0 is never produced. A non-contiguous `rand_like`
(a channels-last input) and an explicit generator keep ATen's op.
"""
import torch

aten = torch.ops.aten

_GAMMA = -0x61C8864680B583EB   # 0x9E3779B97F4A7C15 as int64: SplitMix64's increment
_MIX1 = -0x40A7B892E31B1A47    # 0xBF58476D1CE4E5B9
_MIX2 = -0x6B2FB644ECCEEE15    # 0x94D049BB133111EB
_BITS = {torch.float32: 24, torch.float64: 53, torch.bfloat16: 8, torch.float16: 11}


def _shift_right_logical(z, k):
    """z >>> k on int64 (torch's >> is arithmetic: clear the sign's copies)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def _linear_index(shape, device):
    """Row-major element numbers of `shape`, as a sum of broadcast per-dim aranges (each
    a loop index in the fused kernel, never a stored tensor)."""
    index = torch.zeros((), dtype=torch.int64, device=device)
    stride = 1
    for d in reversed(range(len(shape))):
        step = torch.arange(shape[d], dtype=torch.int64, device=device) * stride
        index = index + step.view([-1] + [1] * (len(shape) - 1 - d))
        stride = stride * shape[d]
    return index


def _splitmix64(index, seed):
    z = index * _GAMMA + seed
    z = (z ^ _shift_right_logical(z, 30)) * _MIX1
    z = (z ^ _shift_right_logical(z, 27)) * _MIX2
    return z ^ _shift_right_logical(z, 31)


def uniform(shape, dtype, device):
    bits = _BITS[dtype]
    seed = torch.randint(0, 1 << 62, (), dtype=torch.int64, device=device)
    z = _splitmix64(_linear_index(shape, device), seed)
    compute = torch.float64 if dtype == torch.float64 else torch.float32
    # the top `bits` bits, exact in the dtype, times 2**-bits: [0, 1 - 2**-bits]
    return (_shift_right_logical(z, 64 - bits).to(compute) * 2.0 ** -bits).to(dtype)


def _rand(size, dtype=None, layout=None, device=None, pin_memory=None):
    dtype = dtype or torch.get_default_dtype()
    if dtype not in _BITS or layout not in (None, torch.strided) or pin_memory:
        return NotImplemented
    return uniform(list(size), dtype, device)  # None: torch's default device


def _rand_like(x, dtype=None, layout=None, device=None, pin_memory=None,
               memory_format=None):
    dtype = dtype or x.dtype
    contiguous = memory_format in (None, torch.preserve_format, torch.contiguous_format)
    if (dtype not in _BITS or layout not in (None, torch.strided) or pin_memory
            or not contiguous or not x.is_contiguous()):
        return NotImplemented
    return uniform(list(x.shape), dtype, device or x.device)


RANDOM_DECOMPOSITIONS = {aten.rand.default: _rand, aten.rand_like.default: _rand_like}
