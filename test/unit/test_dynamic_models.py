"""Dynamic shapes on real models: one dynamic graph for every batch size and sequence
length, and HF generation (a growing KV cache) with tokens identical to eager."""
import pytest
import torch

import ember
from ember.models import _ids, build, first_tensor

transformers = pytest.importorskip("transformers")

# (batch, sequence length): the second call changes both, so automatic dynamic makes
# both symbolic at once; then a few dozen more combinations reuse that graph.
SIZES = [(1, 8), (2, 16)] + [(b, s) for b in (3, 5, 8, 16) for s in (9, 32, 64, 100, 256)
                             if b * s <= 2048]


def _dynamo_graphs():
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_sizes_compile_at_most_twice(name):
    torch.manual_seed(0)
    model, _ = build(name)
    torch._dynamo.reset()
    from torch._dynamo.utils import counters
    counters.clear()
    compiled = ember.compile(model, options={"fallback": False})
    with torch.no_grad():
        for batch, seq in SIZES:
            ids = _ids(batch, seq, 100)
            torch.testing.assert_close(first_tensor(compiled(ids)), first_tensor(model(ids)),
                                       rtol=1e-4, atol=1e-4)
    assert len(SIZES) >= 20
    assert _dynamo_graphs() <= 2  # the first, static size; then one dynamic graph


def _small_lm(name):
    t = transformers
    if name == "gpt2":
        cfg = t.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=128)
        model = t.GPT2LMHeadModel(cfg)
    else:
        cfg = t.LlamaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                            max_position_embeddings=128)
        model = t.LlamaForCausalLM(cfg)
    model.generation_config.pad_token_id = 0
    return model.eval()


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_generate_matches_eager(name):
    torch.manual_seed(0)
    model = _small_lm(name)
    ids = torch.randint(1, 100, (2, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = model.generate(ids, max_new_tokens=32, do_sample=False)
    torch._dynamo.reset()
    from torch._dynamo.utils import counters
    counters.clear()
    model.forward = ember.compile(model.forward, options={"fallback": False})
    with torch.no_grad():
        tokens = model.generate(ids, max_new_tokens=32, do_sample=False)
    assert torch.equal(tokens, expected)
    # prefill (static), the first step (static), then one dynamic graph for the rest
    assert _dynamo_graphs() <= 3
