"""A missing tictac.torch._C fails this suite when the build enabled torch (TICTAC_EXPECT_TORCH=1,
set by this folder's meson.build); see tests/expect_extension.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import expect_extension  # noqa: E402

expect_extension.install(globals(), "TICTAC_EXPECT_TORCH", "tictac.torch._C",
                         expect_extension.probe_torch)
