#!/usr/bin/env python3
"""Writes the bundled model graphs (tictac-graph/1, docs/graph-format.md) into this folder.

One forward pass (inference) of each network on one worker: a recv per parameter tensor
(float32, 4 bytes per parameter) and compute ops with the networks' real layer structure.
Compute time is proportional to each op's FLOPs:

    time = FLOPs per image * BATCH / DEVICE_FLOPS

FLOPs: convolutions and fully-connected layers 2 per multiply-accumulate; element-wise ops
(bias add, batch norm = 2, ReLU, residual add, concat copy, softmax = 3) per output element;
pooling kernel-height * kernel-width per output element. Memory-bound ops are thereby charged as
if they were compute-bound, a deliberate simplification. Absolute times only set the graph's
own comm/compute ratio; the simulator can rescale it (--target-ratio).

Parameter counts (checked below) match the reference models:
  VGG-16 138,357,544 (conv/fc weights + biases), AlexNet 61,100,840 (torchvision variant),
  ResNet-50 25,557,032 trainable + 53,120 batch-norm running statistics (torchvision),
  Inception v3 23,851,784 (Keras, no auxiliary head; batch norm beta + running statistics).

Usage: bench/graphs/make_model_graphs.py [output-folder]   (python3, standard library only)
"""
import json
import os
import sys

FORMAT = "tictac-graph/1"
BATCH = 32
DEVICE_FLOPS = 10e12  # effective FLOP/s: a V100-class GPU (15.7 TFLOP/s fp32 peak) at ~64%
BYTES_PER_PARAM = 4


class Builder:
    """Accumulates ops in file order; names are unique and inputs must already exist."""

    def __init__(self):
        self.ops = []
        self.names = set()
        self.params = 0

    def _add(self, op):
        assert op["name"] not in self.names, op["name"]
        for i in op.get("inputs", []):
            assert i in self.names, (op["name"], i)
        self.names.add(op["name"])
        self.ops.append(op)
        return op["name"]

    def recv(self, name, params):
        self.params += params
        return self._add({"name": name, "kind": "recv", "bytes": params * BYTES_PER_PARAM})

    def compute(self, name, inputs, flops):
        seconds = float("%.6g" % (flops * BATCH / DEVICE_FLOPS))
        inputs = [i for i in inputs if i is not None]  # None: the local input image
        return self._add({"name": name, "kind": "compute", "inputs": inputs, "time": seconds})


class Tensor:
    """An activation: the op that produced it and its shape (height, width, channels)."""

    def __init__(self, op, h, w, c):
        self.op, self.h, self.w, self.c = op, h, w, c

    def elems(self):
        return self.h * self.w * self.c


