"""Probe (b): load the C-API custom ops and call them eagerly and in a tf.function.

usage: test_fill_op.py LIB.so [OP_NAME ...]   (default: tictac_fill tictac_fill_async)
"""
import sys
import numpy as np
import tensorflow as tf

lib = tf.load_op_library(sys.argv[1])
names = sys.argv[2:] or ["tictac_fill", "tictac_fill_async"]
print("ops in library:", sorted(n for n in dir(lib) if n.startswith("Tictac")))
want = 1.0 + 0.5 * np.arange(4, dtype=np.float32)
ok = True
for name in names:
    op = getattr(lib, name)
    eager = op(base=tf.constant(1.0), n=4).numpy()

    @tf.function
    def f(b):
        return op(base=b, n=4) * 2.0

    graph = f(tf.constant(1.0)).numpy()
    good = np.allclose(eager, want) and np.allclose(graph, 2 * want)
    ok &= good
    print(f"{name}: eager={eager.tolist()} tf.function={graph.tolist()} -> {'OK' if good else 'WRONG'}")
    g = f.get_concrete_function(tf.TensorSpec([], tf.float32)).graph
    print(f"  concrete graph ops: {[o.type for o in g.get_operations()]}", flush=True)
print("FILL_OP_RESULT", "PASS" if ok else "FAIL", flush=True)
sys.exit(0 if ok else 1)
