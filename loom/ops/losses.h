// Losses and metrics (CNTK's cntk.losses and cntk.metrics). Each gives one value per sample,
// of shape [1] unless said otherwise (cosine_distance: [], as CNTK's); the Trainer sums them over
// the minibatch's samples. The operands have the same sample shape; an operand without dynamic
// axes (a constant or parameter) applies to every sample, and its gradient is the sum over the
// samples. CNTK's minibatch-level criteria (lambda_rank, ndcg_at_1, edit_distance_error) give
// CNTK's one number for the minibatch instead: a scalar (shape []) without dynamic axes, which
// the Trainer divides by the samples it counts as CNTK's (trainer.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/axis.h"
#include "loom/graph/function.h"

namespace loom {

// Σ (output − target)² over the sample's elements.
Function squared_error(const Variable& output, const Variable& target,
                       const std::string& name = "");
// logsumexp(z) − Σ target·z (CNTK's, whatever the target sums to): cross entropy of softmax(z)
// against target (one-hot or soft, dense or sparse), taken over all elements of the sample (its
// only axis, usually).
Function cross_entropy_with_softmax(const Variable& z, const Variable& target,
                                    const std::string& name = "");
// Along one static axis of the sample (CNTK's axis argument): what CNTK's composite
// reduce_log_sum_exp(z, axis) − reduce_sum(target·z, axis) computes, the axis kept as 1 (for a
// vector sample the same as the function above, which it then is). One op whose shape inference
// reads the axis, so that a placeholder's shape may be known later (a criterion made with
// @Function). An ArgumentError names the function for a non-static or out-of-range axis.
Function cross_entropy_with_softmax(const Variable& z, const Variable& target, const Axis& axis,
                                    const std::string& name = "");
// −Σ [target·log(output) + (1 − target)·log(1 − output)].
Function binary_cross_entropy(const Variable& output, const Variable& target,
                              const std::string& name = "");
// CNTK's classification_error: at top_n 1, 1 - target . hardmax(z) (hardmax: z's first
// largest entry), fractional for a target that is not one-hot; at top_n > 1, 1 when target's
// class (its first largest entry) is not among the top_n largest entries of z, else 0, where
// among equal scores the earlier entry ranks first. Not differentiable: Function::grad of a
// graph whose output depends on parameters only through it is an ArgumentError.
inline constexpr size_t kClassificationErrorTopN = 1;  // CNTK's default topN
Function classification_error(const Variable& z, const Variable& target,
                              size_t top_n = kClassificationErrorTopN,
                              const std::string& name = "");
// CNTK's ClassificationError node, what CNTK's model files hold: the top_n > 1 rule above at
// every top_n (at 1: whether z's and target's first largest entries differ).
Function classification_error_node(const Variable& z, const Variable& target, size_t top_n,
                                   const std::string& name = "");
// Along one static axis of the sample (CNTK's axis argument): a vector sample along its axis is
// the function above; otherwise what CNTK's composite computes (top_n must be 1): a slice along
// the axis is wrong where target differs from (z == its max along the axis), and the value is
// the mean over the slices of the sample, every axis kept as 1. One op, as
// cross_entropy_with_softmax's.
Function classification_error(const Variable& z, const Variable& target, size_t top_n,
                              const Axis& axis, const std::string& name = "");

// The cosine of the angle between x and y, over all elements of the sample: x·y / (|x| |y|),
// one number (shape []) per sample, as CNTK's CosDistance (a norm below 1e-30 counts as 1e-30,
// so a zero vector gives 0, not NaN).
Function cosine_distance(const Variable& x, const Variable& y, const std::string& name = "");

// For each row j of the minibatch (samples in order; sequences packed step by step, as CNTK's
// minibatch columns), the cosine distance of x_j with y_j followed by that with the
// num_negative_samples "negative" rows y_{(j + shift + i - 1) mod rows}, i = 1..n: a
// [num_negative_samples + 1] vector per row (CNTK's CosDistanceWithNegativeSamples, the DSSM
// criterion's input). Both operands have dynamic axes; shift and num_negative_samples are >= 1.
Function cosine_distance_with_negative_samples(const Variable& x, const Variable& y, size_t shift,
                                               size_t num_negative_samples,
                                               const std::string& name = "");

// CNTK's Logistic with weights: −Σ weight · log(target·output + (1 − target)·(1 − output)) over
// the sample's elements, which for 0/1 targets is the weighted binary cross entropy. (CNTK's node
// also scales its minibatch total by #samples / Σweight; its gradient, which this one is, does
// not: the values agree when the weights average 1.)
Function weighted_binary_cross_entropy(const Variable& output, const Variable& target,
                                       const Variable& weight, const std::string& name = "");

// The ranking criteria. output (a score), gain and group hold one number per sample (shape [1]
// or []); the samples of the minibatch (sequences one after another, each in step order) form
// groups of consecutive samples with equal group, each listed in decreasing order of gain. A
// group's samples are ranked by decreasing score (equal scores: the smaller gain first, as
// CNTK's sort). The value is CNTK's one number for the minibatch of N samples (shape [], no
// dynamic axes), which the Trainer divides by N.
//
// lambda_rank: the minibatch's value is (1 − mean over groups of NDCG) · 100 · N, with NDCG =
// DCG / (the DCG of the listed order), DCG = Σ gain / ln(2 + rank) (a group of ideal DCG 0 has
// NDCG 0). Its gradient is not the value's but LambdaRank's: for each pair i before j of a
// group with gain_i > gain_j (and gain_i above the group's least), λ = −|ΔNDCG_ij| /
// (1 + exp(s_i − s_j)) is added to s_i's gradient and taken from s_j's, times the output's
// gradient. Only output (the scores) has a gradient.
Function lambda_rank(const Variable& output, const Variable& gain, const Variable& group,
                     const std::string& name = "");
// ndcg_at_1: the minibatch's value is (mean over groups of gain(top ranked) / gain(first listed))
// · 100 · N (a group whose first gain is 0 counts 0). A metric: no gradient.
Function ndcg_at_1(const Variable& output, const Variable& gain, const Variable& group,
                   const std::string& name = "");

// CNTK's edit_distance_error keyword arguments, with its names and defaults.
struct EditDistanceOptions {
  double sub_pen = 1, del_pen = 1, ins_pen = 1;
  bool squash_inputs = false;  // merge runs of the same label (before dropping ignored ones)
  std::vector<size_t> tokens_to_ignore = {};
};
// The edit distance between the label sequences of a and b (each step's label is its first
// largest entry), counted as CNTK's EditDistanceError counts it: the dynamic program minimizes
// the penalized cost, and the substitutions, deletions and insertions of the path it picks are
// counted 1 each. Each sequence of the minibatch (a sample without a sequence axis is a sequence
// of one step) is compared with b's; the value is CNTK's for the minibatch (shape [], no dynamic
// axes), errors · #steps / (Σ length of b's label sequences; 1 if that is 0), which the Trainer
// divides by #steps (a's): its average is the error rate. A metric: no gradient.
Function edit_distance_error(const Variable& a, const Variable& b,
                             const EditDistanceOptions& options = {}, const std::string& name = "");

// CNTK's fmeasure keyword arguments.
struct FMeasureOptions {
  double beta = 1;
};
// 1 − F_beta of output against target: with c = Σ output·target, precision = c / Σ output and
// recall = c / Σ target, 1 − (1 + β²)·precision·recall / (β²·precision + recall). The sums run
// over all static axes, or over the last two of a rank-3 sample (the first being the class
// axis), as CNTK's Python composite; built from elementwise ops and reductions.
Function fmeasure(const Variable& output, const Variable& target,
                  const FMeasureOptions& options = {}, const std::string& name = "");

// CNTK's nce_loss keyword arguments.
struct NceOptions {
  size_t num_samples = 32;
  bool allow_duplicates = true;
  std::optional<uint64_t> seed = std::nullopt;  // none: CNTK's auto_select
};
// Noise contrastive estimation (CNTK's NCE block, after Dyer's notes): per sample, the logistic
// loss of telling the label (logit W_label·x + b_label) from num_samples classes drawn from
// noise_distribution for the whole minibatch, each weighted by its importance. weights
// [classes, dim] (dim may be inferred), biases [classes, 1], inputs [dim] per sample, labels
// [classes] per sample (one-hot, sparse or dense), noise_distribution [classes] (weights >= 0,
// normalized by the op). Gradients for weights, biases and inputs. The formula is at NceOp in
// losses.cpp.
Function nce_loss(const Variable& weights, const Variable& biases, const Variable& inputs,
                  const Variable& labels, const Variable& noise_distribution,
                  const NceOptions& options = {}, const std::string& name = "");

// CNTK's hierarchical_softmax_layer (its Python composite): the label_dim labels fall into
// label_classes classes (0: ceil(sqrt(label_dim))) of n = ceil(label_dim / label_classes)
// labels each. Makes the parameters hsoftmax_w1 [input_dim, label_classes], hsoftmax_b1
// [label_classes], hsoftmax_w2s [label_classes, input_dim, n] and hsoftmax_b2s
// [label_classes, n] (glorot_normal), and gives the probability of label_index ([1] per
// sample: label_index holds the label as a number), the class probabilities and, per class,
// the probabilities of its labels.
struct HierarchicalSoftmax {
  Function output_prob, class_probs;
  std::vector<Function> all_probs;
};
HierarchicalSoftmax hierarchical_softmax_layer(const Variable& input, const Variable& label_index,
                                               size_t label_dim, size_t label_classes = 0);

}  // namespace loom
