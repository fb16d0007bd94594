// CNTK's cntk.train.distributed: the communicator of the MPI job and the data-parallel learners. A
// script started without mpirun is the only worker (rank 0 of 1) and needs no MPI.
#include "python/src/binding.h"

namespace loom::python {

void add_distributed(py::module_ m) {
  using namespace distributed;
  py::class_<WorkerDescriptor>(m, "WorkerDescriptor")
      .def_readonly("global_rank", &WorkerDescriptor::global_rank)
      .def_readonly("host_id", &WorkerDescriptor::host_id)
      .def("__repr__", [](const WorkerDescriptor& w) {
        return "WorkerDescriptor(global_rank=" + std::to_string(w.global_rank) + ", host_id='" +
               w.host_id + "')";
      });
  // As CNTK's: rank, num_workers and finalize are static; the others are asked of the
  // communicator (mpi_communicator() or a distributed learner's).
  py::class_<Communicator, std::shared_ptr<Communicator>>(m, "Communicator")
      .def_static("rank", [] { return mpi_communicator()->rank(); })
      .def_static("num_workers", [] { return mpi_communicator()->num_workers(); })
      .def_static("finalize", [] { mpi_communicator()->finalize(); })
      .def("barrier", &Communicator::barrier, py::call_guard<py::gil_scoped_release>())
      .def("is_main", &Communicator::is_main)
      .def("current_worker", &Communicator::current_worker)
      .def("workers", &Communicator::workers, py::call_guard<py::gil_scoped_release>());
  m.def("mpi_communicator", &mpi_communicator);
  py::class_<DistributedLearner, Learner, std::shared_ptr<DistributedLearner>>(m,
                                                                               "DistributedLearner")
      .def("communicator", &DistributedLearner::communicator);
  m.def(
      "data_parallel_distributed_learner",
      [](std::shared_ptr<Learner> learner, size_t distributed_after, int num_quantization_bits,
         bool use_async_buffered_parameter_update) {
        if (use_async_buffered_parameter_update)
          throw ArgumentError(
              "data_parallel_distributed_learner: use_async_buffered_parameter_update=True is not "
              "supported: Loom aggregates gradients synchronously; leave it False");
        return data_parallel_distributed_learner(std::move(learner), distributed_after,
                                                 num_quantization_bits);
      },
      py::arg("learner"), py::arg("distributed_after") = kDistributedAfter,
      py::arg("num_quantization_bits") = kNumQuantizationBits,
      py::arg("use_async_buffered_parameter_update") = false, py::keep_alive<0, 1>());
  const BlockMomentumOptions block_momentum;  // the defaults
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
      py::arg("use_nestrov_momentum") = block_momentum.use_nesterov_momentum,  // CNTK's spelling
      py::arg("reset_sgd_momentum_after_aggregation") =
          block_momentum.reset_sgd_momentum_after_aggregation,
      py::arg("block_learning_rate") = block_momentum.block_learning_rate,
      py::arg("distributed_after") = block_momentum.distributed_after, py::keep_alive<0, 1>());
}

}  // namespace loom::python