def out_size(n, k, stride, pad):
    """pad: 'same' keeps n/stride (rounded up), 'valid' uses no padding, an int pads both sides."""
    if pad == "same":
        return -(-n // stride)
    p = 0 if pad == "valid" else pad
    return (n + 2 * p - k) // stride + 1


def conv(b, name, x, cout, kh, kw=None, stride=1, pad="same", bias=False):
    kw = kh if kw is None else kw
    w = b.recv(name + "/weights", kh * kw * x.c * cout)
    h2, w2 = out_size(x.h, kh, stride, pad), out_size(x.w, kw, stride, pad)
    op = b.compute(name + "/conv", [x.op, w], 2 * kh * kw * x.c * cout * h2 * w2)
    y = Tensor(op, h2, w2, cout)
    if bias:
        bb = b.recv(name + "/biases", cout)
        y = Tensor(b.compute(name + "/bias_add", [y.op, bb], y.elems()), h2, w2, cout)
    return y


def batch_norm(b, name, x, vectors):
    """vectors: per-channel vectors transferred (gamma, beta, moving mean, moving variance...)."""
    p = b.recv(name + "/bn", vectors * x.c)
    return Tensor(b.compute(name + "/batchnorm", [x.op, p], 2 * x.elems()), x.h, x.w, x.c)


def relu(b, name, x):
    return Tensor(b.compute(name + "/relu", [x.op], x.elems()), x.h, x.w, x.c)


def pool(b, name, x, k, stride, pad="valid", kind="max"):
    h2, w2 = out_size(x.h, k, stride, pad), out_size(x.w, k, stride, pad)
    op = b.compute(name + "/" + kind + "pool", [x.op], k * k * x.c * h2 * w2)
    return Tensor(op, h2, w2, x.c)


def global_avg_pool(b, name, x):
    return Tensor(b.compute(name + "/avgpool", [x.op], x.elems()), 1, 1, x.c)


def fc(b, name, x, out, activation=True):
    n_in = x.elems()
    w = b.recv(name + "/weights", n_in * out)
    bias = b.recv(name + "/biases", out)
    y = Tensor(b.compute(name + "/matmul", [x.op, w], 2 * n_in * out), 1, 1, out)
    y = Tensor(b.compute(name + "/bias_add", [y.op, bias], out), 1, 1, out)
    return relu(b, name, y) if activation else y


def softmax(b, x):
    return Tensor(b.compute("softmax", [x.op], 3 * x.elems()), 1, 1, x.c)


def concat(b, name, parts):
    h, w = parts[0].h, parts[0].w
    assert all(p.h == h and p.w == w for p in parts), name
    c = sum(p.c for p in parts)
    return Tensor(b.compute(name + "/concat", [p.op for p in parts], h * w * c), h, w, c)


def image(h, w):
    # The input batch is already on the worker; it is not an op, the first layer reads it.
    return Tensor(None, h, w, 3)


# ---------------------------------------------------------------------------------------------
def vgg16():
    b = Builder()
    x = image(224, 224)
    for block, (convs, ch) in enumerate([(2, 64), (2, 128), (3, 256), (3, 512), (3, 512)], 1):
        for i in range(1, convs + 1):
            name = "conv%d_%d" % (block, i)
            x = relu(b, name, conv(b, name, x, ch, 3, bias=True))
        x = pool(b, "pool%d" % block, x, 2, 2)
    x = fc(b, "fc6", x, 4096)
    x = fc(b, "fc7", x, 4096)
    x = fc(b, "fc8", x, 1000, activation=False)
    softmax(b, x)
    return b, "VGG-16 (Simonyan & Zisserman 2014), 224x224 input", 138357544


def alexnet():
    b = Builder()
    x = image(224, 224)
    x = relu(b, "conv1", conv(b, "conv1", x, 64, 11, stride=4, pad=2, bias=True))
    x = pool(b, "pool1", x, 3, 2)
    x = relu(b, "conv2", conv(b, "conv2", x, 192, 5, pad=2, bias=True))
    x = pool(b, "pool2", x, 3, 2)
    x = relu(b, "conv3", conv(b, "conv3", x, 384, 3, pad=1, bias=True))
    x = relu(b, "conv4", conv(b, "conv4", x, 256, 3, pad=1, bias=True))
    x = relu(b, "conv5", conv(b, "conv5", x, 256, 3, pad=1, bias=True))
    x = pool(b, "pool5", x, 3, 2)
    x = fc(b, "fc6", x, 4096)
    x = fc(b, "fc7", x, 4096)
    x = fc(b, "fc8", x, 1000, activation=False)
    softmax(b, x)
    return b, "AlexNet (Krizhevsky et al. 2012), torchvision variant, 224x224 input", 61100840


def resnet50():
    b = Builder()
    bn_vectors = 4  # gamma, beta, running mean, running variance

    def conv_bn(name, x, cout, k, stride=1, act=True):
        y = batch_norm(b, name, conv(b, name, x, cout, k, stride=stride, pad=k // 2), bn_vectors)
        return relu(b, name, y) if act else y

    x = image(224, 224)
    x = conv_bn("conv1", x, 64, 7, stride=2)
    x = pool(b, "pool1", x, 3, 2, pad=1)
    for stage, (blocks, width, stride) in enumerate([(3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)], 2):
        for i in range(1, blocks + 1):
            name = "res%d_%d" % (stage, i)
            s = stride if i == 1 else 1
            y = conv_bn(name + "/a", x, width, 1)
            y = conv_bn(name + "/b", y, width, 3, stride=s)  # stride on the 3x3 (ResNet v1.5)
            y = conv_bn(name + "/c", y, 4 * width, 1, act=False)
            shortcut = x
            if i == 1:
                shortcut = conv_bn(name + "/shortcut", x, 4 * width, 1, stride=s, act=False)
            add = Tensor(b.compute(name + "/add", [y.op, shortcut.op], y.elems()), y.h, y.w, y.c)
            x = relu(b, name, add)
    x = global_avg_pool(b, "pool5", x)
    x = fc(b, "fc1000", x, 1000, activation=False)
    softmax(b, x)
    return (b, "ResNet-50 v1.5 (He et al. 2015; torchvision), 224x224 input; 25,557,032 trainable "
               "parameters plus 53,120 batch-norm running statistics", 25610152)


def inception_v3():
    b = Builder()
    counter = [0]

    def cbr(x, cout, kh, kw=None, stride=1, pad="same", scope=""):
        counter[0] += 1
        name = "%sconv%d" % (scope, counter[0])
        y = conv(b, name, x, cout, kh, kw, stride=stride, pad=pad)
        return relu(b, name, batch_norm(b, name, y, 3))  # beta, moving mean, moving variance

    def avg_same(x, name):
        return pool(b, name, x, 3, 1, pad="same", kind="avg")

    x = image(299, 299)
    x = cbr(x, 32, 3, stride=2, pad="valid", scope="stem/")
    x = cbr(x, 32, 3, pad="valid", scope="stem/")
    x = cbr(x, 64, 3, scope="stem/")
    x = pool(b, "stem/pool1", x, 3, 2)
    x = cbr(x, 80, 1, pad="valid", scope="stem/")
    x = cbr(x, 192, 3, pad="valid", scope="stem/")
    x = pool(b, "stem/pool2", x, 3, 2)

    for m, pool_ch in enumerate([32, 64, 64]):  # mixed0-2: 35x35
        s = "mixed%d/" % m
        b1 = cbr(x, 64, 1, scope=s)
        b5 = cbr(cbr(x, 48, 1, scope=s), 64, 5, scope=s)
        b3 = cbr(cbr(cbr(x, 64, 1, scope=s), 96, 3, scope=s), 96, 3, scope=s)
        bp = cbr(avg_same(x, s + "branch_pool"), pool_ch, 1, scope=s)
        x = concat(b, s[:-1], [b1, b5, b3, bp])

    s = "mixed3/"  # 35x35 -> 17x17
    b3 = cbr(x, 384, 3, stride=2, pad="valid", scope=s)
    bd = cbr(cbr(cbr(x, 64, 1, scope=s), 96, 3, scope=s), 96, 3, stride=2, pad="valid", scope=s)
    bp = pool(b, s + "branch_pool", x, 3, 2)
    x = concat(b, "mixed3", [b3, bd, bp])

    for m, c7 in zip(range(4, 8), [128, 160, 160, 192]):  # mixed4-7: 17x17
        s = "mixed%d/" % m
        b1 = cbr(x, 192, 1, scope=s)
        b7 = cbr(cbr(cbr(x, c7, 1, scope=s), c7, 1, 7, scope=s), 192, 7, 1, scope=s)
        bd = cbr(x, c7, 1, scope=s)
        bd = cbr(bd, c7, 7, 1, scope=s)
        bd = cbr(bd, c7, 1, 7, scope=s)
        bd = cbr(bd, c7, 7, 1, scope=s)
        bd = cbr(bd, 192, 1, 7, scope=s)
        bp = cbr(avg_same(x, s + "branch_pool"), 192, 1, scope=s)
        x = concat(b, s[:-1], [b1, b7, bd, bp])

    s = "mixed8/"  # 17x17 -> 8x8
    b3 = cbr(cbr(x, 192, 1, scope=s), 320, 3, stride=2, pad="valid", scope=s)
    b7 = cbr(cbr(cbr(x, 192, 1, scope=s), 192, 1, 7, scope=s), 192, 7, 1, scope=s)
    b7 = cbr(b7, 192, 3, stride=2, pad="valid", scope=s)
    bp = pool(b, s + "branch_pool", x, 3, 2)
    x = concat(b, "mixed8", [b3, b7, bp])

    for m in (9, 10):  # 8x8
        s = "mixed%d/" % m
        b1 = cbr(x, 320, 1, scope=s)
        b3 = cbr(x, 384, 1, scope=s)
        b3 = concat(b, s + "branch3x3", [cbr(b3, 384, 1, 3, scope=s), cbr(b3, 384, 3, 1, scope=s)])
        bd = cbr(cbr(x, 448, 1, scope=s), 384, 3, scope=s)
        bd = concat(b, s + "branch3x3dbl", [cbr(bd, 384, 1, 3, scope=s), cbr(bd, 384, 3, 1, scope=s)])
        bp = cbr(avg_same(x, s + "branch_pool"), 192, 1, scope=s)
        x = concat(b, s[:-1], [b1, b3, bd, bp])

    x = global_avg_pool(b, "head", x)
    x = fc(b, "logits", x, 1000, activation=False)
    softmax(b, x)
    return (b, "Inception v3 (Szegedy et al. 2015; Keras layout, no auxiliary head), 299x299 "
               "input", 23851784)


# ---------------------------------------------------------------------------------------------
# The paper's synthetic graphs, identical to priority::make_seq32() / make_par32().
def seq32():
    b = Builder()
    for i in range(1, 33):
        b.recv("w%d" % i, 2 * 1024 * 1024 // BYTES_PER_PARAM)
        inputs = ["w%d" % i] + (["layer%d" % (i - 1)] if i > 1 else [])
        b._add({"name": "layer%d" % i, "kind": "compute", "inputs": inputs, "time": 0.001})
    return b, "seq-32 (TicTac paper): 32 sequential layers, one 2 MiB parameter each, 1 ms per layer", None


def par32():
    b = Builder()
    for i in range(1, 33):
        b.recv("w%d" % i, 2 * 1024 * 1024 // BYTES_PER_PARAM)
        b._add({"name": "op%d" % i, "kind": "compute", "inputs": ["w%d" % i], "time": 0.001})
    b._add({"name": "join", "kind": "compute", "inputs": ["op%d" % i for i in range(1, 33)], "time": 0.001})
    return b, "par-32 (TicTac paper): 32 parallel 2 MiB parameters, 1 ms per op, joined by one op", None


def render(name, b, description, synthetic):
    meta = {"description": description, "generator": "bench/graphs/make_model_graphs.py",
            "parameters": b.params, "bytes_per_parameter": BYTES_PER_PARAM,
            "recvs": sum(op["kind"] == "recv" for op in b.ops),
            "compute_ops": sum(op["kind"] == "compute" for op in b.ops)}
    if not synthetic:
        meta["time_model"] = ("forward pass; time = FLOPs per image x batch / device FLOP/s "
                              "(see docs/graph-format.md)")
        meta["batch"] = BATCH
        meta["device_flops_per_second"] = DEVICE_FLOPS
        meta["compute_seconds_total"] = float("%.6g" % sum(op.get("time", 0) for op in b.ops))
    lines = ["{",
             '  "format": %s,' % json.dumps(FORMAT),
             '  "name": %s,' % json.dumps(name),
             '  "meta": %s,' % json.dumps(meta),
             '  "ops": [']
    body = []
    for op in b.ops:
        fields = ['"name": %s' % json.dumps(op["name"]), '"kind": %s' % json.dumps(op["kind"])]
        if op.get("inputs"):
            fields.append('"inputs": %s' % json.dumps(op["inputs"]))
        if "time" in op:
            fields.append('"time": %r' % op["time"])
        if "bytes" in op:
            fields.append('"bytes": %d' % op["bytes"])
        body.append("    {" + ", ".join(fields) + "}")
    lines.append(",\n".join(body))
    lines += ["  ]", "}", ""]
    return "\n".join(lines)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    models = [("vgg16_like", vgg16), ("alexnet_like", alexnet), ("resnet50_like", resnet50),
              ("inception_v3_like", inception_v3), ("seq32", seq32), ("par32", par32)]
    for name, make in models:
        b, description, expected_params = make()
        if expected_params is not None and b.params != expected_params:
            sys.exit("%s: %d parameters, expected %d" % (name, b.params, expected_params))
        text = render(name, b, description, expected_params is None)
        json.loads(text)  # well-formed
        path = os.path.join(out_dir, name + ".json")
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
        print("%-20s %4d ops %4d recvs %11d params %8d bytes" % (
            name, len(b.ops), sum(op["kind"] == "recv" for op in b.ops), b.params, len(text)))


if __name__ == "__main__":
    main()
