// Shared oneDNN plumbing for the float32 kernels that run on oneDNN primitives (convolution,
// pooling, batch normalization). Internal to the kernels layer.
//
// How to use it (see convolution.cpp for a complete example):
//   namespace dnn = loom::kernels::onednn;
//   // 1. Key everything the primitive depends on: a kind, then groups of integers.
//   const std::string k = dnn::key("bnorm", {{n, c, h, w}, {flags}});
//   // 2. Create primitive descriptors and primitives once per key; later calls reuse them.
//   MyPrims& p = dnn::cached<MyPrims>(k, [&] { return MyPrims{...}; });
//   // 3. Wrap Loom's plain buffers (no copy), or reorder them into the layout the primitive
//   //    chose (to_layout / Output), and run on the shared stream.
//   dnn::execute(p.fwd, {{DNNL_ARG_SRC, dnn::wrap(dnn::plain_desc({n, c, h, w}), x)}, ...});
// Errors from oneDNN (dnnl::error) come out of `execute` and `cached` as loom::Error.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "loom/core/error.h"

namespace loom::kernels::onednn {

using dims = dnnl::memory::dims;

// The process-wide CPU engine and the calling thread's stream (created at first use). oneDNN runs
// on the same OpenMP pool as Loom's loops, so set_max_num_cpu_threads applies to it too.
const dnnl::engine& engine();
dnnl::stream& stream();

// The row-major layout tag of a tensor of the given rank (a, ab, abc, ... up to rank 6).
dnnl::memory::format_tag plain_tag(size_t rank);
// A descriptor of a dense float32 row-major tensor (NCHW for [N, C, H, W]).
dnnl::memory::desc plain_desc(const dims& shape);
// A descriptor of a float32 activation [N, C, spatial...] as Loom holds it: row-major, or
// blocked (nCw16c, nChw16c or nCdhw16c; see kernels::kChannelBlock).
dnnl::memory::desc activation_desc(const dims& shape, bool blocked);
// A memory object over caller-owned data (no copy). data may be const: oneDNN only reads
// inputs, and its API takes void*.
dnnl::memory wrap(const dnnl::memory::desc& desc, const void* data);

// Runs a primitive on the shared stream and waits. Translates dnnl::error into loom::Error
// naming `what`.
void execute(const dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args,
             const char* what = "oneDNN primitive");
// Copies src into dst across layouts (a reorder primitive, cached per descriptor pair).
void reorder(const dnnl::memory& src, const dnnl::memory& dst);

// Grow-only per-thread buffers for data in oneDNN's layouts (reordered weights, activations,
// results): slot 0 to 4 picks one of several alive at once; slot 3 is Output's, slot 4 batch
// normalization's blend of its two gradients.
void* buffer(size_t slot, size_t bytes);

// A memory in layout `want` holding Loom's data of layout `mine`: the data itself when the
// layouts agree, else a reorder of it into buffer `slot`.
dnnl::memory to_layout(const dnnl::memory::desc& mine, const void* data,
                       const dnnl::memory::desc& want, size_t slot);

// Where a primitive writes a result that belongs in Loom's data `out` of layout `mine`: `out`
// itself when the primitive's layout `have` is `mine` and the result overwrites it, else buffer
// `slot`; then finish() reorders into `out` or adds to it (accumulate).
class Output {
 public:
  Output(const dnnl::memory::desc& have, const dnnl::memory::desc& mine, float* out,
         bool accumulate, size_t slot);
  const dnnl::memory& mem() const { return mem_; }
  void finish();

 private:
  dnnl::memory mem_;
  dnnl::memory::desc mine_;
  float* out_;
  bool accumulate_;
};

// A cache key: kind, then the integer groups separated so that ({1,2},{3}) != ({1},{2,3}).
std::string key(std::string_view kind, std::initializer_list<dims> groups);

// Returns the object cached under key, creating it with make() at the first call. One cache
// per type T and thread; entries live until the thread ends (a training run meets a handful of
// shapes: the minibatch size and the last, smaller one). Per thread because oneDNN's CPU
// build (DNNL_ENABLE_CONCURRENT_EXEC off) gives each thread one scratchpad shared by the
// primitives that thread created: a primitive must run on the thread that created it, and
// never on two at once. Threads that evaluate a model concurrently (loom/deploy) thus each
// create their own; a returned reference stays valid on its thread.
template <class T, class Make>
T& cached(const std::string& key, Make&& make) {
  thread_local std::unordered_map<std::string, std::unique_ptr<T>> map;
  auto it = map.find(key);
  if (it == map.end()) {
    try {
      it = map.emplace(key, std::make_unique<T>(make())).first;
    } catch (const dnnl::error& e) {
      throw Error(
          ::loom::detail::concat("oneDNN could not create a primitive for ", key, ": ", e.what()));
    }
  }
  return *it->second;
}

}  // namespace loom::kernels::onednn
