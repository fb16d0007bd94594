#include "loom/kernels/onednn.h"

#include <vector>

#include "loom/kernels/convolution.h"
#include "loom/kernels/detail.h"

namespace loom::kernels::onednn {

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

dnnl::memory::format_tag plain_tag(size_t rank) {
  using tag = dnnl::memory::format_tag;
  static constexpr tag tags[] = {tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde, tag::abcdef};
  LOOM_CHECK(rank >= 1 && rank <= 6, ArgumentError, "oneDNN: tensors of rank ", rank,
             " are not supported (1 to 6)");
  return tags[rank - 1];
}

dnnl::memory::desc plain_desc(const dims& shape) {
  return dnnl::memory::desc(shape, dnnl::memory::data_type::f32, plain_tag(shape.size()));
}

dnnl::memory::desc activation_desc(const dims& shape, bool blocked) {
  using tag = dnnl::memory::format_tag;
  static constexpr tag tags[] = {tag::nCw16c, tag::nChw16c, tag::nCdhw16c};
  static_assert(kChannelBlock == 16);
  if (!blocked) return plain_desc(shape);
  LOOM_CHECK(shape.size() >= 3 && shape.size() <= 5 && shape[1] % 16 == 0, ArgumentError,
             "oneDNN: no blocked layout for an activation of rank ", shape.size(), " with ",
             shape.size() > 1 ? shape[1] : 0, " channels");
  return dnnl::memory::desc(shape, dnnl::memory::data_type::f32, tags[shape.size() - 3]);
}

dnnl::memory wrap(const dnnl::memory::desc& desc, const void* data) {
  return dnnl::memory(desc, engine(), const_cast<void*>(data));
}

void execute(const dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args,
             const char* what) {
  try {
    prim.execute(stream(), args);
    stream().wait();
  } catch (const dnnl::error& e) {
    throw Error(::loom::detail::concat(what, ": oneDNN failed: ", e.what()));
  }
}

namespace {
// A descriptor's bytes make a key: dnnl_memory_desc_t is plain data that oneDNN's
// initializers zero before filling, so equal descriptors have equal bytes.
std::string desc_bytes(const dnnl::memory::desc& d) {
  return std::string(reinterpret_cast<const char*>(&d.data), sizeof d.data);
}
}  // namespace

void reorder(const dnnl::memory& src, const dnnl::memory& dst) {
  const dnnl::memory::desc sd = src.get_desc(), dd = dst.get_desc();
  auto& prim = cached<dnnl::reorder>("reorder|" + desc_bytes(sd) + desc_bytes(dd),
                                     [&] { return dnnl::reorder(src, dst); });
  execute(prim, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}}, "reorder");
}

void* buffer(size_t slot, size_t bytes) {
  LOOM_CHECK(slot < 5, ArgumentError, "oneDNN buffer slot ", slot, " out of range");
  thread_local std::vector<float> buffers[5];
  std::vector<float>& b = buffers[slot];
  if (b.size() * sizeof(float) < bytes) b.resize((bytes + sizeof(float) - 1) / sizeof(float));
  return b.data();
}

dnnl::memory to_layout(const dnnl::memory::desc& mine, const void* data,
                       const dnnl::memory::desc& want, size_t slot) {
  dnnl::memory src = wrap(mine, data);
  if (want == mine) return src;
  dnnl::memory dst = wrap(want, buffer(slot, want.get_size()));
  reorder(src, dst);
  return dst;
}

Output::Output(const dnnl::memory::desc& have, const dnnl::memory::desc& mine, float* out,
               bool accumulate, size_t slot)
    : mem_(wrap(have == mine && !accumulate ? mine : have,
                have == mine && !accumulate ? out : buffer(slot, have.get_size()))),
      mine_(mine),
      out_(out),
      accumulate_(accumulate) {}

void Output::finish() {
  if (mem_.get_data_handle() == out_) return;
  if (!accumulate_) return reorder(mem_, wrap(mine_, out_));
  const float* src = static_cast<const float*>(mem_.get_data_handle());
  if (mem_.get_desc() != mine_) {
    void* tmp = buffer(3, mine_.get_size());
    reorder(mem_, wrap(mine_, tmp));
    src = static_cast<const float*>(tmp);
  }
  const size_t n = mine_.get_size() / sizeof(float);
  float* out = out_;
  detail::parallel_for(n, n, [&](size_t b, size_t e) {
#pragma omp simd
    for (size_t k = b; k < e; ++k) out[k] += src[k];
  });
}

std::string key(std::string_view kind, std::initializer_list<dims> groups) {
  std::string k(kind);
  for (const dims& g : groups) {
    k += '|';
    for (int64_t v : g) k += std::to_string(v) + ',';
  }
  return k;
}

}  // namespace loom::kernels::onednn
