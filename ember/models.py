"""Real models written by others (HuggingFace transformers), built from small configs with
random weights (no download): used by the tests, the benchmark and the demo."""
import torch


def _hf():
    import transformers
    return transformers


def _ids(batch, seq, vocab):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, vocab, (batch, seq), generator=g)


def _img(batch, channels, size):
    g = torch.Generator().manual_seed(0)
    return torch.randn(batch, channels, size, size, generator=g)


def _calibrated(model, channels, size):
    """Realistic activations for a CNN with random weights: scale-preserving (He) conv and
    linear weights, then batch-norm statistics measured on a calibration batch (another
    draw than the test inputs). HF's random init makes MobileNetV2's outputs ~1e-23, so
    eager timed denormal arithmetic and absolute tolerances meant nothing."""
    nn = torch.nn
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * (2.0 / fan_in) ** 0.5)
                if m.bias is not None:
                    m.bias.zero_()
            elif isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.reset_running_stats()
                m.momentum = None  # cumulative average over the calibration batches
        model.train()
        for _ in range(2):
            model(torch.randn(8, channels, size, size, generator=g))
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.momentum = 0.1
    return model.eval()


def build(name, scale="small", batch=2):
    """Return (model in eval mode, example inputs tuple) for model `name`; outputs have
    O(1) spread (see activation_stats)."""
    model, inputs = _build(name, scale, batch)
    if any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        x = inputs[0]
        model = _calibrated(model, x.shape[1], x.shape[-1])
    return model.eval(), inputs


def activation_stats(output):
    """(std, fraction of nonzero |values| below 1e-30) of a model's main output."""
    t = first_tensor(output).detach().float()
    tiny = ((t != 0) & (t.abs() < 1e-30)).float().mean().item()
    return t.std().item(), tiny


def _build(name, scale, batch):
    t = _hf()
    big = scale == "bench"
    hidden = 256 if big else 32
    layers = 4 if big else 2
    heads = 4
    seq = 128 if big else 16
    vocab = 1000 if big else 100
    inter = hidden * 4
    if name == "bert":
        cfg = t.BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                           num_attention_heads=heads, intermediate_size=inter,
                           max_position_embeddings=512)
        return t.BertModel(cfg, add_pooling_layer=False), (_ids(batch, seq, vocab),)
    if name == "distilbert":
        cfg = t.DistilBertConfig(vocab_size=vocab, dim=hidden, n_layers=layers, n_heads=heads,
                                 hidden_dim=inter, max_position_embeddings=512)
        return t.DistilBertModel(cfg), (_ids(batch, seq, vocab),)
    if name == "gpt2":
        cfg = t.GPT2Config(vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=heads,
                           n_positions=512, use_cache=False)
        return t.GPT2Model(cfg), (_ids(batch, seq, vocab),)
    if name == "llama":
        cfg = t.LlamaConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                            num_attention_heads=heads, num_key_value_heads=heads // 2,
                            intermediate_size=inter, max_position_embeddings=512,
                            use_cache=False)
        return t.LlamaModel(cfg), (_ids(batch, seq, vocab),)
    if name == "t5-encoder":
        cfg = t.T5Config(vocab_size=vocab, d_model=hidden, d_kv=hidden // heads, d_ff=inter,
                         num_layers=layers, num_heads=heads, use_cache=False)
        return t.T5EncoderModel(cfg), (_ids(batch, seq, vocab),)
    if name == "vit":
        size = 64 if big else 32
        cfg = t.ViTConfig(image_size=size, patch_size=8, num_channels=3, hidden_size=hidden,
                          num_hidden_layers=layers, num_attention_heads=heads,
                          intermediate_size=inter)
        return t.ViTModel(cfg, add_pooling_layer=False), (_img(batch, 3, size),)
    if name == "resnet":
        cfg = t.ResNetConfig(num_channels=3, embedding_size=32 if big else 8,
                             hidden_sizes=[32, 64, 128, 256] if big else [8, 16, 16, 32],
                             depths=[1, 1, 1, 1], layer_type="basic")
        return t.ResNetModel(cfg), (_img(batch, 3, 64 if big else 32),)
    if name == "convnext":
        cfg = t.ConvNextConfig(num_channels=3, hidden_sizes=[32, 64, 128, 256] if big else [8, 16, 16, 32],
                               depths=[1, 1, 1, 1], patch_size=4)
        return t.ConvNextModel(cfg), (_img(batch, 3, 64 if big else 32),)
    if name == "mobilenetv2":
        cfg = t.MobileNetV2Config(num_channels=3, image_size=64 if big else 32,
                                  depth_multiplier=0.5 if big else 0.25)
        return t.MobileNetV2Model(cfg), (_img(batch, 3, 64 if big else 32),)
    return _build_more(t, name, big, hidden, layers, heads, seq, vocab, inter, batch)


