#!/usr/bin/env python3
"""Rewrites a PP-OCR ONNX model (as paddle2onnx wrote it) into fewer, equivalent operators.

paddle2onnx spells every hard-swish of the PP-LCNet backbones as four elementwise operators
(x * clip(x + 3, 0, 6) / 6) and every "learnable affine block" as a Mul and an Add by scalars, so
that a convolution block is one Conv and eight elementwise passes over its output. onnxruntime
fuses none of them, and on the recognizer they took as much time as the convolutions themselves
(models/ocr/CARD.md, "How the models are rewritten"). This script does, with the same arithmetic:

1. Conv -> Mul(k) -> Add(c) becomes one Conv with weights k*W and bias k*b + c.
2. x * clip(x + 3, 0, 6) / 6 becomes x * HardSigmoid(x) (alpha 1/6, beta 1/2), which is the same
   function (onnxruntime has no fusion for the four-operator form).
3. y -> Mul(k) -> Add(c) -> Conv (k, c per tensor) is folded into that Conv: the scale always
   (k*y is zero where y's padding is), the shift only when the Conv pads nothing (otherwise the
   shift stays as one Add of c/k before the scaled Conv).
4. A recognizer (its output a softmax over classes) gets two more outputs: each time step's best
   class and its probability, all that greedy CTC decoding reads. The first output is unchanged.

Only the graph's structure changes; weights are recomputed in float64 and stored as float32. Usage:
    python3 fuse.py IN.onnx OUT.onnx
Needs the `onnx` Python package (Debian: python3-onnx) and numpy.
"""
import sys
from collections import defaultdict

import numpy as np
import onnx
from onnx import helper, numpy_helper


