"""
Converts the two face models from their TensorFlow.js form (as published in npm packages) to ONNX.
Build time only (models/face/build.sh runs it); needs Debian's python3-onnx and python3-numpy.

  convert.py blazeface HUMAN_MODELS_DIR OUT.onnx
      MediaPipe BlazeFace (back-camera variant, 256x256) from @vladmandic/human's graph model.
      In: "image" [1,3,256,256] RGB scaled to [-1,1]. Out: "scores" [1,896] (sigmoid applied) and
      "regressors" [1,896,16] (box centre/size and six keypoints, in input pixels, anchor-relative).
      The 512 anchors of the 16x16 grid come first, then the 384 of the 8x8 grid.

  convert.py dlib FACE_API_MODEL_DIR OUT.onnx
      dlib's face recognition ResNet (dlib_face_recognition_resnet_model_v1) from @vladmandic/face-api,
      whose weights are stored as uint8 with a scale and minimum. The weights stay uint8 in the ONNX
      file and are dequantized by the graph (onnxruntime folds that once, at session creation).
      In: "image" [N,3,150,150] RGB 0..255. Out: "embedding" [N,128].

  convert.py pixels OUT.onnx
      A tiny ArcFace-shaped test model (112x112 RGB in, a 48-value embedding of mean colours out),
      used by the tests to show that another embedding model can be configured.
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


class Graph:
    def __init__(self):
        self.nodes = []
        self.initializers = []
        self.count = 0

    def name(self, prefix):
        self.count += 1
        return f'{prefix}_{self.count}'

    def const(self, array, prefix='c'):
        name = self.name(prefix)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def op(self, op_type, inputs, prefix=None, **attrs):
        out = self.name(prefix or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def model(self, inputs, outputs, doc):
        graph = helper.make_graph(self.nodes, 'main', inputs, outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', OPSET)], producer_name='warden models/face/convert.py')
        model.doc_string = doc
        onnx.checker.check_model(model)
        return model


def same_pads(size, kernel, stride):
    """TensorFlow's SAME padding: the extra pixel, when the total is odd, goes after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def read_tfjs_weights(directory, manifest):
    """Weights of a tfjs weightsManifest as numpy arrays by name (float32, int32 or uint8-quantized)."""
    arrays = {}
    for group in manifest:
        data = b''.join(open(os.path.join(directory, path), 'rb').read() for path in group['paths'])
        offset = 0
        for weight in group['weights']:
            count = int(np.prod(weight['shape'])) if weight['shape'] else 1
            quantization = weight.get('quantization')
            if quantization:
                assert quantization['dtype'] == 'uint8'
                raw = np.frombuffer(data, np.uint8, count, offset).reshape(weight['shape'])
                arrays[weight['name']] = ('uint8', raw, quantization['scale'], quantization['min'])
                offset += count
            else:
                dtype = {'float32': np.float32, 'int32': np.int32}[weight['dtype']]
                arrays[weight['name']] = ('plain', np.frombuffer(data, dtype, count, offset).reshape(weight['shape']).copy())
                offset += count * 4
    return arrays


