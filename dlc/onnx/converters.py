"""Every ONNX operator dlc imports: `CONVERTERS` maps an operator type to its converter,
gathered from the converter modules (`ops_*.py`, one per operator family). The importer
looks converters up here; adding one is a function in its family's module and a line in
that module's `CONVERTERS` (docs/tutorials/add-operator.md).
"""

from __future__ import annotations

from dlc.onnx import (
    ops_activation,
    ops_composite,
    ops_control,
    ops_conv_transpose,
    ops_cumulative,
    ops_deform_conv,
    ops_det,
    ops_dynamic,
    ops_gather,
    ops_image,
    ops_logic,
    ops_math,
    ops_nn,
    ops_onehot,
    ops_quant,
    ops_resize,
    ops_rnn,
    ops_roi,
    ops_sample,
    ops_scatter_back,
    ops_shape,
    ops_signal,
    ops_slice,
    ops_tfidf,
    ops_training,
)
from dlc.onnx.node import Converter

CONVERTERS: dict[str, Converter] = {
    **ops_math.CONVERTERS,
    **ops_nn.CONVERTERS,
    **ops_shape.CONVERTERS,
    **ops_logic.CONVERTERS,
    **ops_activation.CONVERTERS,
    **ops_slice.CONVERTERS,
    **ops_gather.CONVERTERS,
    **ops_resize.CONVERTERS,
    **ops_sample.CONVERTERS,
    **ops_roi.CONVERTERS,
    **ops_dynamic.CONVERTERS,
    **ops_signal.CONVERTERS,
    **ops_cumulative.CONVERTERS,
    **ops_conv_transpose.CONVERTERS,
    **ops_onehot.CONVERTERS,
    **ops_composite.CONVERTERS,
    **ops_scatter_back.CONVERTERS,
    **ops_det.CONVERTERS,
    **ops_deform_conv.CONVERTERS,
    **ops_control.CONVERTERS,
    **ops_rnn.CONVERTERS,
    **ops_quant.CONVERTERS,
    **ops_training.CONVERTERS,
    **ops_tfidf.CONVERTERS,
    **ops_image.CONVERTERS,
}
