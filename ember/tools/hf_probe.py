"""Held-out Hugging Face architectures (none of them in ember/models.py), tried as a user.

    python -m ember.tools.hf_probe                      # all, fallback allowed
    python -m ember.tools.hf_probe --strict             # any fallback is a failure
    python -m ember.tools.hf_probe --models phi,hubert

Each model (small config, random weights) runs in its own process: under no_grad at
(batch 2, length 16), again at (3, 32) (automatic dynamic: the recompile is symbolic;
vision models change the batch only), then in grad mode, forward and backward of a fixed
random projection of the output, every parameter's gradient compared with eager's. A
line per model:
  OK       every output and gradient within 2e-3 of eager (relative to its largest
           value; a gradient that is zero in exact math, such as a key bias under
           softmax, is compared at 1e-3 of the largest gradient)
  WRONG    a result differs
  RAISED   ember raised where eager did not (with --strict: a fallback)
  CRASH    the process died or timed out
and the first line of each ember warning (ops that ran through ATen), or a note when no
graph reached an ember kernel at all.
"""
import sys
import time

from ember.tools.per_process import tool_main

TOLERANCE = 2e-3
# CNNs whose Hugging Face init (every conv and batch-norm weight drawn with std 0.02)
# makes activations vanish: their outputs were 0 (MobileViT), 1e-31 (MobileNetV1) and
# 5e-9 (LeViT), so ember and eager agreed trivially. They get the init a trained net's
# activations resemble (He-normal convs, 1/sqrt(fan-in) linears, unit batch norms).
_VANISHING_INIT = {"mobilevit", "mobilenet_v1", "levit"}


def _realistic_init(model):
    import math

    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):  # followed by ReLU-like activations
            torch.nn.init.normal_(m.weight, std=math.sqrt(2.0 / m.weight[0].numel()))
        elif isinstance(m, torch.nn.Linear):
            torch.nn.init.normal_(m.weight, std=math.sqrt(1.0 / m.weight.shape[1]))
        elif isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            torch.nn.init.ones_(m.weight)
            torch.nn.init.zeros_(m.bias)


def _configs():
    import transformers as t

    def text(cls, **kw):
        base = dict(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=128, max_position_embeddings=128)
        base.update(kw)
        return cls(**{k: v for k, v in base.items() if v is not None}), "text"

    def seq2seq(cls, **kw):
        return cls(vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=2,
                   encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                   decoder_ffn_dim=128, max_position_embeddings=128, **kw), "seq2seq"

    def vision(cls, kind, **kw):
        return cls(**kw), kind

    audio = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, conv_dim=(32, 32), conv_stride=(5, 2),
                 conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                 num_conv_pos_embedding_groups=4)
    vit = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
               intermediate_size=128, image_size=32, patch_size=8)
    return {
        "gpt_neo": lambda: (t.GPTNeoConfig(vocab_size=100, hidden_size=64, num_layers=2,
                                           num_heads=4, window_size=8,
                                           attention_types=[[["global", "local"], 1]],
                                           max_position_embeddings=128), "text"),
        "gptj": lambda: (t.GPTJConfig(vocab_size=100, n_embd=64, n_layer=2, n_head=4,
                                      rotary_dim=8, n_positions=128), "text"),
        "bloom": lambda: (t.BloomConfig(vocab_size=100, hidden_size=64, n_layer=2,
                                        n_head=4), "text"),
        "falcon": lambda: text(t.FalconConfig, intermediate_size=None,
                               max_position_embeddings=None),
        "phi": lambda: text(t.PhiConfig),
        "phi3": lambda: text(t.Phi3Config, pad_token_id=0),
        "qwen2": lambda: text(t.Qwen2Config, num_key_value_heads=2),
        "qwen3": lambda: text(t.Qwen3Config, num_key_value_heads=2, head_dim=16),
        "gemma": lambda: text(t.GemmaConfig, num_key_value_heads=1, head_dim=16),
        "gemma2": lambda: text(t.Gemma2Config, num_key_value_heads=2, head_dim=16,
                               sliding_window=8),
        "stablelm": lambda: text(t.StableLmConfig, num_key_value_heads=4),
        "gpt_neox": lambda: text(t.GPTNeoXConfig),
        "codegen": lambda: (t.CodeGenConfig(vocab_size=100, n_embd=64, n_layer=2, n_head=4,
                                            rotary_dim=8, n_positions=128, n_ctx=128), "text"),
        "deberta_v2": lambda: text(t.DebertaV2Config),
        "electra": lambda: text(t.ElectraConfig, embedding_size=32),
        "mpnet": lambda: text(t.MPNetConfig),
        "xlm_roberta": lambda: text(t.XLMRobertaConfig),
        "convbert": lambda: text(t.ConvBertConfig),
        "megatron_bert": lambda: text(t.MegatronBertConfig),
        "xglm": lambda: (t.XGLMConfig(vocab_size=100, d_model=64, num_layers=2,
                                      attention_heads=4, ffn_dim=128,
                                      max_position_embeddings=128), "text"),
        "biogpt": lambda: text(t.BioGptConfig),
        "clip_text": lambda: text(t.CLIPTextConfig, max_position_embeddings=None),
        "marian": lambda: seq2seq(t.MarianConfig, decoder_start_token_id=0, pad_token_id=1),
        "pegasus": lambda: seq2seq(t.PegasusConfig),
        "mbart": lambda: seq2seq(t.MBartConfig),
        "mt5": lambda: (t.MT5Config(vocab_size=100, d_model=64, d_kv=16, d_ff=128,
                                    num_layers=2, num_heads=4), "seq2seq"),
        "deit": lambda: vision(t.DeiTConfig, "image32", **vit),
        "beit": lambda: vision(t.BeitConfig, "image32", use_relative_position_bias=True,
                               **vit),
        "dinov2": lambda: vision(t.Dinov2Config, "image32", **vit),
        "clip_vision": lambda: vision(t.CLIPVisionConfig, "image32", **vit),
        "segformer": lambda: vision(t.SegformerConfig, "image64", num_encoder_blocks=2,
                                    depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                                    patch_sizes=[7, 3], strides=[4, 2],
                                    num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                                    decoder_hidden_size=32),
        "mobilevit": lambda: vision(t.MobileViTConfig, "image64", image_size=64,
                                    hidden_sizes=[32, 48, 64],
                                    neck_hidden_sizes=[8, 16, 24, 32, 48, 64, 80]),
        "convnextv2": lambda: vision(t.ConvNextV2Config, "image64",
                                     hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1]),
        "poolformer": lambda: vision(t.PoolFormerConfig, "image64",
                                     hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1]),
        "levit": lambda: vision(t.LevitConfig, "image64", image_size=64,
                                hidden_sizes=[32, 48, 64], num_attention_heads=[1, 2, 2],
                                depths=[1, 1, 1], key_dim=[8, 8, 8]),
        "mobilenet_v1": lambda: vision(t.MobileNetV1Config, "image64", image_size=64,
                                       depth_multiplier=0.25),
        "hubert": lambda: (t.HubertConfig(**audio), "audio"),
        "wavlm": lambda: (t.WavLMConfig(**audio), "audio"),
    }