def blazeface(directory, out_path):
    model = json.load(open(os.path.join(directory, 'blazeface.json')))
    weights = {name: value[1] for name, value in read_tfjs_weights(directory, model['weightsManifest']).items()}
    nodes = {node['name']: node for node in model['modelTopology']['node']}
    g = Graph()
    values = {}  # tf name -> (onnx name, [C, H, W]) in NCHW

    def attr_ints(node, key):
        return [int(v) for v in node['attr'][key]['list']['i']]

    def padding(node):
        import base64
        return base64.b64decode(node['attr']['padding']['s']).decode()

    def conv(node, depthwise):
        source, shape = values[node['input'][0].split(':')[0]]
        kernel = weights[node['input'][1]]
        kh, kw, cin, cout = kernel.shape
        stride = attr_ints(node, 'strides')[1]
        if depthwise:
            w = kernel.transpose(2, 3, 0, 1).reshape(cin * cout, 1, kh, kw)
            group, out_channels = cin, cin * cout
        else:
            w = kernel.transpose(3, 2, 0, 1)
            group, out_channels = 1, cout
        if padding(node) == 'SAME':
            (pt, pb), (pl, pr) = same_pads(shape[1], kh, stride), same_pads(shape[2], kw, stride)
        else:
            pt = pb = pl = pr = 0
        inputs = [source, g.const(np.ascontiguousarray(w, np.float32), 'w')]
        fused = []
        if not depthwise:
            import base64
            fused = [base64.b64decode(s).decode() for s in node['attr']['fused_ops']['list']['s']] if 'list' in node['attr']['fused_ops'] else [base64.b64decode(s).decode() for s in node['attr']['fused_ops']['s']]
            if 'BiasAdd' in fused:
                inputs.append(g.const(weights[node['input'][2]].astype(np.float32), 'b'))
        out = g.op('Conv', inputs, kernel_shape=[kh, kw], strides=[stride, stride], pads=[pt, pl, pb, pr], group=group)
        if 'Relu' in fused:
            out = g.op('Relu', [out])
        h = (shape[1] + pt + pb - kh) // stride + 1
        w_ = (shape[2] + pl + pr - kw) // stride + 1
        return out, [out_channels, h, w_]

    # NCHW input, scaled to [-1, 1] by the caller.
    values['input'] = ('image', [3, 256, 256])
    order = [node for node in model['modelTopology']['node'] if node['op'] not in ('Const', 'Placeholder')]
    for node in order:
        op = node['op']
        inputs = [name.split(':')[0] for name in node.get('input', [])]
        if op == '_FusedConv2D':
            values[node['name']] = conv(node, False)
        elif op == 'DepthwiseConv2dNative':
            values[node['name']] = conv(node, True)
        elif op == 'AddV2':
            (a, shape), (b, _) = values[inputs[0]], values[inputs[1]]
            values[node['name']] = (g.op('Add', [a, b]), shape)
        elif op == 'Relu':
            a, shape = values[inputs[0]]
            values[node['name']] = (g.op('Relu', [a]), shape)
        elif op == 'MaxPool':
            a, shape = values[inputs[0]]
            k = attr_ints(node, 'ksize')[1]
            s = attr_ints(node, 'strides')[1]
            (pt, pb), (pl, pr) = same_pads(shape[1], k, s), same_pads(shape[2], k, s)
            out = g.op('MaxPool', [a], kernel_shape=[k, k], strides=[s, s], pads=[pt, pl, pb, pr])
            values[node['name']] = (out, [shape[0], -(-shape[1] // s), -(-shape[2] // s)])
        elif op == 'Pad':
            a, shape = values[inputs[0]]
            p = weights[inputs[1]].reshape(4, 2)  # NHWC rows of (before, after)
            pads = np.array([p[0][0], p[3][0], p[1][0], p[2][0], p[0][1], p[3][1], p[1][1], p[2][1]], np.int64)
            out = g.op('Pad', [a, g.const(pads, 'pads')])
            values[node['name']] = (out, [shape[0] + p[3].sum(), shape[1] + p[1].sum(), shape[2] + p[2].sum()])
        elif op == 'Reshape':
            a, shape = values[inputs[0]]
            nhwc = g.op('Transpose', [a], perm=[0, 2, 3, 1])
            target = weights[inputs[1]].astype(np.int64)
            values[node['name']] = (g.op('Reshape', [nhwc, g.const(target, 'shape')]), list(target[1:]))
        elif op == 'Identity':
            values[node['name']] = values[inputs[0]]
        else:
            raise SystemExit(f'unsupported op {op}')

    # Identity: scores of the 16x16 grid, Identity_1: of the 8x8 grid; Identity_2/_3: their regressors.
    scores = g.op('Concat', [values['Identity'][0], values['Identity_1'][0]], axis=1)
    scores = g.op('Reshape', [scores, g.const(np.array([1, 896], np.int64), 'shape')])
    nodes_out = [g.op('Sigmoid', [scores])]
    regressors = g.op('Concat', [values['Identity_2'][0], values['Identity_3'][0]], axis=1)
    g.nodes.append(helper.make_node('Identity', [nodes_out[0]], ['scores']))
    g.nodes.append(helper.make_node('Identity', [regressors], ['regressors']))
    onnx_model = g.model(
        [helper.make_tensor_value_info('image', TensorProto.FLOAT, [1, 3, 256, 256])],
        [helper.make_tensor_value_info('scores', TensorProto.FLOAT, [1, 896]), helper.make_tensor_value_info('regressors', TensorProto.FLOAT, [1, 896, 16])],
        'MediaPipe BlazeFace (back camera, 256x256), converted from @vladmandic/human 3.3.6 models/blazeface.json',
    )
    onnx.save(onnx_model, out_path)


def dlib(directory, out_path):
    manifest = json.load(open(os.path.join(directory, 'face_recognition_model-weights_manifest.json')))
    weights = read_tfjs_weights(directory, manifest)
    g = Graph()

    def weight(name, transform=None):
        kind, raw, *quant = weights[name]
        if transform:
            raw = np.ascontiguousarray(transform(raw))
        if kind == 'plain':
            return g.const(raw.astype(np.float32), 'w')
        scale, minimum = quant
        q = g.const(raw, 'q')
        as_float = g.op('Cast', [q], to=TensorProto.FLOAT)
        scaled = g.op('Mul', [as_float, g.const(np.array(scale, np.float32), 's')])
        return g.op('Add', [scaled, g.const(np.array(minimum, np.float32), 'm')])

    def per_channel(name):
        return g.op('Reshape', [weight(name), g.const(np.array([1, -1, 1, 1], np.int64), 'shape')])

    def conv_layer(x, size, prefix, stride, relu, same):
        filters = weight(f'{prefix}/conv/filters', lambda w: w.transpose(3, 2, 0, 1))
        k = weights[f'{prefix}/conv/filters'][1].shape[0]
        pads = [k // 2] * 4 if same else [0, 0, 0, 0]
        out = g.op('Conv', [x, filters], kernel_shape=[k, k], strides=[stride, stride], pads=pads)
        out = g.op('Add', [out, per_channel(f'{prefix}/conv/bias')])
        out = g.op('Mul', [out, per_channel(f'{prefix}/scale/weights')])
        out = g.op('Add', [out, per_channel(f'{prefix}/scale/biases')])
        size = size if same else (size - k) // stride + 1
        return (g.op('Relu', [out]) if relu else out), size

    def residual(x, size, prefix):
        out, _ = conv_layer(x, size, f'{prefix}/conv1', 1, True, True)
        out, _ = conv_layer(out, size, f'{prefix}/conv2', 1, False, True)
        return g.op('Relu', [g.op('Add', [out, x])]), size

    def residual_down(x, size, channels, prefix):
        out, out_size = conv_layer(x, size, f'{prefix}/conv1', 2, True, False)
        out, _ = conv_layer(out, out_size, f'{prefix}/conv2', 1, False, True)
        out_channels = weights[f'{prefix}/conv1/conv/filters'][1].shape[3]
        pooled = g.op('AveragePool', [x], kernel_shape=[2, 2], strides=[2, 2])
        pooled_size = size // 2
        if pooled_size != out_size:  # face-api pads the convolution's output with a zero row and column
            out = g.op('Pad', [out, g.const(np.array([0, 0, 0, 0, 0, 0, pooled_size - out_size, pooled_size - out_size], np.int64), 'pads')])
        if out_channels != channels:  # and the shortcut with zero channels
            pooled = g.op('Pad', [pooled, g.const(np.array([0, 0, 0, 0, 0, out_channels - channels, 0, 0], np.int64), 'pads')])
        return g.op('Relu', [g.op('Add', [pooled, out])]), pooled_size, out_channels

    mean = g.const(np.array([122.782, 117.001, 104.298], np.float32).reshape(1, 3, 1, 1), 'mean')
    x = g.op('Div', [g.op('Sub', ['image', mean]), g.const(np.array(255, np.float32), 'd')])
    x, size = conv_layer(x, 150, 'conv32_down', 2, True, False)
    x = g.op('MaxPool', [x], kernel_shape=[3, 3], strides=[2, 2])
    size = (size - 3) // 2 + 1
    channels = 32
    for block in ['conv32_1', 'conv32_2', 'conv32_3', 'conv64_down', 'conv64_1', 'conv64_2', 'conv64_3', 'conv128_down', 'conv128_1', 'conv128_2', 'conv256_down', 'conv256_1', 'conv256_2', 'conv256_down_out']:
        if 'down' in block:
            x, size, channels = residual_down(x, size, channels, block)
        else:
            x, size = residual(x, size, block)
    pooled = g.op('ReduceMean', [x], axes=[2, 3], keepdims=0)
    g.nodes.append(helper.make_node('MatMul', [pooled, weight('fc')], ['embedding']))
    onnx_model = g.model(
        [helper.make_tensor_value_info('image', TensorProto.FLOAT, ['N', 3, 150, 150])],
        [helper.make_tensor_value_info('embedding', TensorProto.FLOAT, ['N', 128])],
        "dlib face recognition ResNet v1 (public domain), converted from @vladmandic/face-api 1.7.15 model/face_recognition_model",
    )
    onnx.save(onnx_model, out_path)


def pixels(out_path):
    g = Graph()
    scaled = g.op('Div', ['image', g.const(np.array(255, np.float32), 'd')])
    pooled = g.op('AveragePool', [scaled], kernel_shape=[28, 28], strides=[28, 28])
    g.nodes.append(helper.make_node('Flatten', [pooled], ['embedding'], axis=1))
    onnx_model = g.model(
        [helper.make_tensor_value_info('image', TensorProto.FLOAT, ['N', 3, 112, 112])],
        [helper.make_tensor_value_info('embedding', TensorProto.FLOAT, ['N', 48])],
        'Test model with an ArcFace-shaped interface: mean colour of 4x4 cells. Not a face model.',
    )
    onnx.save(onnx_model, out_path)


if __name__ == '__main__':
    kind = sys.argv[1]
    if kind == 'blazeface':
        blazeface(sys.argv[2], sys.argv[3])
    elif kind == 'dlib':
        dlib(sys.argv[2], sys.argv[3])
    elif kind == 'pixels':
        pixels(sys.argv[2])
    else:
        raise SystemExit(__doc__)
