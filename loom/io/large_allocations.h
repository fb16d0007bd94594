// The reader's buffers are large and short-lived: a decoded image chunk or a packed minibatch of
// 224 x 224 x 3 floats is 30-40 MB, allocated and freed every few minibatches. glibc maps every
// allocation above its mmap threshold (at most 32 MB by default) afresh and unmaps it when
// freed, so each one costs a page fault and a kernel zeroing per 4 KB: that was half of the
// image reader's time (bench/README.md, image_reader).
#pragma once

namespace loom {

// Once per process, before a MinibatchSource reads: raises glibc's mmap and trim thresholds to
// 256 MB, so allocations below that come from the heap and freed ones are reused instead of
// returned to the system; the process keeps its peak heap. Left alone where the user tuned
// malloc (GLIBC_TUNABLES naming malloc, MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_ set).
void reuse_large_allocations();

}  // namespace loom
