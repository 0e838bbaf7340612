"""TicTac's benchmarks as a package: ``bench.e2e`` (end-to-end runs), ``bench.cluster`` (the
emulated cluster). Run from the repository root with ``python -m bench.e2e`` (or bench/e2e/e2e)."""
