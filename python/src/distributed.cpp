// Distributed training: the communicator of the MPI job and the data-parallel learners. A
// script started without mpirun is the only worker (rank 0 of 1) and needs no MPI.
#include "python/src/binding.h"

namespace loom::python {

void add_distributed(py::module_& m) {
  using namespace distributed;
  py::class_<Communicator, std::shared_ptr<Communicator>>(m, "Communicator")
      .def_static("rank", [] { return mpi_communicator()->rank(); })
      .def_static("num_workers", [] { return mpi_communicator()->num_workers(); })
      .def_static("finalize", [] { mpi_communicator()->finalize(); })
      .def_static(
          "barrier", [] { mpi_communicator()->barrier(); },
          py::call_guard<py::gil_scoped_release>());
  py::class_<DistributedLearner, Learner, std::shared_ptr<DistributedLearner>>(
      m, "DistributedLearner");
  m.def(
      "data_parallel_distributed_learner",
      [](std::shared_ptr<Learner> learner, size_t distributed_after, int num_quantization_bits) {
        return data_parallel_distributed_learner(std::move(learner), distributed_after,
                                                 num_quantization_bits);
      },
      py::arg("learner"), py::arg("distributed_after") = 0, py::arg("num_quantization_bits") = 32,
      py::keep_alive<0, 1>());
  m.def(
      "block_momentum_distributed_learner",
      [](std::shared_ptr<Learner> learner, size_t block_size, std::optional<double> time_constant,
         bool use_nesterov_momentum, bool reset_sgd_momentum_after_aggregation,
         double block_learning_rate, size_t distributed_after) {
        return block_momentum_distributed_learner(
            std::move(learner), block_size,
            {.block_momentum_as_time_constant = time_constant,
             .use_nesterov_momentum = use_nesterov_momentum,
             .reset_sgd_momentum_after_aggregation = reset_sgd_momentum_after_aggregation,
             .block_learning_rate = block_learning_rate,
             .distributed_after = distributed_after});
      },
      py::arg("learner"), py::arg("block_size"),
      py::arg("block_momentum_as_time_constant") = py::none(),
      py::arg("use_nesterov_momentum") = true,
      py::arg("reset_sgd_momentum_after_aggregation") = true, py::arg("block_learning_rate") = 1.0,
      py::arg("distributed_after") = 0, py::keep_alive<0, 1>());
}

}  // namespace loom::python
