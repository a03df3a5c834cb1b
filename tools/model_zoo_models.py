"""The architectures of tools/model_zoo.py: public models from torchvision, timm and
Hugging Face transformers with random weights, and small recurrent networks, each a
function returning the module and its example inputs (batch 1, static shapes).

Transformers keep their published widths and take 2 layers (each layer is the same
graph again: the import and compile problems show in two, the compile time of a
full depth is proportional). Detection models are exported without their
post-processing (NMS and box decoding have data-dependent output shapes): backbone,
neck and head, whose outputs are the raw box and class maps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Example = tuple[Any, tuple[Any, ...], list[str]]
"""(module, example inputs, input names)."""


def _image(size: int = 224, channels: int = 3) -> Any:
    import torch

    return torch.randn(1, channels, size, size, generator=torch.Generator().manual_seed(0))


def _tokens(length: int = 32, vocab: int = 1000) -> Any:
    import torch

    return torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(0))


def torchvision(name: str, size: int = 224, **kwargs: Any) -> Callable[[], Example]:
    def build() -> Example:
        import torchvision.models as tvm

        return tvm.get_model(name, weights=None, **kwargs).eval(), (_image(size),), ["x"]

    return build


def segmentation(name: str, size: int = 224) -> Callable[[], Example]:
    def build() -> Example:
        import torch
        import torchvision.models.segmentation as seg

        class Out(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = getattr(seg, name)(weights=None, weights_backbone=None)

            def forward(self, x: Any) -> Any:
                return self.model(x)["out"]

        return Out().eval(), (_image(size),), ["x"]

    return build


def detection_head(name: str, size: int) -> Callable[[], Example]:
    """A torchvision detector's backbone (with its FPN) and head, no post-processing."""

    def build() -> Example:
        import torch
        import torchvision.models.detection as det

        class Head(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                model = getattr(det, name)(weights=None, weights_backbone=None)
                self.backbone, self.head = model.backbone, model.head

            def forward(self, x: Any) -> Any:
                features = self.backbone(x)
                features = list(features.values()) if isinstance(features, dict) else features
                out = self.head(features)
                return tuple(out.values()) if isinstance(out, dict) else out

        return Head().eval(), (_image(size),), ["x"]

    return build


def timm(name: str, size: int = 224) -> Callable[[], Example]:
    def build() -> Example:
        import timm as t

        return t.create_model(name, pretrained=False).eval(), (_image(size),), ["x"]

    return build


def hf_text(config: str, model: str, length: int = 32, **overrides: Any) -> Callable[[], Example]:
    """A Hugging Face model over token ids (the first output: hidden states or logits)."""

    def build() -> Example:
        import torch
        import transformers

        cfg = getattr(transformers, config)(**overrides)
        inner = getattr(transformers, model)(cfg).eval()

        class First(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, ids: Any) -> Any:
                return self.inner(input_ids=ids, use_cache=False, return_dict=False)[0]

        if "use_cache" not in inner.forward.__code__.co_varnames:
            First.forward = lambda self, ids: self.inner(input_ids=ids, return_dict=False)[0]  # type: ignore[method-assign]
        return First().eval(), (_tokens(length, min(1000, cfg.vocab_size)),), ["ids"]

    return build


def hf_seq2seq(config: str, model: str, **overrides: Any) -> Callable[[], Example]:
    """An encoder-decoder over source and target ids (the decoder's last hidden state)."""

    def build() -> Example:
        import torch
        import transformers

        inner = getattr(transformers, model)(getattr(transformers, config)(**overrides)).eval()

        class Pair(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, ids: Any, target: Any) -> Any:
                out = self.inner(
                    input_ids=ids, decoder_input_ids=target, use_cache=False, return_dict=False
                )
                return out[0]

        return Pair().eval(), (_tokens(24), _tokens(16)), ["ids", "target"]

    return build


def hf_features(
    config: str, model: str, shape: tuple[int, ...], part: str = "", **overrides: Any
) -> Callable[[], Example]:
    """A Hugging Face model (or its `part`: Whisper's encoder) over a float input
    (pixels, audio, mel features)."""

    def build() -> Example:
        import torch
        import transformers

        inner = getattr(transformers, model)(getattr(transformers, config)(**overrides)).eval()
        inner = getattr(inner, part) if part else inner

        class First(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, x: Any) -> Any:
                return self.inner(x, return_dict=False)[0]

        x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
        return First().eval(), (x,), ["x"]

    return build


def recurrent(kind: str, bidirectional: bool = False, layers: int = 2) -> Callable[[], Example]:
    """An embedding, a 2-layer LSTM or GRU and a linear classifier over its outputs."""

    def build() -> Example:
        import torch

        class Classifier(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = torch.nn.Embedding(1000, 128)
                rnn = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
                self.rnn = rnn(128, 256, layers, batch_first=True, bidirectional=bidirectional)
                self.out = torch.nn.Linear(256 * (2 if bidirectional else 1), 10)

            def forward(self, ids: Any) -> Any:
                return self.out(self.rnn(self.embed(ids))[0])

        return Classifier().eval(), (_tokens(40),), ["ids"]

    return build


TWO = {"num_hidden_layers": 2}
MODELS: dict[str, tuple[str, Callable[[], Example]]] = {
    # CNNs (torchvision): grouped and depthwise convolutions, SE, hardswish, SiLU
    "resnet18": ("cnn", torchvision("resnet18")),
    "resnet50": ("cnn", torchvision("resnet50")),
    "resnext50_32x4d": ("cnn", torchvision("resnext50_32x4d")),
    "mobilenet_v2": ("cnn", torchvision("mobilenet_v2")),
    "mobilenet_v3_small": ("cnn", torchvision("mobilenet_v3_small")),
    "mobilenet_v3_large": ("cnn", torchvision("mobilenet_v3_large")),
    "efficientnet_b0": ("cnn", torchvision("efficientnet_b0")),
    "regnet_y_400mf": ("cnn", torchvision("regnet_y_400mf")),
    "shufflenet_v2_x1_0": ("cnn", torchvision("shufflenet_v2_x1_0")),
    "squeezenet1_1": ("cnn", torchvision("squeezenet1_1")),
    "mnasnet0_5": ("cnn", torchvision("mnasnet0_5")),
    "densenet121": ("cnn", torchvision("densenet121")),
    "googlenet": ("cnn", torchvision("googlenet", init_weights=True, aux_logits=False)),
    "alexnet": ("cnn", torchvision("alexnet")),
    # CNNs (timm)
    "tf_efficientnet_lite0": ("cnn", timm("tf_efficientnet_lite0")),
    "mobilenetv3_large_100": ("cnn", timm("mobilenetv3_large_100")),
    "lcnet_050": ("cnn", timm("lcnet_050")),
    "ghostnet_100": ("cnn", timm("ghostnet_100")),
    "rexnet_100": ("cnn", timm("rexnet_100")),
    "mixnet_s": ("cnn", timm("mixnet_s")),
    "repvgg_a0": ("cnn", timm("repvgg_a0")),
    "resnet18d": ("cnn", timm("resnet18d")),
    "dla34": ("cnn", timm("dla34")),
    "cspresnet50": ("cnn", timm("cspresnet50")),
    "hrnet_w18_small": ("segmentation", timm("hrnet_w18_small")),
    # ViT / Swin / ConvNeXt-style
    "vit_b_16": ("vision transformer", torchvision("vit_b_16")),
    "swin_t": ("vision transformer", torchvision("swin_t")),
    "convnext_tiny": ("vision transformer", torchvision("convnext_tiny")),
    "deit_tiny_patch16_224": ("vision transformer", timm("deit_tiny_patch16_224")),
    "levit_128s": ("vision transformer", timm("levit_128s")),
    "mobilevit_xs": ("vision transformer", timm("mobilevit_xs", 256)),
    "poolformer_s12": ("vision transformer", timm("poolformer_s12")),
    "efficientformer_l1": ("vision transformer", timm("efficientformer_l1")),
    "convnextv2_atto": ("vision transformer", timm("convnextv2_atto")),
    "clip_vision": (
        "vision transformer",
        hf_features("CLIPVisionConfig", "CLIPVisionModel", (1, 3, 224, 224), **TWO),
    ),
    # detection and segmentation heads (Resize)
    "deeplabv3_mobilenet_v3_large": ("segmentation", segmentation("deeplabv3_mobilenet_v3_large")),
    "lraspp_mobilenet_v3_large": ("segmentation", segmentation("lraspp_mobilenet_v3_large")),
    "fcn_resnet50": ("segmentation", segmentation("fcn_resnet50")),
    "ssdlite320_head": ("detection", detection_head("ssdlite320_mobilenet_v3_large", 320)),
    "retinanet_head": ("detection", detection_head("retinanet_resnet50_fpn", 320)),
    "fcos_head": ("detection", detection_head("fcos_resnet50_fpn", 320)),
    # encoders, decoders, encoder-decoders
    "bert": ("encoder", hf_text("BertConfig", "BertModel", **TWO)),
    "distilbert": ("encoder", hf_text("DistilBertConfig", "DistilBertModel", n_layers=2)),
    "roberta": ("encoder", hf_text("RobertaConfig", "RobertaModel", **TWO)),
    "albert": ("encoder", hf_text("AlbertConfig", "AlbertModel", **TWO)),
    "electra": ("encoder", hf_text("ElectraConfig", "ElectraModel", **TWO)),
    "gpt2": ("decoder", hf_text("GPT2Config", "GPT2LMHeadModel", n_layer=2)),
    # GPT-2 small as the model benchmark runs it (tools/bench_model_table.py): 12 layers
    "gpt2_small": ("decoder", hf_text("GPT2Config", "GPT2LMHeadModel", length=128)),
    "llama": (
        "decoder",
        hf_text(
            "LlamaConfig",
            "LlamaForCausalLM",
            hidden_size=512,
            intermediate_size=1376,
            num_attention_heads=8,
            num_key_value_heads=4,
            vocab_size=4096,
            **TWO,
        ),
    ),  # fmt: skip
    "t5": ("encoder-decoder", hf_seq2seq("T5Config", "T5Model", num_layers=2)),
    "bart": (
        "encoder-decoder",
        hf_seq2seq("BartConfig", "BartModel", encoder_layers=2, decoder_layers=2),
    ),
    # speech encoders
    "whisper_encoder": (
        "speech",
        hf_features(
            "WhisperConfig",
            "WhisperModel",
            (1, 80, 3000),
            "encoder",
            encoder_layers=2,
            decoder_layers=2,
        ),
    ),  # fmt: skip
    "wav2vec2": ("speech", hf_features("Wav2Vec2Config", "Wav2Vec2Model", (1, 16000), **TWO)),
    "hubert": ("speech", hf_features("HubertConfig", "HubertModel", (1, 16000), **TWO)),
    # recurrent
    "lstm_classifier": ("recurrent", recurrent("lstm")),
    "bilstm_classifier": ("recurrent", recurrent("lstm", bidirectional=True)),
    "gru_classifier": ("recurrent", recurrent("gru")),
}
"""name -> (family, builder)."""
