"""Planted shape bugs in public PyTorch projects: where each goes and how to run the file.

Each project is pinned to a commit; its `files` must check clean unmodified. Each `Bug`
replaces `old` by `new` on `line` of its file (one bug per copy). `RUNS[(project, file)]`
builds the module (imported as `m`) and calls it on synthetic inputs; `raises` is the line
CPU PyTorch raises at in the copy, verified with `benchmarks/torch_corpus.py --real --run`.
The bugs are realistic slips, one per copy (a layer sized from the wrong argument, a dim
off by one, a pattern of the wrong rank), written in two batches before the checker was
extended for them; none was dropped or changed once the checker's result was known.
None of the projects' code is kept here: `benchmarks/torch_corpus.py` reads it from a
checkout at the pinned commit.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Project:
    name: str  # owner/name
    commit: str
    path: str  # the folder that goes on sys.path to import the package
    files: tuple[str, ...]
    # A project read from its released wheel rather than a git commit: `name==version`,
    # installed with `pip install --no-deps --target SOURCES/owner+name` (`commit` is empty).
    wheel: str = ""


@dataclass(frozen=True)
class Bug:
    project: str
    file: str
    line: int  # where the patch goes
    old: str
    new: str
    raises: int  # the line CPU PyTorch raises at (innermost frame in the file), verified
    what: str


PROJECTS = (
    Project(
        "openai/whisper",
        "c0d2f624c09dc18e709e37c2ad90c039a4eb72a2",
        "",
        ("whisper/model.py", "whisper/audio.py"),
    ),
    Project("karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291", "", ("model.py",)),
    Project(
        "karpathy/minGPT", "37baab71b9abea1b76ab957409a1cc2fbfba8a26", "", ("mingpt/model.py",)
    ),
    Project("karpathy/llama2.c", "350e04fe35433e6d2941dce5a1f53308f87058eb", "", ("model.py",)),
    Project(
        "lucidrains/vit-pytorch",
        "69d24fe9e3024c0d4b02761123b8583a24ebed1e",
        "",
        (
            "vit_pytorch/vit.py",
            "vit_pytorch/simple_vit.py",
            "vit_pytorch/cait.py",
            "vit_pytorch/t2t.py",
            "vit_pytorch/cct.py",
            "vit_pytorch/deepvit.py",
            "vit_pytorch/levit.py",
            "vit_pytorch/pit.py",
            "vit_pytorch/local_vit.py",
            "vit_pytorch/vit_1d.py",
            "vit_pytorch/simple_vit_1d.py",
            "vit_pytorch/mae.py",
            "vit_pytorch/vivit.py",
            "vit_pytorch/cross_vit.py",
        ),
    ),
    Project(
        "huggingface/pytorch-image-models",
        "aa4b5850c1543fa488abf260f18390eda46cf85d",
        "",
        (
            "timm/layers/mlp.py",
            "timm/layers/attention.py",
            "timm/layers/squeeze_excite.py",
            "timm/layers/eca.py",
            "timm/layers/patch_embed.py",
            "timm/layers/cbam.py",
            "timm/layers/global_context.py",
            "timm/layers/gather_excite.py",
            "timm/models/convmixer.py",
        ),
    ),
    Project(
        "huggingface/diffusers",
        "58eb52c0803ea9af3abec60841c2a093bdf1f951",
        "src",
        (
            "src/diffusers/models/resnet.py",
            "src/diffusers/models/downsampling.py",
            "src/diffusers/models/upsampling.py",
            "src/diffusers/models/embeddings.py",
            "src/diffusers/models/normalization.py",
            "src/diffusers/models/activations.py",
        ),
    ),
    Project(
        "pytorch/vision",
        "",
        "",
        (
            "torchvision/models/resnet.py",
            "torchvision/models/vgg.py",
            "torchvision/models/alexnet.py",
            "torchvision/models/squeezenet.py",
            "torchvision/models/mobilenetv2.py",
            "torchvision/models/densenet.py",
            "torchvision/models/shufflenetv2.py",
            "torchvision/models/googlenet.py",
            "torchvision/models/convnext.py",
            "torchvision/models/vision_transformer.py",
            "torchvision/models/swin_transformer.py",
        ),
        wheel="torchvision==0.28.0",
    ),
    Project(
        "huggingface/transformers",
        "",
        "",
        (
            "transformers/models/gpt2/modeling_gpt2.py",
            "transformers/models/bert/modeling_bert.py",
            "transformers/models/t5/modeling_t5.py",
        ),
        wheel="transformers==4.57.6",
    ),
)

# The sweep: every Python file under these folders of each project is checked unmodified
# (`benchmarks/torch_corpus.py --real SOURCES --sweep`): any diagnostic is looked at, any
# exception is an internal error. meta-llama/llama is swept only.
SWEPT = (Project("meta-llama/llama", "689c7f261b9c5514636ecc3c5fefefcbb3e6eed7", "", ()),)
SWEEP = {
    "openai/whisper": ("",),
    "karpathy/nanoGPT": ("",),
    "karpathy/minGPT": ("",),
    "karpathy/llama2.c": ("",),
    "meta-llama/llama": ("",),
    "lucidrains/vit-pytorch": ("",),
    "huggingface/pytorch-image-models": ("timm/",),
    "huggingface/diffusers": ("src/diffusers/models/",),
    "pytorch/vision": ("torchvision/models/", "torchvision/ops/"),
    "huggingface/transformers": (
        "transformers/models/gpt2/",
        "transformers/models/bert/",
        "transformers/models/t5/",
        "transformers/models/vit/",
        "transformers/models/llama/",
    ),
}

_WHISPER = """
dims = m.ModelDimensions(80, 1500, 384, 6, 2, 51865, 448, 384, 6, 2)
model = m.Whisper(dims)
model(torch.randn(1, 80, 3000), torch.randint(0, 51865, (1, 5)))
"""
_NANOGPT = """
model = m.GPT(m.GPTConfig(n_layer=2))
idx = torch.randint(0, 50304, (2, 8))
model(idx, idx)
"""
_MINGPT = """
config = m.GPT.get_default_config()
config.model_type = "gpt-nano"
config.vocab_size = 10
config.block_size = 16
model = m.GPT(config)
idx = torch.randint(0, 10, (2, 8))
model(idx, idx)
"""
_LLAMA2C = """
args = m.ModelArgs(n_layers=1, vocab_size=512, max_seq_len=256)
model = m.Transformer(args)
idx = torch.randint(0, 512, (1, 4))
model(idx, idx)
"""
_VIT = """
v = m.ViT(image_size=64, patch_size=16, num_classes=10, dim=128, depth=1, heads=4, mlp_dim=256)
v(torch.randn(2, 3, 64, 64))
"""
_SIMPLE_VIT = """
v = m.SimpleViT(image_size=64, patch_size=16, num_classes=10, dim=128, depth=1, heads=4,
                mlp_dim=256)
