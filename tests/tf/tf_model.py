"""The small Keras-free model of the tf adapter tests: a 3-layer MLP of float64 tf.Variables."""
import numpy as np
import tensorflow as tf

FORWARD = ["w1", "b1", "w2", "b2", "w3", "b3"]
FORWARD_NOBIAS = ["w1", "w2", "w3", "w4"]  # 4 square weights (2 MiB each at dim 512, float64)


def build(dim=64, seed=0, reverse=False, dtype=tf.float64, bias=True, on_layer=None):
    """bias=True: w1 b1 w2 b2 (dim x dim) w3 b3 (dim x 4). bias=False: w1..w4 all dim x dim,
    out = the first 4 columns (every transfer large enough for the rendezvous path).
    on_layer(k, h) -> h: called on each layer's output (k = 0, 1, ...), e.g. a timing probe."""
    hook = on_layer or (lambda k, h: h)
    rng = np.random.default_rng(seed)
    names = FORWARD if bias else FORWARD_NOBIAS
    shapes = {"w1": [dim, dim], "b1": [dim], "w2": [dim, dim], "b2": [dim], "w3": [dim, 4], "b3": [4]}
    if not bias:
        shapes = {n: [dim, dim] for n in names}
    v = {n: tf.Variable(rng.normal(0, 1.0 / np.sqrt(dim), shapes[n]), dtype=dtype, name=n) for n in names}
    order = list(reversed(names)) if reverse else list(names)
    variables = [v[n] for n in order]

    def forward(x):
        if not bias:
            h = x
            for k, n in enumerate(names[:-1]):
                h = hook(k, tf.tanh(tf.matmul(h, v[n])))
            return hook(len(names) - 1, tf.matmul(h, v[names[-1]])[:, :4])
        h = hook(0, tf.tanh(tf.matmul(x, v["w1"]) + v["b1"]))
        h = hook(1, tf.tanh(tf.matmul(h, v["w2"]) + v["b2"]))
        return hook(2, tf.matmul(h, v["w3"]) + v["b3"])

    def loss_fn(x, y):
        return tf.reduce_mean(tf.square(forward(x) - y))

    return variables, order, forward, loss_fn


def data(workers, batch, dim, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(workers * batch, dim))
    y = rng.normal(size=(workers * batch, 4))
    return x, y


def reference(dim, steps, workers, batch, lr, seed=0, reverse=False, bias=True):
    """Single-process SGD on the concatenated batch."""
    variables, order, _, loss_fn = build(dim, seed, reverse, bias=bias)
    x, y = data(workers, batch, dim)
    for _ in range(steps):
        with tf.GradientTape() as tape:
            loss = loss_fn(tf.constant(x), tf.constant(y))
        for v, g in zip(variables, tape.gradient(loss, variables)):
            v.assign_sub(lr * g)
    return {n: v.numpy() for n, v in zip(order, variables)}
