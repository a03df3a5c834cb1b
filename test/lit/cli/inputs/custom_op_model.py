"""Write an ONNX model with two nodes of the custom operator my.ops::Swish (2 x 3 f32)."""

import sys

import onnx
from onnx import TensorProto, helper

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
nodes = [
    helper.make_node("Swish", ["x"], ["s"], domain="my.ops", name="act1"),
    helper.make_node("Swish", ["s"], ["y"], domain="my.ops", name="act2"),
]
graph = helper.make_graph(nodes, "net", [x], [y])
opsets = [helper.make_opsetid("", 17), helper.make_opsetid("my.ops", 1)]
onnx.save(helper.make_model(graph, opset_imports=opsets), sys.argv[1])
