"""Prints what Meson needs to build the TicTac TF op library against the installed TensorFlow,
one item per line: version, include dir, library dir, compile flags (';'-joined; from
tf.sysconfig.get_compile_flags(), without the -I and --std entries). Exit 1 with the reason on
stderr when TensorFlow cannot be imported or its framework library is missing."""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
try:
    import tensorflow as tf
except Exception as exc:  # reported by meson
    print(f"tensorflow not importable: {exc}", file=sys.stderr)
    sys.exit(1)

inc = tf.sysconfig.get_include()
lib = tf.sysconfig.get_lib()
if not os.path.exists(os.path.join(lib, "libtensorflow_framework.so.2")):
    print(f"no libtensorflow_framework.so.2 in {lib}", file=sys.stderr)
    sys.exit(1)
if not os.path.exists(os.path.join(inc, "tensorflow", "c", "kernels.h")):
    print(f"no tensorflow/c/kernels.h under {inc}", file=sys.stderr)
    sys.exit(1)
flags = [f for f in tf.sysconfig.get_compile_flags()
         if not f.startswith("-I") and not f.startswith("--std") and not f.startswith("-std")]
print(tf.__version__)
print(inc)
print(lib)
print(";".join(flags))
