// The Python extension `tictac.torch._C`: creates "tictac" process groups, installs priority
// tables, sets per-thread priorities, and runs the scheduling library (TIC, TAC, ...) on a
// tictac-graph/1 graph. Registration with torch.distributed happens in tictac/torch/__init__.py.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <unordered_map>

#include "integration/group/gate.h"
#include "integration/group/priority_table.h"
#include "integration/torch/backend.h"
#include "priority/graph_json.h"
#include "priority/schedule.h"

namespace py = pybind11;
using tictac::torch_adapter::TicTacBackend;

namespace {

TicTacBackend& as_tictac(const c10::intrusive_ptr<c10d::Backend>& backend) {
  auto* b = dynamic_cast<TicTacBackend*>(backend.get());
  TORCH_CHECK(b != nullptr, "tictac: this process group's backend is '",
              backend->getBackendName(), "', not 'tictac'; create the group with "
              "init_process_group(\"tictac\") or new_group(backend=\"tictac\")");
  return *b;
}

std::unordered_map<std::string, std::int64_t> schedule(const std::string& graph_json,
                                                       const std::string& policy,
                                                       double bandwidth_bps, std::uint64_t seed) {
  const tictac::priority::PolicyInfo* info = tictac::priority::find_policy(policy);
  if (info == nullptr) {
    throw py::value_error("unknown policy '" + policy + "'; choose one of " +
                          tictac::priority::policy_names());
  }
  if (!(bandwidth_bps > 0)) throw py::value_error("bandwidth_bps must be > 0");
  tictac::Result<tictac::priority::Graph> graph =
      tictac::priority::parse_graph_json(graph_json, "<graph>");
  if (!graph.ok()) throw py::value_error(graph.status().message());
  tictac::priority::PolicyOptions options;
  options.bandwidth_bps = bandwidth_bps;
  options.seed = seed;
  tictac::Result<tictac::priority::Schedule> s = info->fn(*graph, options);
  if (!s.ok()) throw py::value_error(s.status().message());
  std::unordered_map<std::string, std::int64_t> out;
  const auto& recvs = graph->recvs();
  for (std::size_t i = 0; i < recvs.size(); ++i) out[graph->op(recvs[i]).name] = s->priority[i];
  return out;
}

// The process group a "tictac" group is: torch's ProcessGroup with the tictac backend for CPU and
// CUDA tensors, named "tictac". torch names every ProcessGroup it builds around a plugin backend
// "custom" (backendTypeToString(CUSTOM)), which DDP's logging data and error messages report; a
// creator that returns a ProcessGroup is used as the group itself (distributed_c10d.py), so this
// one reports its real name. Collectives dispatch through the base class as for any group.
class TicTacProcessGroup final : public c10d::ProcessGroup {
 public:
  TicTacProcessGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     const c10::intrusive_ptr<c10d::Backend>& backend)
      : c10d::ProcessGroup(store, rank, size) {
    for (c10::DeviceType device : {c10::DeviceType::CPU, c10::DeviceType::CUDA}) {
      setBackend(device, BackendType::CUSTOM, backend);
    }
    setDefaultBackend(BackendType::CUSTOM);
  }
  const std::string getBackendName() const override { return "tictac"; }
};

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "TicTac c10d backend and scheduler bindings";
  m.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout,
         const std::string& group_name) -> c10::intrusive_ptr<c10d::ProcessGroup> {
        auto backend = c10::make_intrusive<TicTacBackend>(store, rank, size, timeout, group_name);
        return c10::make_intrusive<TicTacProcessGroup>(store, rank, size, backend);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("group_name") = "", py::call_guard<py::gil_scoped_release>(),
      "Joins the group (exchanges addresses through `store`, connects to every rank) and returns "
      "it as a ProcessGroup named \"tictac\" with the tictac backend for CPU and CUDA tensors.");
  m.def(
      "set_priorities",
      [](const c10::intrusive_ptr<c10d::Backend>& b,
         std::unordered_map<std::int64_t, std::int64_t> table, bool replace) {
        if (replace) {
          as_tictac(b).priorities().replace(std::move(table));
        } else {
          as_tictac(b).priorities().update(table);
        }
      },
      py::arg("backend"), py::arg("table"), py::arg("replace") = true);
  m.def("priority_of", [](const c10::intrusive_ptr<c10d::Backend>& b, std::int64_t tag) {
    return as_tictac(b).priorities().lookup(tag);
  });
  m.def("num_priorities", [](const c10::intrusive_ptr<c10d::Backend>& b) {
    return as_tictac(b).priorities().size();
  });
  m.def("address", [](const c10::intrusive_ptr<c10d::Backend>& b) { return as_tictac(b).address(); });
  m.def("peer_backends",
        [](const c10::intrusive_ptr<c10d::Backend>& b) { return as_tictac(b).peer_backends(); });
  m.def("is_tictac", [](const c10::intrusive_ptr<c10d::Backend>& b) {
    return dynamic_cast<TicTacBackend*>(b.get()) != nullptr;
  });
  m.def("push_thread_priority", &tictac::group::PriorityTable::push_thread_priority);
  m.def("pop_thread_priority", &tictac::group::PriorityTable::pop_thread_priority);
  m.def("thread_priority", &tictac::group::PriorityTable::thread_priority);
  py::class_<tictac::group::Gate, std::shared_ptr<tictac::group::Gate>>(
      m, "Gate", "Holds collectives posted under `after(gate)` back until open() (gate.h).")
      .def(py::init<>())
      .def("open", &tictac::group::Gate::open, py::call_guard<py::gil_scoped_release>())
      .def("fail", &tictac::group::Gate::fail, py::arg("why"),
           py::call_guard<py::gil_scoped_release>())
      .def("decided", &tictac::group::Gate::decided);
  m.def("push_thread_gate", &tictac::group::GateScope::push);
  m.def("pop_thread_gate", &tictac::group::GateScope::pop);
  m.def("schedule", &schedule, py::arg("graph_json"), py::arg("policy"),
        py::arg("bandwidth_bps") = 10e9, py::arg("seed") = 0,
        "Priorities (recv op name -> priority, smaller first) of a tictac-graph/1 graph.");
  m.attr("__version__") = TICTAC_VERSION;
}
