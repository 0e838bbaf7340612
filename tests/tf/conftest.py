"""A missing TensorFlow op library (import tictac.tf) fails this suite when the build enabled tf
(TICTAC_EXPECT_TF=1, set by this folder's meson.build); see tests/expect_extension.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import expect_extension  # noqa: E402

expect_extension.install(globals(), "TICTAC_EXPECT_TF", "the tictac.tf op library",
                         expect_extension.probe_tf)
