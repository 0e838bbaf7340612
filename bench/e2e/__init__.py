"""The end-to-end benchmark (see README.md): profile, calibrate, simulate, run, plot, cli.
Importing the package loads nothing heavy (the ranks import bench.e2e.emulate and tinynet)."""