def _build_more(t, name, big, hidden, layers, heads, seq, vocab, inter, batch):
    """The families beyond the first nine: more encoders, decoders, encoder-decoders,
    windowed vision transformers, grouped-conv CNNs, speech."""
    if name == "roberta":
        cfg = t.RobertaConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                              num_attention_heads=heads, intermediate_size=inter,
                              max_position_embeddings=514)
        return t.RobertaModel(cfg, add_pooling_layer=False), (_ids(batch, seq, vocab),)
    if name == "albert":
        cfg = t.AlbertConfig(vocab_size=vocab, embedding_size=hidden // 2, hidden_size=hidden,
                             num_hidden_layers=layers, num_attention_heads=heads,
                             intermediate_size=inter, max_position_embeddings=512)
        return t.AlbertModel(cfg, add_pooling_layer=False), (_ids(batch, seq, vocab),)
    if name == "opt":
        cfg = t.OPTConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                          num_attention_heads=heads, ffn_dim=inter, word_embed_proj_dim=hidden,
                          max_position_embeddings=512, use_cache=False)
        return t.OPTModel(cfg), (_ids(batch, seq, vocab),)
    if name == "mistral":
        cfg = t.MistralConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                              num_attention_heads=heads, num_key_value_heads=heads // 2,
                              intermediate_size=inter, max_position_embeddings=512,
                              sliding_window=seq // 2, use_cache=False)
        return t.MistralModel(cfg), (_ids(batch, seq, vocab),)
    if name in ("bart", "t5"):
        if name == "bart":
            cfg = t.BartConfig(vocab_size=vocab, d_model=hidden, encoder_layers=layers,
                               decoder_layers=layers, encoder_attention_heads=heads,
                               decoder_attention_heads=heads, encoder_ffn_dim=inter,
                               decoder_ffn_dim=inter, max_position_embeddings=512,
                               use_cache=False)
            model = t.BartModel(cfg)
        else:
            cfg = t.T5Config(vocab_size=vocab, d_model=hidden, d_kv=hidden // heads, d_ff=inter,
                             num_layers=layers, num_heads=heads, use_cache=False)
            model = t.T5Model(cfg)
        return _Seq2Seq(model), (_ids(batch, seq, vocab), _ids(batch, seq // 2, vocab))
    if name == "whisper":
        frames = 2 * seq
        cfg = t.WhisperConfig(vocab_size=vocab, num_mel_bins=40, d_model=hidden,
                              encoder_layers=layers, decoder_layers=layers,
                              encoder_attention_heads=heads, decoder_attention_heads=heads,
                              encoder_ffn_dim=inter, decoder_ffn_dim=inter,
                              max_source_positions=seq, max_target_positions=256,
                              pad_token_id=1, bos_token_id=2, eos_token_id=2,
                              decoder_start_token_id=2, use_cache=False)
        g = torch.Generator().manual_seed(0)
        features = torch.randn(batch, 40, frames, generator=g)
        return (_Seq2Seq(t.WhisperModel(cfg), source="input_features"),
                (features, _ids(batch, seq // 4, vocab)))
    if name == "wav2vec2":
        cfg = t.Wav2Vec2Config(hidden_size=hidden, num_hidden_layers=layers,
                               num_attention_heads=heads, intermediate_size=inter,
                               conv_dim=(hidden // 2,) * 7, num_conv_pos_embeddings=16,
                               num_conv_pos_embedding_groups=4, do_stable_layer_norm=True,
                               feat_extract_norm="layer")
        g = torch.Generator().manual_seed(0)
        samples = 320 * seq + 80  # 320 samples per frame after the feature convolutions
        return t.Wav2Vec2Model(cfg), (torch.randn(batch, samples, generator=g),)
    if name == "swin":
        size = 64 if big else 32
        cfg = t.SwinConfig(image_size=size, patch_size=4, num_channels=3,
                           embed_dim=hidden // 4, depths=[2, 2], num_heads=[2, 4],
                           window_size=4)
        return t.SwinModel(cfg, add_pooling_layer=False), (_img(batch, 3, size),)
    if name == "regnet":
        cfg = t.RegNetConfig(num_channels=3, embedding_size=32 if big else 8,
                             hidden_sizes=[32, 64, 128, 256] if big else [8, 16, 16, 32],
                             depths=[1, 1, 1, 1], groups_width=8)
        return t.RegNetModel(cfg), (_img(batch, 3, 64 if big else 32),)
    if name == "efficientnet":
        # B0's layout scaled down; the head is AvgPool2d(hidden_dim, ceil_mode=True), a
        # window far larger than the image, as in every HF EfficientNet
        width = 0.5 if big else 0.25
        cfg = t.EfficientNetConfig(image_size=64 if big else 32, width_coefficient=width,
                                   depth_coefficient=0.5 if big else 0.3,
                                   hidden_dim=int(1280 * width), num_labels=10)
        model = t.EfficientNetForImageClassification(cfg)
        g = torch.Generator().manual_seed(2)
        with torch.no_grad():  # HF draws the BN scales from N(0, 0.02): outputs ~1e-11
            for m in model.modules():
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.weight.copy_(1 + 0.1 * torch.randn(m.weight.shape, generator=g))
        return model, (_img(batch, 3, 64 if big else 32),)
    raise KeyError(f"unknown model {name!r}; known: {MODEL_NAMES}")


class _Seq2Seq(torch.nn.Module):
    """An encoder-decoder called positionally: (source, decoder input ids)."""

    def __init__(self, model, source="input_ids"):
        super().__init__()
        self.model, self.source = model, source

    def forward(self, source, decoder_input_ids):
        return self.model(**{self.source: source}, decoder_input_ids=decoder_input_ids)


MODEL_NAMES = ["bert", "gpt2", "llama", "t5-encoder", "vit", "resnet", "convnext",
               "distilbert", "mobilenetv2", "roberta", "albert", "opt", "mistral", "bart",
               "t5", "whisper", "wav2vec2", "swin", "regnet", "efficientnet"]


def first_tensor(output):
    """The main tensor of a HF model output (last_hidden_state) or a plain tensor."""
    if isinstance(output, torch.Tensor):
        return output
    if hasattr(output, "last_hidden_state"):
        return output.last_hidden_state
    return output[0]


def _training_model(name, big, dropout):
    """(model with a task head, inputs, targets, loss(output, targets)) for `name`."""
    t = _hf()
    hidden, layers, heads = (256, 4, 4) if big else (32, 2, 4)
    seq, vocab, inter = (128 if big else 16), (1000 if big else 100), hidden * 4
    if name == "bert":
        cfg = t.BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                           num_attention_heads=heads, intermediate_size=inter, num_labels=3,
                           hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
        return t.BertForSequenceClassification(cfg), "classify", seq, vocab
    if name == "gpt2":
        cfg = t.GPT2Config(vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=heads,
                           n_positions=512, use_cache=False, resid_pdrop=dropout,
                           embd_pdrop=dropout, attn_pdrop=dropout)
        return t.GPT2LMHeadModel(cfg), "lm", seq, vocab
    if name == "llama":
        cfg = t.LlamaConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                            num_attention_heads=heads, num_key_value_heads=heads // 2,
                            intermediate_size=inter, use_cache=False, attention_dropout=dropout)
        return t.LlamaForCausalLM(cfg), "lm", seq, vocab
    if name == "vit":
        cfg = t.ViTConfig(image_size=64 if big else 32, patch_size=8, num_channels=3,
                          hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                          intermediate_size=inter, num_labels=5, hidden_dropout_prob=dropout,
                          attention_probs_dropout_prob=dropout)
        return t.ViTForImageClassification(cfg), "image", 64 if big else 32, None
    if name == "resnet":
        cfg = t.ResNetConfig(num_channels=3, embedding_size=32 if big else 8,
                             hidden_sizes=[32, 64, 128, 256] if big else [8, 16, 16, 32],
                             depths=[1, 1, 1, 1], layer_type="basic", num_labels=5)
        return t.ResNetForImageClassification(cfg), "image", 64, None
    if name == "convnext":
        cfg = t.ConvNextConfig(num_channels=3, hidden_sizes=[32, 64, 128, 256] if big else [8, 16, 16, 32],
                               depths=[1, 1, 1, 1], patch_size=4, num_labels=5)
        return t.ConvNextForImageClassification(cfg), "image", 64, None
    raise KeyError(f"unknown training model {name!r}; known: {TRAINING_MODEL_NAMES}")


class _Plain(torch.nn.Module):
    """A small model of our own: an MLP, or a CNN with train-mode batch norm."""

    def __init__(self, kind):
        super().__init__()
        nn = torch.nn
        if kind == "mlp":
            self.net = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64),
                                     nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        else:
            self.net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                     nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
                                     nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                     nn.Flatten(), nn.Linear(32, 10))

    def forward(self, x):
        return self.net(x)


TRAINING_MODEL_NAMES = ["mlp", "cnn", "bert", "gpt2", "llama", "vit", "resnet", "convnext"]


def build_training(name, scale="small", batch=4, dropout=0.0):
    """(model in train mode, inputs tuple, loss function of the model's output) for one
    training step of `name`: a classification loss for BERT / ViT / CNNs, a next-token
    loss for GPT-2 / Llama."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(2)
    if name in ("mlp", "cnn"):
        model = _Plain(name)
        x = torch.randn(batch, 32, generator=g) if name == "mlp" else \
            torch.randn(batch, 3, 16, 16, generator=g)
        labels = torch.randint(0, 10, (batch,), generator=g)
        return model.train(), (x,), lambda out: F.cross_entropy(out, labels)
    model, task, size, vocab = _training_model(name, scale == "bench", dropout)
    if task == "image":
        x = torch.randn(batch, 3, size, size, generator=g)
        labels = torch.randint(0, 5, (batch,), generator=g)
        return model.train(), (x,), lambda out: F.cross_entropy(out.logits, labels)
    ids = torch.randint(0, vocab, (batch, size), generator=g)
    if task == "classify":
        labels = torch.randint(0, 3, (batch,), generator=g)
        return model.train(), (ids,), lambda out: F.cross_entropy(out.logits, labels)

    def next_token(out):
        logits = out.logits[:, :-1]
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))

    return model.train(), (ids,), next_token
