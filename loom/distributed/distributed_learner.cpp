#include "loom/distributed/distributed_learner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "loom/distributed/quantization.h"
#include "loom/graph/debugging.h"
#include "loom/learners/parallel.h"

namespace loom::distributed {

namespace {

constexpr int kFloatBits = 32;  // num_quantization_bits that means "no quantization"
const char* const kDataParallel = "data_parallel_distributed_learner";
const char* const kBlockMomentum = "block_momentum_distributed_learner";

// A tensor as the quantizer sees it: columns of `rows` contiguous elements. CNTK's column is
// the last axis (its first); Loom joins the axes before it while a column holds fewer than
// kMinColumnRows values, so that a convolution kernel's column is its window times its input
// channels rather than the kernel width (3 or 5 values beside 8 bytes of range).
constexpr size_t kMinColumnRows = 64;
struct Columns {
  size_t rows, cols;
};
Columns columns_of(const NDShape& shape) {
  size_t rows = 1;
  for (size_t axis = shape.rank(); axis > 0 && rows < kMinColumnRows; --axis)
    rows *= shape[axis - 1];
  return {rows, rows ? shape.total_size() / rows : 0};
}

// The layout of the residuals in checkpoints: 2 since columns of at least kMinColumnRows (1:
// the last axis), which moved the stripes' boundaries.
constexpr int64_t kResidualLayout = 2;

// The columns worker `rank` of n owns (CNTK's GetStripeForNode): an even split, the first
// cols % n workers one column more.
struct Stripe {
  size_t first, count;
};
Stripe stripe_of(size_t cols, size_t rank, size_t n) {
  const size_t base = cols / n, extra = cols % n;
  return {base * rank + std::min(extra, rank), base + (rank < extra ? 1 : 0)};
}

size_t column_bytes(DataType dtype, size_t rows, int bits) {
  return dispatch(dtype,
                  [&](auto zero) { return quantized_column_bytes<decltype(zero)>(rows, bits); });
}

// One line per parameter, what must agree between workers.
std::string model_description(const std::vector<Parameter>& parameters) {
  std::ostringstream s;
  for (const auto& p : parameters)
    s << p.uid() << '\t' << to_string(p.dtype()) << '\t' << p.shape().to_string() << '\n';
  return s.str();
}

std::vector<std::string> lines_of(const std::vector<std::byte>& bytes) {
  std::vector<std::string> lines;
  std::istringstream in(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool same_layout(const NDArrayView& a, const NDArrayView& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape();
}

std::string readable(const std::string& line) {
  std::string s = line;
  std::replace(s.begin(), s.end(), '\t', ' ');
  return "'" + s + "'";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// DistributedLearner

DistributedLearner::DistributedLearner(std::shared_ptr<Communicator> communicator,
                                       std::shared_ptr<Learner> learner, size_t distributed_after)
    : Learner(learner->parameters(), learner->options()),
      communicator_(std::move(communicator)),
      learner_(std::move(learner)),
      distributed_after_(distributed_after) {
  LOOM_CHECK(communicator_, ArgumentError, "distributed learner: the communicator is null");
  LOOM_CHECK(!std::dynamic_pointer_cast<DistributedLearner>(learner_), ArgumentError,
             "distributed learner: the learner to wrap is distributed already");
  ordered_ = parameters();
  std::sort(ordered_.begin(), ordered_.end(),
            [](const Parameter& a, const Parameter& b) { return a.uid() < b.uid(); });
}

bool DistributedLearner::update(std::unordered_map<Variable, NDArrayView>& gradients,
                                size_t training_sample_count, bool sweep_end) {
  MinibatchInfo info;
  info.at_end_of_sweep = sweep_end;
  info.number_of_samples = training_sample_count;
  return update(gradients, info);
}

void DistributedLearner::reset_learning_rate(const LearningRateSchedule& schedule,
                                             ReferenceMinibatchSize reference) {
  learner_->reset_learning_rate(schedule, reference);
}
size_t DistributedLearner::total_number_of_samples_seen() const {
  return learner_->total_number_of_samples_seen();
}
size_t DistributedLearner::total_number_of_minibatches_seen() const {
  return learner_->total_number_of_minibatches_seen();
}
size_t DistributedLearner::total_number_of_sweeps_seen() const {
  return learner_->total_number_of_sweeps_seen();
}
void DistributedLearner::set_progress_observer(ProgressObserver observer) {
  learner_->set_progress_observer(std::move(observer));
}

void DistributedLearner::check_models_agree() {
  if (models_checked_) return;
  const std::string mine = model_description(ordered_);
  const auto all = communicator_->all_gather_bytes(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(mine.data()), mine.size()));
  const auto reference = lines_of(all[0]);
  for (size_t w = 1; w < all.size(); ++w) {
    const auto lines = lines_of(all[w]);
    for (size_t i = 0; i < std::min(lines.size(), reference.size()); ++i) {
      const auto field = [](const std::string& l) { return l.substr(l.find('\t')); };
      LOOM_CHECK(field(lines[i]) == field(reference[i]), ShapeError,
                 "distributed training: the workers' models differ: parameter ", i + 1,
                 " (in uid order) is ", readable(lines[i]), " on worker ", w, " but ",
                 readable(reference[i]), " on worker 0; every worker must build the same model");
    }
    LOOM_CHECK(lines.size() == reference.size(), ShapeError,
               "distributed training: the workers' models differ: worker ", w, " trains ",
               lines.size(), " parameters, worker 0 ", reference.size(),
               "; every worker must build the same model");
  }
  models_checked_ = true;  // after a mismatch every call fails again: all workers saw it
}

Dictionary DistributedLearner::base_checkpoint(const char* kind) const {
  Dictionary d;
  d["distributed_learner"] = std::string(kind);
  d["localLearners"] = DictionaryVector{sharing_checkpoint() ? learner_->checkpoint_for_writing()
                                                             : learner_->create_checkpoint()};
  d["totalNumberOfSamplesSeen"] = uint64_t{sample_count_};
  return d;
}

void DistributedLearner::restore_base_checkpoint(const Dictionary& d, const char* kind) {
  LOOM_CHECK(d.contains("distributed_learner"), StateError,
             "the checkpoint holds a local learner's state; this learner is a ", kind,
             " (create the learners as when the checkpoint was saved)");
  LOOM_CHECK(d.get<std::string>("distributed_learner") == kind, StateError,
             "the checkpoint holds the state of a ", d.get<std::string>("distributed_learner"),
             "; this learner is a ", kind);
  const auto& locals = d.get<DictionaryVector>("localLearners");
  LOOM_CHECK(locals.size() == 1, StateError, "distributed learner checkpoint holds ", locals.size(),
             " local learners, expected 1");
  const auto samples = d.get<uint64_t>("totalNumberOfSamplesSeen");
  learner_->restore_from_checkpoint(Dictionary(locals[0].get<DictionaryMap>()));
  sample_count_ = samples;
}

// ---------------------------------------------------------------------------------------------
// Data parallel

namespace {

class DataParallelDistributedLearner final : public DistributedLearner {
 public:
  using DistributedLearner::update;

  DataParallelDistributedLearner(std::shared_ptr<Communicator> communicator,
                                 std::shared_ptr<Learner> learner, size_t distributed_after,
                                 int bits)
      : DistributedLearner(std::move(communicator), std::move(learner), distributed_after),
        bits_(bits) {
    LOOM_CHECK(bits == kFloatBits || (bits >= kMinQuantizationBits && bits <= kMaxQuantizationBits),
               ArgumentError, "data_parallel_distributed_learner: num_quantization_bits must be ",
               kMinQuantizationBits, "..", kMaxQuantizationBits, " or ", kFloatBits, ", got ",
               bits);
    if (quantized()) allocate_residuals();
  }

  void set_gradient_order(const std::vector<Variable>& order) override {
    LOOM_CHECK(!sum_ || !sum_->started(), StateError,
               "data_parallel_distributed_learner: the gradient order changed in the middle of "
               "a minibatch");
    std::vector<Variable> mine(exchange_order().begin(), exchange_order().end()), given = order;
    const auto by_uid = [](const Variable& a, const Variable& b) { return a.uid() < b.uid(); };
    std::sort(given.begin(), given.end(), by_uid);
    LOOM_CHECK(given == mine, ArgumentError,
               "data_parallel_distributed_learner: the gradient order must list the learner's ",
               mine.size(), " parameters once each; got ", order.size(), " variables");
    plan_sum(order);
  }

  void gradient_ready(const Variable& parameter, const NDArrayView& gradient) override {
    // Quantized aggregation needs every gradient at once; warm start sums nothing.
    if (quantized() || sample_count_ < distributed_after_) return;
    if (!sum_) plan_sum({exchange_order().begin(), exchange_order().end()});
    auto it = position_.find(parameter);
    LOOM_CHECK(it != position_.end(), ArgumentError, "distributed learner: ", parameter.describe(),
               " is not one of the learner's parameters");
    give(it->second, dense_gradient(parameter, gradient));
  }

  bool update(std::unordered_map<Variable, NDArrayView>& gradients, MinibatchInfo& info) override {
    // Before distributed_after (warm start) every worker has the same data: nothing to sum.
    const bool exchange = sample_count_ >= distributed_after_;
    if (exchange) {
      const ProfileScope profiled(ProfilerEvent::GradientAggregation);
      aggregate(gradients, info);
    }
    sample_count_ += info.number_of_samples;
    // Empty only when every worker's minibatch was: a worker without data of its own still
    // takes the global step.
    if (info.is_empty()) return false;
    return learner_->update(exchange ? global_ : gradients, info.number_of_samples,
                            info.at_end_of_sweep);
  }

  Dictionary create_checkpoint() const override {
    Dictionary d = base_checkpoint(kDataParallel);
    d["num_quantization_bits"] = int64_t{bits_};
    if (!quantized()) return d;
    // Each worker's residuals are its own; every worker's go into the checkpoint (which one
    // worker writes), each worker takes its own back.
    std::vector<std::byte> mine;
    for (const auto* set : {&residuals_, &stripe_residuals_})
      for (const auto& r : *set) {
        const auto* bytes = static_cast<const std::byte*>(r.raw_data());
        mine.insert(mine.end(), bytes, bytes + r.size() * size_of(r.dtype()));
      }
    const auto all = communicator_->all_gather_bytes(mine);
    DictionaryVector workers;
    for (size_t w = 0; w < all.size(); ++w) {
      DictionaryVector value, stripe;
      size_t offset = 0;
      auto take = [&](DictionaryVector& out, DataType dtype, const NDShape& shape) {
        NDArrayView t(dtype, shape);
        const size_t bytes = t.size() * size_of(dtype);
        std::memcpy(t.raw_data(), all[w].data() + offset, bytes);
        offset += bytes;
        out.emplace_back(t);
      };
      for (const auto& p : exchange_order()) take(value, p.dtype(), p.shape());
      for (const auto& p : exchange_order()) take(stripe, p.dtype(), stripe_shape(p, w));
      workers.emplace_back(Dictionary(DictionaryMap{{"value", value}, {"stripe", stripe}}));
    }
    d["residuals"] = std::move(workers);
    d["residualLayout"] = kResidualLayout;
    return d;
  }

  void restore_from_checkpoint(const Dictionary& d) override {
    const auto bits = d.get<int64_t>("num_quantization_bits");
    LOOM_CHECK(bits == bits_, StateError, "the checkpoint is of a data-parallel learner with ",
               bits, " quantization bits; this one has ", bits_);
    // This worker's residuals, checked before anything changes. Saved by another number of
    // workers, the stripes differ: the error feedback then starts again from 0.
    std::vector<NDArrayView> value, stripe;
    if (quantized()) {
      const int64_t layout = d.contains("residualLayout") ? d.get<int64_t>("residualLayout") : 1;
      LOOM_CHECK(layout == kResidualLayout, StateError,
                 "the checkpoint's quantization residuals are in layout ", layout,
                 " (columns of a tensor's last axis, written by an older Loom); this learner "
                 "uses layout ",
                 kResidualLayout, " (columns of at least ", kMinColumnRows,
                 " values). Resume with the Loom that wrote it, or start a new run from the "
                 "saved model");
    }
    if (quantized() &&
        d.get<DictionaryVector>("residuals").size() == communicator_->num_workers()) {
      const Dictionary own(
          d.get<DictionaryVector>("residuals")[communicator_->rank()].get<DictionaryMap>());
      for (const auto& v : own.get<DictionaryVector>("value"))
        value.push_back(v.get<NDArrayView>());
      for (const auto& v : own.get<DictionaryVector>("stripe"))
        stripe.push_back(v.get<NDArrayView>());
      LOOM_CHECK(value.size() == residuals_.size() && stripe.size() == stripe_residuals_.size(),
                 StateError, "distributed learner checkpoint holds residuals of ", value.size(),
                 " parameters; the learner has ", residuals_.size());
      for (size_t i = 0; i < value.size(); ++i)
        LOOM_CHECK(
            same_layout(value[i], residuals_[i]) && same_layout(stripe[i], stripe_residuals_[i]),
            StateError, "distributed learner checkpoint: the residuals of parameter ",
            exchange_order()[i].describe(), " are ", value[i].shape().to_string(), " and ",
            stripe[i].shape().to_string(), ", expected ", residuals_[i].shape().to_string(),
            " and ", stripe_residuals_[i].shape().to_string());
    }
    restore_base_checkpoint(d, kDataParallel);
    if (!quantized()) return;
    if (value.empty()) allocate_residuals();
    for (size_t i = 0; i < value.size(); ++i) {
      residuals_[i].copy_from(value[i]);
      stripe_residuals_[i].copy_from(stripe[i]);
    }
  }

 private:
  bool quantized() const { return bits_ != kFloatBits; }

  NDShape stripe_shape(const Parameter& p, size_t worker) const {
    const Columns c = columns_of(p.shape());
    return NDShape{stripe_of(c.cols, worker, communicator_->num_workers()).count, c.rows};
  }

  void allocate_residuals() {
    residuals_.clear();
    stripe_residuals_.clear();
    for (const auto& p : exchange_order()) {
      residuals_.emplace_back(p.dtype(), p.shape());
      stripe_residuals_.emplace_back(p.dtype(), stripe_shape(p, communicator_->rank()));
    }
  }

  // The AllReduceSum of the gradients in `order` and then of the loss, metric and count.
  void plan_sum(const std::vector<Variable>& order) {
    std::vector<AllReduceSum::Entry> entries;
    position_.clear();
    for (const auto& v : order) {
      position_.emplace(v, entries.size());
      entries.push_back({v.dtype(), v.shape().total_size()});
    }
    entries.push_back({DataType::Float64, 3});
    order_ = order;
    sum_ = std::make_unique<AllReduceSum>(*communicator_, std::move(entries));
  }

  // Gives the gradient of order_[i] to the float sum; the round's first is preceded by the
  // check of the workers' models (a collective of its own, done once per run).
  void give(size_t i, const NDArrayView& gradient) {
    if (!sum_->started()) check_models_agree();
    global_.insert_or_assign(order_[i], gradient);
    sum_->ready(i, gradient);
  }

  // Sums the gradients (into global_), the loss, the metric and the sample count (into info)
  // over the workers. The float sum completes what gradient_ready started.
  void aggregate(const std::unordered_map<Variable, NDArrayView>& gradients, MinibatchInfo& info) {
    double counts[3] = {info.eval_criterion, info.training_loss, double(info.number_of_samples)};
    if (quantized() && communicator_->num_workers() > 1) {  // one worker: nothing to save
      check_models_agree();
      std::vector<NDArrayView> tensors;
      for (const auto& p : exchange_order()) tensors.push_back(local_gradient(gradients, p, info));
      for (size_t i = 0; i < tensors.size(); ++i)
        global_.insert_or_assign(exchange_order()[i], tensors[i]);
      aggregate_quantized(tensors);
      communicator_->all_reduce_sum(counts);
    } else {
      if (!sum_) plan_sum({exchange_order().begin(), exchange_order().end()});
      for (size_t i = 0; i < order_.size(); ++i)  // those not given during the backward pass
        if (!sum_->is_ready(i)) give(i, local_gradient(gradients, order_[i], info));
      NDArrayView sums =
          NDArrayView::from_vector<double>(NDShape{3}, std::vector<double>(counts, counts + 3));
      sum_->ready(order_.size(), sums);
      sum_->finish();
      std::memcpy(counts, sums.data<double>(), sizeof(counts));
    }
    info.eval_criterion = counts[0];
    info.training_loss = counts[1];
    info.number_of_samples = size_t(std::llround(counts[2]));
    count_synchronization();
  }

  // The tensor of p that the workers sum: the caller's dense gradient itself (so the caller's
  // map ends up holding the global sum), a dense copy of a sparse one, zeros for an empty
  // minibatch (CNTK's PrepaireZeroGradients). The caller's map keeps its tensors: a Trainer
  // hands the same executor-owned tensors every minibatch.
  NDArrayView local_gradient(const std::unordered_map<Variable, NDArrayView>& gradients,
                             const Variable& p, const MinibatchInfo& info) const {
    if (info.is_empty()) return NDArrayView(p.dtype(), p.shape());
    auto it = gradients.find(p);
    LOOM_CHECK(it != gradients.end(), ArgumentError,
               "distributed learner: no gradient for parameter ", p.describe(), "");
    return dense_gradient(p, it->second);
  }

  static NDArrayView dense_gradient(const Variable& p, const NDArrayView& g) {
    LOOM_CHECK(g.dtype() == p.dtype() && g.shape() == p.shape(), ShapeError,
               "distributed learner: the gradient of parameter ", p.describe(), " is ",
               to_string(g.dtype()), g.shape().to_string(), ", the parameter ",
               to_string(p.dtype()), p.shape().to_string());
    return g.is_sparse() ? g.to_dense() : g;
  }

  // CNTK's quantized aggregation: each worker quantizes its gradients (value residual) and
  // sends stripe j to worker j; worker j sums the stripes it receives, quantizes the sum
  // (stripe residual) and sends it to all. The buffer holds, per owner, the owner's stripe of
  // every tensor, which is both what is sent to it and what it sends back.
  void aggregate_quantized(std::vector<NDArrayView>& tensors) {
    const size_t n = communicator_->num_workers(), me = communicator_->rank();
    std::vector<size_t> block_offset(n + 1, 0);  // per owner
    std::vector<std::vector<size_t>> offset(n, std::vector<size_t>(tensors.size()));
    size_t total = 0;
    for (size_t j = 0; j < n; ++j) {
      block_offset[j] = total;
      for (size_t t = 0; t < tensors.size(); ++t) {
        const Columns c = columns_of(tensors[t].shape());
        offset[j][t] = total;
        total += stripe_of(c.cols, j, n).count * column_bytes(tensors[t].dtype(), c.rows, bits_);
      }
    }
    block_offset[n] = total;
    std::vector<std::byte> buffer(total);
    std::vector<size_t> block_bytes(n);
    for (size_t j = 0; j < n; ++j) block_bytes[j] = block_offset[j + 1] - block_offset[j];
    // 1. Quantize every gradient, stripe by stripe, into its owner's block.
    for (size_t t = 0; t < tensors.size(); ++t)
      dispatch(tensors[t].dtype(), [&](auto zero) {
        using T = decltype(zero);
        const Columns c = columns_of(tensors[t].shape());
        for (size_t j = 0; j < n; ++j) {
          const Stripe s = stripe_of(c.cols, j, n);
          quantize_columns<T>(tensors[t].data<T>() + s.first * c.rows,
                              residuals_[t].data<T>() + s.first * c.rows, c.rows, s.count, bits_,
                              buffer.data() + offset[j][t]);
        }
      });
    // 2. Everyone's quantized copy of this worker's stripe.
    const size_t own = block_bytes[me];
    std::vector<std::byte> received(own * n);
    communicator_->all_to_all(buffer, block_bytes, received, std::vector<size_t>(n, own));
    // 3. Sum them, quantize the sum into this worker's block.
    for (size_t t = 0; t < tensors.size(); ++t)
      dispatch(tensors[t].dtype(), [&](auto zero) {
        using T = decltype(zero);
        const Columns c = columns_of(tensors[t].shape());
        const Stripe s = stripe_of(c.cols, me, n);
        if (s.count == 0) return;
        std::vector<T> sum(s.count * c.rows);
        const size_t at = offset[me][t] - block_offset[me];
        for (size_t j = 0; j < n; ++j)
          unquantize_columns<T>(received.data() + j * own + at, c.rows, s.count, bits_, sum.data(),
                                j > 0);
        quantize_columns<T>(sum.data(), stripe_residuals_[t].data<T>(), c.rows, s.count, bits_,
                            buffer.data() + offset[me][t]);
      });
    // 4. Every owner's quantized sum to everyone; all workers reconstruct the same gradients.
    communicator_->all_gather(buffer, block_bytes);
    for (size_t t = 0; t < tensors.size(); ++t)
      dispatch(tensors[t].dtype(), [&](auto zero) {
        using T = decltype(zero);
        const Columns c = columns_of(tensors[t].shape());
        for (size_t j = 0; j < n; ++j) {
          const Stripe s = stripe_of(c.cols, j, n);
          unquantize_columns<T>(buffer.data() + offset[j][t], c.rows, s.count, bits_,
                                tensors[t].data<T>() + s.first * c.rows, false);
        }
      });
  }

  int bits_;
  std::unordered_map<Variable, NDArrayView> global_;  // the summed gradients, for the learner
  // The float sum: the parameters in the order their gradients are ready, then the counts.
  std::vector<Variable> order_;
  std::unordered_map<Variable, size_t> position_;  // in order_
  std::unique_ptr<AllReduceSum> sum_;
  std::vector<NDArrayView> residuals_;         // per parameter (exchange order), its shape
  std::vector<NDArrayView> stripe_residuals_;  // per parameter, this worker's stripe
};

// ---------------------------------------------------------------------------------------------
// Block momentum

class BlockMomentumDistributedLearner final : public DistributedLearner {
 public:
  using DistributedLearner::update;

  BlockMomentumDistributedLearner(std::shared_ptr<Communicator> communicator,
                                  std::shared_ptr<Learner> learner, size_t block_size,
                                  const BlockMomentumOptions& o)
      : DistributedLearner(std::move(communicator), std::move(learner), o.distributed_after),
        options_(o),
        block_size_(block_size) {
    const size_t n = communicator_->num_workers();
    LOOM_CHECK(block_size >= n, ArgumentError, "block_momentum_distributed_learner: block_size ",
               block_size, " is less than one sample per worker (", n, " workers)");
    LOOM_CHECK(o.block_learning_rate > 0 && std::isfinite(o.block_learning_rate), ArgumentError,
               "block_momentum_distributed_learner: block_learning_rate must be > 0, got ",
               o.block_learning_rate);
    // CNTK's default: the time constant that gives a block momentum of 1 - 1/N per block.
    time_constant_ = o.block_momentum_as_time_constant
                         ? *o.block_momentum_as_time_constant
                         : (n == 1 ? 0.0 : -double(block_size) / std::log(1.0 - 1.0 / double(n)));
    LOOM_CHECK(time_constant_ >= 0 && std::isfinite(time_constant_), ArgumentError,
               "block_momentum_distributed_learner: block_momentum_as_time_constant must be "
               "finite and >= 0, got ",
               time_constant_);
    for (const auto& p : exchange_order()) {
      smoothed_.emplace_back(p.dtype(), p.shape());
      previous_.emplace_back(p.dtype(), p.shape());
      block_gradient_.emplace_back(p.dtype(), p.shape());
    }
  }

  size_t minibatch_size_scale_factor() const override { return communicator_->num_workers(); }

  bool update(std::unordered_map<Variable, NDArrayView>& gradients, MinibatchInfo& info) override {
    // Before distributed_after (warm start) every worker has the same data and takes the same
    // steps; the first block starts where the warm start ends.
    const bool distributed = sample_count_ >= distributed_after_;
    if (distributed && !previous_set_) start_block();
    // The local step first: the block update then leaves every worker with the same model.
    if (!info.is_empty()) learner_->update(gradients, info.number_of_samples, info.at_end_of_sweep);
    local_samples_ += info.number_of_samples;
    if (!distributed) {
      sample_count_ += info.number_of_samples;
      return !info.at_end_of_data;
    }
    const ProfileScope profiled(ProfilerEvent::GradientAggregation);
    const bool all_ended = share_counts(info);
    sample_count_ += info.number_of_samples;
    samples_in_block_ += info.number_of_samples;
    // The end of everyone's data ends the last block, however short.
    if (all_ended || samples_in_block_ >= block_size_) synchronize(all_ended);
    return !all_ended;
  }

  // Ends the current block first (a collective), so that every worker holds the same model
  // and the block's start need not be saved (as CNTK; a block without samples is left alone).
  Dictionary create_checkpoint() const override {
    // create_checkpoint is const in Learner; ending the block changes the parameters and the
    // block state, which is this learner's to change.
    const_cast<BlockMomentumDistributedLearner*>(this)->synchronize(false);
    Dictionary d;
    d["base"] = base_checkpoint(kBlockMomentum);
    d["localTotalNumSamplesSeen"] = uint64_t{local_samples_};
    DictionaryVector smoothed;
    for (const auto& s : smoothed_)
      smoothed.emplace_back(sharing_checkpoint() ? s : s.deep_clone());
    d["blockLevelSmoothedGradient"] = std::move(smoothed);
    return d;
  }

  void restore_from_checkpoint(const Dictionary& d) override {
    const auto& smoothed = d.get<DictionaryVector>("blockLevelSmoothedGradient");
    LOOM_CHECK(smoothed.size() == smoothed_.size(), StateError,
               "block momentum checkpoint holds smoothed gradients of ", smoothed.size(),
               " parameters; the learner has ", smoothed_.size());
    for (size_t i = 0; i < smoothed_.size(); ++i) {
      const auto& v = smoothed[i].get<NDArrayView>();
      LOOM_CHECK(same_layout(v, smoothed_[i]), StateError,
                 "block momentum checkpoint: smoothed gradient of parameter ",
                 exchange_order()[i].describe(), " is ", to_string(v.dtype()),
                 v.shape().to_string(), ", expected ", to_string(smoothed_[i].dtype()),
                 smoothed_[i].shape().to_string());
    }
    const auto local = d.get<uint64_t>("localTotalNumSamplesSeen");
    restore_base_checkpoint(d.get_dictionary("base"), kBlockMomentum);
    local_samples_ = local;
    for (size_t i = 0; i < smoothed_.size(); ++i)
      smoothed_[i].copy_from(smoothed[i].get<NDArrayView>());
    previous_set_ = false;  // the block starts from the restored parameters
    samples_in_block_ = 0;
  }

 private:
  void start_block() {
    for (size_t i = 0; i < previous_.size(); ++i)
      previous_[i].copy_from(exchange_order()[i].value());
    previous_set_ = true;
  }

  // Every minibatch the workers share their sample counts, loss and metric sums and whether
  // their data has ended (four numbers). So every worker counts the same samples in the block
  // and ends it at the same minibatch, however unequal their shares of the data; the Trainer
  // reports global counts, loss and metric; and all stop when every worker's data has ended.
  // Returns whether it has.
  bool share_counts(MinibatchInfo& info) {
    double values[4] = {double(info.number_of_samples), info.training_loss, info.eval_criterion,
                        info.at_end_of_data ? 1.0 : 0.0};
    communicator_->all_reduce_sum(values);
    info.number_of_samples = size_t(std::llround(values[0]));
    info.training_loss = values[1];
    info.eval_criterion = values[2];
    return std::llround(values[3]) == int64_t(communicator_->num_workers());
  }

  // CNTK's SynchronizeModel: the block gradient d = sum over workers of (start - local model);
  // v = bm v + (1 - bm) blr d; model = start - v (Nesterov: - bm v more); the next block
  // starts there. The last block (everyone's data has ended) has no next block to take its
  // gradients at Nesterov's look-ahead point, so it ends at start - v, where CNTK leaves the
  // look-ahead point as the trained model (1.5-1.7 points more test error on the Fashion-MNIST
  // MLP, docs/distributed.md "Accuracy"). bm = exp(-samples in the block over all workers / time
  // constant) (CNTK: this worker's samples / (time constant / N), the same for equal shares). A
  // block without samples (a checkpoint right after a block's end) changes nothing; CNTK would
  // apply v once more (bm = 1).
  void synchronize(bool last) {
    check_models_agree();
    if (samples_in_block_ == 0) return;  // the same on every worker: nothing to exchange
    const double bm =
        time_constant_ == 0 ? 0.0 : std::exp(-double(samples_in_block_) / time_constant_);
    for (size_t i = 0; i < block_gradient_.size(); ++i)
      dispatch(block_gradient_[i].dtype(), [&](auto zero) {
        using T = decltype(zero);
        const T* start = previous_[i].data<T>();
        const T* current = exchange_order()[i].value().template data<T>();
        T* d = block_gradient_[i].data<T>();
        learners_detail::parallel_for(block_gradient_[i].size(),
                                      [&](size_t k) { d[k] = start[k] - current[k]; });
      });
    communicator_->all_reduce_sum(block_gradient_);
    for (size_t i = 0; i < block_gradient_.size(); ++i)
      dispatch(block_gradient_[i].dtype(), [&](auto zero) {
        using T = decltype(zero);
        const T momentum = T(bm), gain = T((1 - bm) * options_.block_learning_rate);
        const bool nesterov = options_.use_nesterov_momentum && !last;
        T* start = previous_[i].data<T>();
        T* p = exchange_order()[i].value().template data<T>();
        T* v = smoothed_[i].data<T>();
        const T* d = block_gradient_[i].data<T>();
        learners_detail::parallel_for(block_gradient_[i].size(), [&](size_t k) {
          v[k] = momentum * v[k] + gain * d[k];
          p[k] = start[k] - v[k];
          if (nesterov) p[k] -= momentum * v[k];
          start[k] = p[k];
        });
      });
    samples_in_block_ = 0;
    count_synchronization();
    if (options_.reset_sgd_momentum_after_aggregation) learner_->reset_smoothed_gradients();
  }

  BlockMomentumOptions options_;
  size_t block_size_;  // samples over all workers
  double time_constant_ = 0;
  std::vector<NDArrayView> smoothed_;        // the block-level smoothed gradient v
  std::vector<NDArrayView> previous_;        // the model at the block's start
  std::vector<NDArrayView> block_gradient_;  // scratch: d
  bool previous_set_ = false;
  size_t samples_in_block_ = 0;  // over all workers
  size_t local_samples_ = 0;     // this worker's
};

}  // namespace

std::shared_ptr<DistributedLearner> data_parallel_distributed_learner(
    std::shared_ptr<Learner> learner, size_t distributed_after, int num_quantization_bits,
    std::shared_ptr<Communicator> communicator) {
  LOOM_CHECK(learner, ArgumentError, "data_parallel_distributed_learner: the learner is null");
  return std::make_shared<DataParallelDistributedLearner>(
      std::move(communicator), std::move(learner), distributed_after, num_quantization_bits);
}

std::shared_ptr<DistributedLearner> block_momentum_distributed_learner(
    std::shared_ptr<Learner> learner, size_t block_size, BlockMomentumOptions options,
    std::shared_ptr<Communicator> communicator) {
  LOOM_CHECK(learner, ArgumentError, "block_momentum_distributed_learner: the learner is null");
  return std::make_shared<BlockMomentumDistributedLearner>(std::move(communicator),
                                                           std::move(learner), block_size, options);
}

}  // namespace loom::distributed
