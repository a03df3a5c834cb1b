"""ONNX RNN, GRU, LSTM and ReverseSequence (placeholder until written)."""

from __future__ import annotations

from dlc.onnx.node import Converter

CONVERTERS: dict[str, Converter] = {}