v(torch.randn(2, 3, 64, 64))
"""
_CAIT = """
v = m.CaiT(image_size=64, patch_size=16, num_classes=10, dim=128, depth=1, cls_depth=1, heads=4,
           mlp_dim=256)
v(torch.randn(2, 3, 64, 64))
"""

_DEEPVIT = """
v = m.DeepViT(image_size=64, patch_size=16, num_classes=10, dim=128, depth=1, heads=4, mlp_dim=256)
v(torch.randn(2, 3, 64, 64))
"""
_PIT = """
v = m.PiT(image_size=64, patch_size=8, num_classes=10, dim=64, depth=(1, 1, 1), heads=4,
          mlp_dim=128)
v(torch.randn(2, 3, 64, 64))
"""
_TIMM_MLP = """
m.GluMlp(64, 128)(torch.randn(2, 10, 64))
"""
_TIMM_ATTENTION = """
m.Attention(64, num_heads=4)(torch.randn(2, 10, 64))
"""
_TIMM_SE = """
m.SEModule(64)(torch.randn(2, 64, 8, 8))
"""
_TIMM_ECA = """
m.EcaModule()(torch.randn(2, 16, 8, 8))
"""
_TIMM_CBAM = """
m.ChannelAttn(64)(torch.randn(2, 64, 8, 8))
"""
_DIFFUSERS_EMBEDDINGS = """
m.Timesteps(64, True, 1)(torch.arange(4))
m.PatchEmbed()(torch.randn(2, 3, 224, 224))
"""

_TV = "m.{}()(torch.randn(2, 3, 64, 64))\n"
_TV_VIT = """
v = m.VisionTransformer(image_size=32, patch_size=16, num_layers=1, num_heads=2, hidden_dim=64,
                        mlp_dim=128)
