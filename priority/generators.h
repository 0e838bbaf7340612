// Graph generators for tests, benchmarks and the bundled model graphs. Deterministic: the same
// arguments (and seed) always give the same graph. Times are seconds, bytes are parameter sizes.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "priority/graph.h"

namespace tictac::priority {

// w1 -> c1 -> c2 ... : n layers, layer i = recv "w<i>" (bytes) feeding compute "layer<i>"
// (time), which also consumes layer<i-1>.
Result<Graph> make_chain(int layers, std::uint64_t bytes_per_param, double compute_time);

// The paper's synthetic "seq-32": 32 sequential layers, one 2 MiB parameter each.
Result<Graph> make_seq32(double compute_time_per_layer = 1e-3);

// The paper's synthetic "par-32": one layer, 32 parallel 2 MiB parameters, each feeding its
// own compute op, all joined by a final op.
Result<Graph> make_par32(double compute_time_per_op = 1e-3);

// Inception-like: a stem chain, then `modules` modules of `branches` parallel branches of
// 1-3 conv layers each (own parameter each), joined by a concat, then a head.
Result<Graph> make_inception_like(int modules, int branches, std::uint64_t seed);

// Seeded random DAG with `ops` ops of which `recvs` are recvs. Each compute op takes 1-3 inputs
// from earlier ops (recvs or computes), every recv is consumed by at least one compute op.
Result<Graph> make_random_dag(int ops, int recvs, std::uint64_t seed);

// Large DNN-shaped graph for scaling benchmarks: `recvs` parameters spread over layers of
// mostly single-input compute ops with occasional branches and joins, `ops` ops in total.
Result<Graph> make_layered(int ops, int recvs, std::uint64_t seed);

}  // namespace tictac::priority
