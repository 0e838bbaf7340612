"""Prints what Meson needs to build against the installed torch, one item per line:
version, include dirs (';'-joined), library dir, CXX11 ABI (0/1), Python include dir, the
extension-module suffix. Exit 1 (with the reason on stderr) when torch is missing."""
import sys
import sysconfig

try:
    import torch
    from torch.utils import cpp_extension
except Exception as exc:  # pragma: no cover - reported by meson
    print(f"torch not importable: {exc}", file=sys.stderr)
    sys.exit(1)

print(torch.__version__)
print(";".join(cpp_extension.include_paths()))
print(cpp_extension.library_paths()[0])
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(sysconfig.get_paths()["include"])
print(sysconfig.get_config_var("EXT_SUFFIX"))