v(torch.randn(2, 3, 32, 32))
"""
_GPT2 = """
from transformers.models.gpt2.configuration_gpt2 import GPT2Config
c = GPT2Config(n_layer=1, n_embd=64, n_head=4, vocab_size=100, n_positions=32)
m.GPT2LMHeadModel(c)(torch.randint(0, 100, (2, 5)))
"""
_BERT = """
from transformers.models.bert.configuration_bert import BertConfig
c = BertConfig(num_hidden_layers=1, hidden_size=64, num_attention_heads=4, intermediate_size=128,
               vocab_size=100)
c._attn_implementation = "eager"
m.BertModel(c)(torch.randint(0, 100, (2, 5)))
"""
_T5 = """
from transformers.models.t5.configuration_t5 import T5Config
c = T5Config(num_layers=1, d_model=64, d_kv=16, num_heads=4, d_ff=128, vocab_size=100)
ids = torch.randint(0, 100, (2, 5))
m.T5Model(c)(input_ids=ids, decoder_input_ids=ids)
"""

RUNS = {
    ("openai/whisper", "whisper/model.py"): _WHISPER,
    ("karpathy/nanoGPT", "model.py"): _NANOGPT,
    ("karpathy/minGPT", "mingpt/model.py"): _MINGPT,
    ("karpathy/llama2.c", "model.py"): _LLAMA2C,
    ("lucidrains/vit-pytorch", "vit_pytorch/vit.py"): _VIT,
    ("lucidrains/vit-pytorch", "vit_pytorch/simple_vit.py"): _SIMPLE_VIT,
    ("lucidrains/vit-pytorch", "vit_pytorch/cait.py"): _CAIT,
    ("lucidrains/vit-pytorch", "vit_pytorch/deepvit.py"): _DEEPVIT,
    ("lucidrains/vit-pytorch", "vit_pytorch/pit.py"): _PIT,
    ("huggingface/pytorch-image-models", "timm/layers/mlp.py"): _TIMM_MLP,
    ("huggingface/pytorch-image-models", "timm/layers/attention.py"): _TIMM_ATTENTION,
    ("huggingface/pytorch-image-models", "timm/layers/squeeze_excite.py"): _TIMM_SE,
    ("huggingface/pytorch-image-models", "timm/layers/eca.py"): _TIMM_ECA,
    ("huggingface/pytorch-image-models", "timm/layers/cbam.py"): _TIMM_CBAM,
    ("huggingface/diffusers", "src/diffusers/models/embeddings.py"): _DIFFUSERS_EMBEDDINGS,
    ("pytorch/vision", "torchvision/models/resnet.py"): _TV.format("resnet50"),
    ("pytorch/vision", "torchvision/models/vgg.py"): _TV.format("vgg11"),
    ("pytorch/vision", "torchvision/models/alexnet.py"): _TV.format("alexnet"),
    ("pytorch/vision", "torchvision/models/squeezenet.py"): _TV.format("squeezenet1_0"),
    ("pytorch/vision", "torchvision/models/mobilenetv2.py"): _TV.format("mobilenet_v2"),
    ("pytorch/vision", "torchvision/models/densenet.py"): _TV.format("densenet121"),
    ("pytorch/vision", "torchvision/models/shufflenetv2.py"): _TV.format("shufflenet_v2_x0_5"),
    ("pytorch/vision", "torchvision/models/googlenet.py"): _TV.format("googlenet"),
    ("pytorch/vision", "torchvision/models/convnext.py"): _TV.format("convnext_tiny"),
    ("pytorch/vision", "torchvision/models/vision_transformer.py"): _TV_VIT,
    ("pytorch/vision", "torchvision/models/swin_transformer.py"): _TV.format("swin_t"),
    ("huggingface/transformers", "transformers/models/gpt2/modeling_gpt2.py"): _GPT2,
    ("huggingface/transformers", "transformers/models/bert/modeling_bert.py"): _BERT,
    ("huggingface/transformers", "transformers/models/t5/modeling_t5.py"): _T5,
}

# Where CPU PyTorch raises in each copy of the third batch (`--run` verifies every one).
RAISES = {
    "tv/resnet.py:137": 155,
    "tv/resnet.py:206": 280,
    "tv/resnet.py:279": 280,
    "tv/vgg.py:44": 69,
    "tv/alexnet.py:36": 51,
    "tv/squeezenet.py:26": 31,
    "tv/mobilenetv2.py:32": 62,
    "tv/densenet.py:190": 213,
    "tv/shufflenetv2.py:38": 38,
    "tv/googlenet.py:92": 161,
    "tv/convnext.py:57": 64,
    "tv/vision_transformer.py:295": 295,
    "tv/swin_transformer.py:172": 172,
    "hf/gpt2/modeling_gpt2.py:192": 313,
    "hf/gpt2/modeling_gpt2.py:369": 376,
    "hf/gpt2/modeling_gpt2.py:357": 358,
    "hf/gpt2/modeling_gpt2.py:387": 412,
    "hf/bert/modeling_bert.py:520": 525,
    "hf/bert/modeling_bert.py:317": 317,
    "hf/bert/modeling_bert.py:133": 185,
    "hf/t5/modeling_t5.py:283": 297,
    "hf/t5/modeling_t5.py:465": 465,
    "hf/t5/modeling_t5.py:895": 262,
}

# The third batch: torchvision's classic models and the GPT-2, BERT and T5 modeling files
# of transformers, planted before the checker was run on these files.
_TV_BUGS = (
    (
        "resnet.py",
        137,
        "conv1x1(width, planes * self.expansion)",
        "conv1x1(width, planes)",
        "the bottleneck's last conv forgets the expansion",
    ),
    (
        "resnet.py",
        206,
        "nn.Linear(512 * block.expansion, num_classes)",
        "nn.Linear(512, num_classes)",
        "the classifier built for a basic block's width",
    ),
    (
        "resnet.py",
        279,
        "torch.flatten(x, 1)",
        "torch.flatten(x, 2)",
        "the pooled map flattened from the wrong dim",
    ),
    (
        "vgg.py",
        44,
        "nn.Linear(512 * 7 * 7, 4096)",
        "nn.Linear(512 * 7, 4096)",
        "the classifier counts one side of the pooled map",
    ),
    (
        "alexnet.py",
        36,
        "nn.AdaptiveAvgPool2d((6, 6))",
        "nn.AdaptiveAvgPool2d((5, 5))",
        "the pool's output size no longer matches the classifier",
    ),
    (
        "squeezenet.py",
        26,
        "kernel_size=3, padding=1)",
        "kernel_size=3, padding=0)",
        "the 3x3 expand branch loses its padding",
    ),
    (
        "mobilenetv2.py",
        32,
        "self.stride == 1 and inp == oup",
        "self.stride == 1",
        "the residual kept when the channels change",
    ),
    (
        "densenet.py",
        190,
        "num_features + num_layers * growth_rate",
        "num_features + growth_rate",
        "the block's output channels count one layer",
    ),
    (
        "shufflenetv2.py",
        38,
        "x.view(batchsize, num_channels, height, width)",
        "x.view(batchsize, channels_per_group, height, width)",
        "the shuffled channels flattened back as one group's",
    ),
    (
        "googlenet.py",
        92,
        "nn.Linear(1024, num_classes)",
        "nn.Linear(832, num_classes)",
        "the classifier built for the width before the last inception",
    ),
    (
        "convnext.py",
        57,
        "nn.Linear(in_features=4 * dim, out_features=dim, bias=True)",
        "nn.Linear(in_features=dim, out_features=dim, bias=True)",
        "the block's second linear reads the unexpanded width",
    ),
    (
        "vision_transformer.py",
        295,
        "self.class_token.expand(n, -1, -1)",
        "self.class_token.expand(n, -1)",
        "the 3-d class token expanded with two sizes",
    ),
    (
        "swin_transformer.py",
        172,
        "x.permute(0, 1, 3, 2, 4, 5)",
        "x.permute(0, 1, 3, 2, 4)",
        "the 6-d windows permuted with five dims",
    ),
)
_HF_BUGS = (
    (
        "gpt2/modeling_gpt2.py",
        192,
        "Conv1D(3 * self.embed_dim",
        "Conv1D(2 * self.embed_dim",
        "the fused projection makes two thirds, split into q, k, v",
    ),
    (
        "gpt2/modeling_gpt2.py",
        369,
        "Conv1D(embed_dim, intermediate_size)",
        "Conv1D(embed_dim, embed_dim)",
        "the MLP projection built for the model width",
    ),
    (
        "gpt2/modeling_gpt2.py",
        357,
        "*attn_output.shape[:-2], -1",
        "*attn_output.shape[:-1], -1",
        "heads left unmerged before the output projection",
    ),
    (
        "gpt2/modeling_gpt2.py",
        387,
        "nn.LayerNorm(hidden_size",
        "nn.LayerNorm(inner_dim",
        "the first norm sized by the MLP width",
    ),
    (
        "bert/modeling_bert.py",
        520,
        "nn.Linear(config.intermediate_size, config.hidden_size)",
        "nn.Linear(config.hidden_size, config.hidden_size)",
        "the output layer built for the model width",
    ),
    (
        "bert/modeling_bert.py",
        317,
        ".permute(0, 2, 1, 3)",
        ".permute(0, 2, 1)",
        "the 4-d context permuted with three dims",
    ),
    (
        "bert/modeling_bert.py",
        133,
        "nn.Embedding(config.max_position_embeddings, config.hidden_size)",
        "nn.Embedding(config.max_position_embeddings, config.intermediate_size)",
        "position embeddings as wide as the MLP",
    ),
    (
        "t5/modeling_t5.py",
        283,
        "nn.Linear(config.d_ff, config.d_model",
        "nn.Linear(config.d_model, config.d_model",
        "the feed-forward output layer reads the model width",
    ),
    (
        "t5/modeling_t5.py",
        465,
        "permute([2, 0, 1])",
        "permute([2, 0])",
        "the 3-d bias table permuted with two dims",
    ),
    (
        "t5/modeling_t5.py",
        895,
        "T5LayerNorm(config.d_model",
        "T5LayerNorm(config.d_ff",
        "the final norm sized by the feed-forward width",
    ),
)

BUGS = (
    Bug(
        "openai/whisper",
        "whisper/model.py",
        156,
        "Linear(n_mlp, n_state)",
        "Linear(n_state, n_state)",
        46,
        "the MLP's second layer reads n_state features",
    ),
    Bug(
        "openai/whisper",
        "whisper/model.py",
        119,
        ".permute(0, 2, 1, 3)",
        ".permute(0, 2, 1)",
        119,
        "a 4-d view permuted with three dims",
    ),
    Bug(
        "openai/whisper",
        "whisper/model.py",
        68,
        "dim=1",
        "dim=2",
        68,
        "sinusoids concatenated on a dim the 2-d tables lack",
    ),
    Bug(
        "openai/whisper",
        "whisper/model.py",
        195,
        "x.permute(0, 2, 1)",
        "x.permute(0, 2, 1, 3)",
        195,
        "the encoder's 3-d activations permuted with four dims",
    ),
    Bug(
        "openai/whisper",
        "whisper/model.py",
        180,
        "Conv1d(n_state, n_state",
        "Conv1d(n_mels, n_state",
        57,
        "the second conv built for the mel channels",
    ),
    Bug(
        "karpathy/nanoGPT",
        "model.py",
        35,
        "3 * config.n_embd",
        "2 * config.n_embd",
        56,
        "the fused projection makes two thirds, unpacked as q, k, v",
    ),
    Bug(
        "karpathy/nanoGPT",
        "model.py",
        58,
        "C // self.n_head)",
        "C)",
        58,
        "query heads viewed with the whole embedding per head",
    ),
    Bug(
        "karpathy/nanoGPT",
        "model.py",
        84,
        "nn.Linear(4 * config.n_embd",
        "nn.Linear(config.n_embd",
        90,
        "the MLP projection built for n_embd inputs",
    ),
    Bug(
        "karpathy/nanoGPT",
        "model.py",
        174,
        "torch.arange(0, t,",
        "torch.arange(1, t,",
        179,
        "positions start at 1: one fewer than the tokens",
    ),
    Bug(
        "karpathy/nanoGPT",
        "model.py",
        187,
        "logits.view(-1, logits.size(-1))",
        "logits.view(-1)",
        187,
        "logits flattened completely before cross-entropy",
    ),
    Bug(
        "karpathy/nanoGPT",
        "model.py",
        98,
        "LayerNorm(config.n_embd",
        "LayerNorm(config.block_size",
        27,
        "the first norm sized by the block size",
    ),
    Bug(
        "karpathy/minGPT",
        "mingpt/model.py",
        40,
        "3 * config.n_embd",
        "2 * config.n_embd",
        56,
        "the fused projection makes two thirds, unpacked as q, k, v",
    ),
    Bug(
        "karpathy/minGPT",
        "mingpt/model.py",
        83,
        "nn.Linear(4 * config.n_embd",
        "nn.Linear(config.n_embd",
        88,
        "the MLP projection in a ModuleDict built for n_embd inputs",
    ),
    Bug(
        "karpathy/minGPT",
        "mingpt/model.py",
        278,
        "targets.view(-1)",
        "targets",
        278,
        "2-d targets against flattened logits",
    ),
    Bug(
        "karpathy/llama2.c",
        "model.py",
        78,
        ".flatten(3)",
        ".flatten(2)",
        148,
        "rotary output flattened one dim too far, unpacked as four sizes",
    ),
    Bug(
        "karpathy/llama2.c",
        "model.py",
        175,
        "nn.Linear(hidden_dim, dim",
        "nn.Linear(dim, dim",
        180,
        "the feed-forward down projection reads dim features",
    ),
    Bug(
        "karpathy/llama2.c",
        "model.py",
        44,
        "torch.outer(t, freqs)",
        "torch.outer(freqs, t)",
        52,
        "rotary tables built transposed",
    ),
    Bug(
        "karpathy/llama2.c",
        "model.py",
        220,
        "RMSNorm(params.dim",
        "RMSNorm(params.vocab_size",
        38,
        "the final norm's weight sized by the vocabulary",
    ),
    Bug(
        "karpathy/llama2.c",
        "model.py",
        64,
        "(-1, 2)",
        "(2, -1)",
        64,
        "the complex pairs split on the wrong axis",
    ),
    Bug(
        "lucidrains/vit-pytorch",
        "vit_pytorch/vit.py",
        23,
        "nn.Linear(hidden_dim, dim)",
        "nn.Linear(dim, dim)",
        28,
        "the feed-forward output layer reads dim features",
    ),
    Bug(
        "lucidrains/vit-pytorch",
        "vit_pytorch/vit.py",
        55,
        "'b n (h d) -> b h n d'",
        "'b n h d -> b h n d'",
        55,
        "a 3-d tensor rearranged with a 4-d pattern",
    ),
    Bug(
        "lucidrains/vit-pytorch",
        "vit_pytorch/vit.py",
        94,
        "channels * patch_height * patch_width",
        "channels * patch_height",
        120,
        "the patch size counts one side only",
    ),
    Bug(
        "lucidrains/vit-pytorch",
        "vit_pytorch/vit.py",
        106,
        "torch.randn(num_cls_tokens, dim)",
        "torch.randn(num_cls_tokens, dim_head)",
        123,
        "the class token sized per head",
    ),
    Bug(
        "lucidrains/vit-pytorch",
        "vit_pytorch/simple_vit.py",
        15,
        "torch.arange(dim // 4)",
        "torch.arange(dim // 2)",
        114,
        "twice the frequencies in the position table",
    ),
    Bug(
        "lucidrains/vit-pytorch",
        "vit_pytorch/simple_vit.py",
        61,
        "'b h n d -> b n (h d)'",
        "'b h n d -> b n h d'",
        62,
        "heads left unmerged before the output layer",
    ),
    Bug(
        "lucidrains/vit-pytorch",
        "vit_pytorch/cait.py",
        89,
        "chunk(2, dim = -1)",
        "chunk(3, dim = -1)",
        90,
        "keys and values chunked in three",
    ),
    Bug(
        "openai/whisper",
        "whisper/model.py",
        117,
        "n_batch, n_ctx, n_state = q.shape",
        "n_batch, n_ctx, n_head, n_state = q.shape",
        117,
        "the 3-d query unpacked as four sizes",
    ),
    Bug(
        "karpathy/minGPT",
        "mingpt/model.py",
        67,
        ".view(B, T, C)",
        ".view(B, T, C // self.n_head)",
        67,
        "heads re-assembled into one head's width",
    ),
    Bug(
        "karpathy/llama2.c",
        "model.py",
        105,
        "self.n_kv_heads * self.head_dim",
        "self.n_kv_heads",
        131,
        "the key projection makes one feature per head",
    ),
    Bug(
        "lucidrains/vit-pytorch",
        "vit_pytorch/cait.py",
        175,
        "'() n d -> b n d'",
        "'n d -> b n d'",
        175,
        "the 3-d class token repeated with a 2-d pattern",
    ),
    Bug(
        "lucidrains/vit-pytorch",
        "vit_pytorch/deepvit.py",
        38,
        "nn.LayerNorm(heads)",
        "nn.LayerNorm(dim)",
        63,
        "the re-attention norm sized by the model width",
    ),
    Bug(
        "lucidrains/vit-pytorch",
        "vit_pytorch/pit.py",
        102,
        "nn.Linear(dim, dim * 2)",
        "nn.Linear(dim, dim)",
        113,
        "the class token not widened with the pooled tokens",
    ),
    Bug(
        "huggingface/pytorch-image-models",
        "timm/layers/mlp.py",
        92,
        "linear_layer(hidden_features // 2, out_features",
        "linear_layer(hidden_features, out_features",
        107,
        "the gated MLP's output layer reads the ungated width",
    ),
    Bug(
        "huggingface/pytorch-image-models",
        "timm/layers/attention.py",
        119,
        ".permute(2, 0, 3, 1, 4)",
        ".permute(2, 0, 3, 1)",
        119,
        "a 5-d qkv permuted with four dims",
    ),
    Bug(
        "huggingface/pytorch-image-models",
        "timm/layers/attention.py",
        102,
        "self.attn_dim * 3",
        "self.attn_dim * 2",
        119,
        "the fused projection makes two thirds of qkv",
    ),
    Bug(
        "huggingface/pytorch-image-models",
        "timm/layers/squeeze_excite.py",
        56,
        "x.mean((2, 3), keepdim=True)",
        "x.mean((2, 3))",
        60,
        "the squeezed map loses its spatial dims",
    ),
    Bug(
        "huggingface/pytorch-image-models",
        "timm/layers/eca.py",
        93,
        "padding=padding, bias=False",
        "padding=0, bias=False",
        105,
        "the channel conv shrinks the channels",
    ),
    Bug(
        "huggingface/pytorch-image-models",
        "timm/layers/cbam.py",
        46,
        "self.fc1(x.mean((2, 3), keepdim=True))",
        "self.fc1(x.mean((2, 3)))",
        46,
        "the pooled map loses its spatial dims before a 1x1 conv",
    ),
    Bug(
        "huggingface/diffusers",
        "src/diffusers/models/embeddings.py",
        69,
        "dim=-1)",
        "dim=2)",
        69,
        "sine and cosine joined on a dim the 2-d table lacks",
    ),
    Bug(
        "huggingface/diffusers",
        "src/diffusers/models/embeddings.py",
        562,
        "latent.flatten(2)",
        "latent.flatten(1)",
        562,
        "the patch grid flattened with its channels",
    ),
)
BUGS += tuple(
    Bug("pytorch/vision", f"torchvision/models/{f}", line, old, new, RAISES[f"tv/{f}:{line}"], what)
    for f, line, old, new, what in _TV_BUGS
)
BUGS += tuple(
    Bug("huggingface/transformers", f"transformers/models/{f}", line, old, new,
        RAISES[f"hf/{f}:{line}"], what)
    for f, line, old, new, what in _HF_BUGS
)  # fmt: skip
