// The extension module gyre.torch loads (python/gyre/torch/): the process
// group class, made by the creator that registers backend "gyre".
#include <torch/csrc/utils/pybind.h>

#include "process_group.h"

namespace py = pybind11;

PYBIND11_MODULE(_c10d, m) {
  m.doc() = "gyre's torch.distributed backend (docs/pytorch.md)";
  // ProcessGroup's Python type is torch's; deriving from it here makes the
  // group an ordinary torch ProcessGroup to torch.distributed and DDP.
  py::object base = py::module_::import("torch._C._distributed_c10d").attr("ProcessGroup");
  py::class_<gyre_torch::ProcessGroupGyre, c10::intrusive_ptr<gyre_torch::ProcessGroupGyre>>(m, "ProcessGroupGyre",
                                                                                             base)
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, int64_t timeoutMs,
                       const std::string& name) {
             return c10::make_intrusive<gyre_torch::ProcessGroupGyre>(store, rank, size,
                                                                      std::chrono::milliseconds(timeoutMs), name);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"), py::arg("name"),
           py::call_guard<py::gil_scoped_release>());
}