def main(source: str, target: str) -> None:
    model = onnx.load(source)
    graph = model.graph
    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == 'Constant':
            value = helper.get_attribute_value(node.attribute[0])
            values[node.output[0]] = numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)
    nodes = [n for n in graph.node if n.op_type != 'Constant']
    outputs = {o.name for o in graph.output}
    counter = [0]

    def fresh(prefix: str) -> str:
        counter[0] += 1
        return f'fuse.{prefix}.{counter[0]}'

    def consumers():
        found = defaultdict(list)
        for n in nodes:
            for i in n.input:
                found[i].append(n)
        return found

    def constant_operand(node):
        """(the other input, the constant) of a binary op with one constant operand, else None."""
        a, b = node.input
        if b in values and a not in values:
            return a, values[b]
        if a in values and b not in values:
            return b, values[a]
        return None

    def sole(found, name):
        users = found.get(name, [])
        return users[0] if len(users) == 1 and name not in outputs else None

    def per_channel(value, channels):
        """A scalar or [1, C, 1, 1]-shaped constant as a vector of C, else None. (A 1-D [C] constant
        broadcasts along the last axis, W, not along C, so it is not per channel.)"""
        v = np.asarray(value, dtype=np.float64)
        if v.size == 1:
            return np.full(channels, float(v.reshape(())))
        if v.ndim == 4 and v.shape == (1, channels, 1, 1):
            return v.reshape(channels)
        return None

    def add_initializer(name, array):
        values[name] = array
        graph.initializer.append(numpy_helper.from_array(array.astype(np.float32), name))

    def conv_parts(conv):
        weight = values[conv.input[1]].astype(np.float64)
        bias = values[conv.input[2]].astype(np.float64) if len(conv.input) > 2 and conv.input[2] else np.zeros(weight.shape[0])
        return weight, bias

    def set_conv(conv, source, weight, bias):
        w_name, b_name = fresh('W'), fresh('B')
        add_initializer(w_name, weight)
        add_initializer(b_name, bias)
        del conv.input[:]
        conv.input.extend([source, w_name, b_name])

    removed = set()
    stats = defaultdict(int)

    # 1. Conv -> Mul(k) -> Add(c)
    found = consumers()
    for conv in nodes:
        if conv.op_type != 'Conv' or conv.input[1] not in values:
            continue
        mul = sole(found, conv.output[0])
        if mul is None or mul.op_type != 'Mul' or constant_operand(mul) is None:
            continue
        channels = values[conv.input[1]].shape[0]
        k = per_channel(constant_operand(mul)[1], channels)
        if k is None:
            continue
        add = sole(found, mul.output[0])
        c = np.zeros(channels)
        tail = mul
        if add is not None and add.op_type == 'Add' and constant_operand(add) is not None:
            shift = per_channel(constant_operand(add)[1], channels)
            if shift is not None:
                c, tail = shift, add
        weight, bias = conv_parts(conv)
        set_conv(conv, conv.input[0], weight * k.reshape(-1, *[1] * (weight.ndim - 1)), bias * k + c)
        del conv.output[:]
        conv.output.append(tail.output[0])
        removed.add(id(mul))
        removed.add(id(tail))
        stats['conv affine folded'] += 1
    nodes = [n for n in nodes if id(n) not in removed]

    # 2. x * clip(x + 3, 0, 6) / 6  ->  x * HardSigmoid(x)
    found = consumers()
    rewritten = []
    for add in nodes:
        if id(add) in removed or add.op_type != 'Add' or constant_operand(add) is None:
            continue
        x, three = constant_operand(add)
        if np.asarray(three).size != 1 or float(np.asarray(three).reshape(())) != 3.0:
            continue
        clip = sole(found, add.output[0])
        if clip is None or clip.op_type != 'Clip':
            continue
        bounds = {a.name: a.f for a in clip.attribute}
        if len(clip.input) > 1:
            # Opset 11 and later: bounds are optional inputs; one that is absent or not constant is no hard-swish.
            given = list(clip.input[1:3]) + [''] * (3 - len(clip.input))
            if not all(name in values for name in given):
                continue
            bounds = {'min': float(values[given[0]].reshape(())), 'max': float(values[given[1]].reshape(()))}
        if bounds.get('min') != 0.0 or bounds.get('max') != 6.0:
            continue
        mul = sole(found, clip.output[0])
        if mul is None or mul.op_type != 'Mul' or set(mul.input) != {x, clip.output[0]}:
            continue
        div = sole(found, mul.output[0])
        if div is None or div.op_type != 'Div' or div.input[1] not in values or float(values[div.input[1]].reshape(())) != 6.0:
            continue
        gate = fresh('hardsigmoid')
        rewritten.append((add, helper.make_node('HardSigmoid', [x], [gate], alpha=1.0 / 6.0, beta=0.5)))
        rewritten.append((div, helper.make_node('Mul', [x, gate], [div.output[0]])))
        removed.update({id(add), id(clip), id(mul), id(div)})
        stats['hard-swish rewritten'] += 1
    placed = {id(old): new for old, new in rewritten}
    nodes = [placed.get(id(n), n) for n in nodes if id(n) not in removed or id(n) in placed]

    # 3. y -> Mul(k) -> Add(c) -> Conv(s)
    found = consumers()
    removed = set()
    inserted = []
    for mul in nodes:
        if mul.op_type != 'Mul' or constant_operand(mul) is None:
            continue
        y, k = constant_operand(mul)
        if np.asarray(k).size != 1:
            continue
        k = float(np.asarray(k).reshape(()))
        add = sole(found, mul.output[0])
        if add is None or add.op_type != 'Add' or constant_operand(add) is None or np.asarray(constant_operand(add)[1]).size != 1 or k == 0.0:
            continue
        c = float(np.asarray(constant_operand(add)[1]).reshape(()))
        convs = found.get(add.output[0], [])
        if not convs or add.output[0] in outputs or any(n.op_type != 'Conv' or n.input[0] != add.output[0] or n.input[1] not in values for n in convs):
            continue
        padded = any(any(p != 0 for p in next((a.ints for a in n.attribute if a.name == 'pads'), [])) or any(a.name == 'auto_pad' and a.s not in (b'', b'NOTSET', b'VALID') for a in n.attribute) for n in convs)
        source = y
        if padded and c != 0.0:
            source = fresh('shift')
            shift_name = fresh('c')
            add_initializer(shift_name, np.array(c / k))
            inserted.append((mul, helper.make_node('Add', [y, shift_name], [source])))
        for conv in convs:
            weight, bias = conv_parts(conv)
            if not padded:
                # Each output channel sums its group's input channels over the kernel; a shift c of
                # every input adds c times that sum to its bias.
                bias = bias + c * weight.reshape(weight.shape[0], -1).sum(axis=1)
            set_conv(conv, source, weight * k, bias)
        removed.update({id(mul), id(add)})
        stats['affine folded into next conv' + (' (shift kept)' if padded and c != 0.0 else '')] += 1
    placed = {id(old): new for old, new in inserted}
    nodes = [placed.get(id(n), n) for n in nodes if id(n) not in removed or id(n) in placed]

    # 4. A recognizer's softmax over its classes also gives, as two more outputs, each time step's
    # best class and that class's probability: greedy CTC decoding needs only those, and reading
    # them from onnxruntime instead of the whole [N, T, classes] tensor saves copying and scanning
    # tens of megabytes per page in JavaScript.
    final = next((n for n in nodes if graph.output[0].name in n.output), None)
    dims = graph.output[0].type.tensor_type.shape.dim
    axis = next((a.i for a in final.attribute if a.name == 'axis'), None) if final is not None else None
    if final is not None and final.op_type == 'Softmax' and len(graph.output) == 1 and len(dims) == 3 and axis in (2, -1):
        probabilities = graph.output[0].name
        steps = [d.dim_param or d.dim_value for d in dims[:2]]
        nodes.append(helper.make_node('ArgMax', [probabilities], ['best_class'], axis=2, keepdims=0))
        nodes.append(helper.make_node('ReduceMax', [probabilities], ['best_probability'], axes=[2], keepdims=0))
        graph.output.extend([
            helper.make_tensor_value_info('best_class', onnx.TensorProto.INT64, steps),
            helper.make_tensor_value_info('best_probability', onnx.TensorProto.FLOAT, steps),
        ])
        stats['best-class outputs added'] += 1

    # Rebuild the graph: Constant nodes became initializers where used.
    used = {i for n in nodes for i in n.input}
    kept_initializers = [t for t in graph.initializer if t.name in used]
    for node in graph.node:
        if node.op_type == 'Constant' and node.output[0] in used and node.output[0] not in {t.name for t in kept_initializers}:
            kept_initializers.append(numpy_helper.from_array(values[node.output[0]], node.output[0]))
    del graph.initializer[:]
    graph.initializer.extend(kept_initializers)
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    onnx.checker.check_model(model)
    onnx.save(model, target)
    for name, count in stats.items():
        print(f'{name}: {count}')


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2])
