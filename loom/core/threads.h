// The CPU thread count shared by Loom's loops (OpenMP) and oneDNN.
#pragma once

namespace loom {

// Caps the threads used by compute; n >= 1. Defaults to the cores available.
void set_max_num_cpu_threads(int n);
int get_max_num_cpu_threads();

}  // namespace loom
