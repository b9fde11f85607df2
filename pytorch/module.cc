// The extension module gyre.torch loads (python/gyre/torch/): the process
// group class, made by the creator that registers backend "gyre".
#include <torch/csrc/utils/pybind.h>

#include "compression.h"
#include "process_group.h"

namespace py = pybind11;

PYBIND11_MODULE(_c10d, m) {
  m.doc() = "gyre's torch.distributed backend (docs/pytorch.md)";
  m.def("_stop_all", &gyre_torch::ProcessGroupGyre::stopAll, py::call_guard<py::gil_scoped_release>(),
        "Runs every live gyre group's queued calls and stops their threads (atexit).");
  // ProcessGroup's Python type is torch's; deriving from it here makes the
  // group an ordinary torch ProcessGroup to torch.distributed and DDP.
  py::object base = py::module_::import("torch._C._distributed_c10d").attr("ProcessGroup");
  py::class_<gyre_torch::ProcessGroupGyre, c10::intrusive_ptr<gyre_torch::ProcessGroupGyre>>(m, "ProcessGroupGyre",
                                                                                             base)
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, int64_t timeoutMs,
                       const std::string& name) {
             return gyre_torch::ProcessGroupGyre::create(store, rank, size, std::chrono::milliseconds(timeoutMs),
                                                         name);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"), py::arg("name"),
           py::call_guard<py::gil_scoped_release>())
      .def_static(
          "split",
          [](const c10::intrusive_ptr<gyre_torch::ProcessGroupGyre>& parent, int64_t timeoutMs,
             const std::string& name) {
            return gyre_torch::ProcessGroupGyre::split(parent, std::chrono::milliseconds(timeoutMs), name);
          },
          py::arg("parent"), py::arg("timeout_ms"), py::arg("name"), py::call_guard<py::gil_scoped_release>(),
          "A group of all of parent's ranks, split from its communicator.")
      .def_property_readonly("made_by", &gyre_torch::ProcessGroupGyre::madeBy,
                             "How the communicator was made: 'rendezvous' or 'split'.")
      .def(
          "allreduce_codec",
          [](gyre_torch::ProcessGroupGyre& pg, const at::Tensor& t, int codec, bool average) {
            return gyre_torch::allreduceCodec(pg, t, static_cast<gyreCodec_t>(codec), average);
          },
          py::arg("tensor"), py::arg("codec"), py::arg("average") = true, py::call_guard<py::gil_scoped_release>(),
          "AllReduce of a tensor in place with a codec (gyre.Codec), no state; returns a Work.");
  py::class_<gyre_torch::Compressor, std::shared_ptr<gyre_torch::Compressor>>(m, "Compressor")
      .def(py::init([](const c10::intrusive_ptr<gyre_torch::ProcessGroupGyre>& pg, int codec, const at::Tensor& like,
                       bool errorFeedback) {
             return std::make_shared<gyre_torch::Compressor>(pg, static_cast<gyreCodec_t>(codec), like.numel(),
                                                             like.scalar_type(), errorFeedback);
           }),
           py::arg("group"), py::arg("codec"), py::arg("like"), py::arg("error_feedback") = true,
           "A compressor for tensors of like's count and dtype.")
      .def("allreduce", &gyre_torch::Compressor::allreduce, py::arg("tensor"), py::arg("average") = true,
           py::call_guard<py::gil_scoped_release>(),
           "Compressed AllReduce of the compressor's tensor in place; returns a Work.")
      .def(
          "fits",
          [](const gyre_torch::Compressor& c, const at::Tensor& t) {
            return t.numel() == c.count() && t.scalar_type() == c.dtype();
          },
          py::arg("tensor"), "Whether the compressor is for tensors of this count and dtype.");
}