def _inputs(kind, batch, length, generator):
    import torch

    if kind in ("text", "seq2seq"):
        out = {"input_ids": torch.randint(2, 100, (batch, length), generator=generator)}
        if kind == "seq2seq":
            out["decoder_input_ids"] = torch.randint(2, 100, (batch, max(length // 2, 2)),
                                                     generator=generator)
        return out
    if kind.startswith("image"):
        size = int(kind[len("image"):])
        return {"pixel_values": torch.randn(batch, 3, size, size, generator=generator)}
    return {"input_values": torch.randn(batch, 200 * length, generator=generator)}


def _first(output):
    hidden = getattr(output, "last_hidden_state", None)
    return hidden if hidden is not None else output[0]


def _error(actual, expected, floor=0.0):
    actual, expected = actual.detach().float(), expected.detach().float()
    if actual.shape != expected.shape:
        return float("inf")
    scale = max(expected.abs().max().item(), floor, 1e-12)
    return (actual - expected).abs().max().item() / scale


def probe(name, strict):
    """[(check, relative error)] and the first lines of ember's warnings."""
    import warnings

    import torch
    import transformers as t

    import ember

    torch.manual_seed(0)
    config, kind = _configs()[name]()
    model = t.AutoModel.from_config(config).eval()
    if name in _VANISHING_INIT:
        _realistic_init(model)
    generator = torch.Generator().manual_seed(1)
    results = []
    notes = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fast = ember.compile(model, options={"fallback": False} if strict else None)
        for batch, length in [(2, 16), (3, 32)]:
            x = _inputs(kind, batch, length, generator)
            with torch.no_grad():
                expected = _first(model(**x))
                results.append((f"no_grad {batch}x{length}",
                                _error(_first(fast(**x)), expected)))
            spread = expected.float().std().item()
            if spread < 1e-6:
                notes.append(f"eager's output at {batch}x{length} is ~0 (std {spread:.1e}): "
                             "this row tests little")
        x = _inputs(kind, 2, 16, generator)
        expected = _first(model(**x))
        projection = torch.randn(expected.shape, generator=torch.Generator().manual_seed(5))
        (expected * projection).sum().backward()
        reference = {n: p.grad.clone() for n, p in model.named_parameters()
                     if p.grad is not None}
        model.zero_grad()
        actual = _first(fast(**x))
        (actual * projection).sum().backward()
        results.append(("grad-mode forward", _error(actual, expected)))
        largest = max(g.abs().max().item() for g in reference.values())
        worst = max(((_error(p.grad, reference[n], 1e-3 * largest)
                      if p.grad is not None else float("inf")), n)
                    for n, p in model.named_parameters() if n in reference)
        results.append((f"gradients (worst: {worst[1]})", worst[0]))
    notes += sorted({str(w.message).splitlines()[0][:200] for w in caught
                     if str(w.message).startswith("ember")})
    from ember.runtime.cache import GLOBAL_CACHE

    if not GLOBAL_CACHE.misses + GLOBAL_CACHE.hits:
        notes.append("nothing was compiled: every graph ran through ATen")
    return results, notes


def _run_one(name, strict):
    start = time.perf_counter()
    try:
        results, notes = probe(name, strict)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        first = str(exc).splitlines()[0][:300] if str(exc) else ""
        print(f"{name:14s} RAISED {time.perf_counter() - start:6.1f}s "
              f"{type(exc).__name__}: {first}", flush=True)
        return
    bad = [r for r in results if not r[1] <= TOLERANCE]
    print(f"{name:14s} {'WRONG' if bad else 'OK':6s} {time.perf_counter() - start:6.1f}s "
          + "; ".join(f"{check} {err:.1e}" for check, err in results), flush=True)
    for note in notes:
        print(f"{'':14s}   warning: {note}", flush=True)


def main(argv=None):
    return tool_main(argv, tool="ember.tools.hf_probe", doc=__doc__, all_names=_configs,
                     run_one=_run_one, what="models", timeout=900)


if __name__ == "__main__":
    sys.exit(main())
