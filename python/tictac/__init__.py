"""TicTac: parameter transfers in the order the computation needs them.

Subpackages: ``tictac.torch`` (the "tictac" c10d backend and parameter-server training).
"""
__version__ = "0.1.0"
