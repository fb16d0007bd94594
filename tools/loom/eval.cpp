// loom eval MODEL --data FILE ... --output FILE: runs a model over a data set in file order and
// writes its outputs (CTF or CSV); with --labels, prints the classification error.
//
// Data: a CTF text file (`--data test.ctf`, every stream in one file) and/or IDX files, one
// stream each (`--data features=t10k-images-idx3-ubyte.gz`). Each argument reads the stream of
// its own name, or the one --map gives (`--map features=pixels`; an argument without a name by
// its uid, as `loom info` lists it); a model with one argument and one data stream needs no map.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "loom/core/precision.h"
#include "loom/deploy/model_runner.h"
#include "loom/io/ctf_deserializer.h"
#include "loom/io/idx_deserializer.h"
#include "loom/io/minibatch_source.h"
#include "tools/loom/commands.h"

namespace loom::tools {
namespace {

struct EvalOptions {
  std::string model = {};
  std::vector<std::string> data = {};
  std::vector<std::string> map = {};
  std::string labels = {};
  std::vector<std::string> sparse = {};
  std::vector<std::string> scale = {};
  std::string output = {};
  std::string format = {};
  size_t minibatch_size = 256;
  bool bf16 = false;
};

// "key=value" split at the first '='; UsageError naming the option otherwise.
std::pair<std::string, std::string> key_value(const std::string& text, const char* option) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UsageError(detail::concat(option, " '", text, "': expected NAME=VALUE"));
  return {text.substr(0, eq), text.substr(eq + 1)};
}

// How messages and output files name a variable: its name, else its uid.
std::string label_of(const Variable& v) {
  return v.name().empty() ? v.uid() : v.name();
}

// A variable's position by name or uid, or the end.
size_t find_variable(const std::vector<Variable>& vars, const std::string& key) {
  for (size_t i = 0; i < vars.size(); ++i)
    if (vars[i].name() == key || vars[i].uid() == key) return i;
  return vars.size();
}

std::string list_of(const std::vector<Variable>& vars) {
  std::string out;
  for (const Variable& v : vars) out += (out.empty() ? "" : ", ") + v.describe();
  return out;
}

// A CTF stream gives each sample as one vector: the data of an argument whose samples have
// several axes take its shape ([N, 2] for an argument of shape [1, 2]).
// Packed sequences keep their rows and layout (they are not padded).
Value in_sample_shape(const Value& v, const Variable& a) {
  const NDShape sample = v.sample_shape();
  if (v.is_sparse() || sample == a.shape() || a.shape().has_free() ||
      sample.total_size() != a.shape().total_size())
    return v;
  if (v.is_packed())
    return Value::packed(v.packed_rows().reshaped(a.shape().prepend(v.number_of_samples())),
                         v.packed_layout());
  const NDShape& shape = v.data().shape();
  const size_t lead = v.is_sequence() ? 2 : 1;
  return Value(v.data().reshaped(shape.sub_shape(0, lead).append(a.shape())), v.is_sequence(),
               v.mask());
}

// Writes each output sample as a CTF line ("[seq ]|name v v ...") or a CSV row.
class OutputWriter {
 public:
  OutputWriter(const std::string& path, bool csv, const std::vector<Variable>& outputs)
      : out_(path), csv_(csv), outputs_(outputs) {
    if (!out_) throw IOError(detail::concat("cannot write '", path, "': ", std::strerror(errno)));
    sequences_ = outputs.front().has_sequence_axis();
    if (!csv_) return;
    std::string header = sequences_ ? "sequence,step" : "";
    for (const Variable& o : outputs_)
      for (size_t k = 0; k < o.shape().total_size(); ++k)
        header += (header.empty() ? "" : ",") + label_of(o) + "_" + std::to_string(k);
    out_ << header << "\n";
  }

  void write(const ValueMap& values) {
    std::vector<std::vector<std::vector<float>>> per_output;  // [output][sequence][values]
    for (const Variable& o : outputs_) per_output.push_back(values.at(o).as_sequences<float>());
    char number[32];
    for (size_t s = 0; s < per_output[0].size(); ++s, ++sequence_) {
      const size_t steps = per_output[0][s].size() / outputs_[0].shape().total_size();
      for (size_t t = 0; t < steps; ++t) {
        std::string line =
            sequences_ ? std::to_string(sequence_) + (csv_ ? "," + std::to_string(t) : " ") : "";
        for (size_t o = 0; o < outputs_.size(); ++o) {
          const size_t n = outputs_[o].shape().total_size();
          if (!csv_) line += (o ? " |" : "|") + label_of(outputs_[o]);
          for (size_t k = 0; k < n && (t + 1) * n <= per_output[o][s].size(); ++k) {
            std::snprintf(number, sizeof number, "%.9g", double(per_output[o][s][t * n + k]));
            line += (csv_ ? (line.empty() ? "" : ",") : " ") + std::string(number);
          }
        }
        out_ << line << "\n";
      }
    }
  }

  void close(const std::string& path) {
    out_.close();
    if (!out_) throw IOError(detail::concat("writing '", path, "' failed"));
  }

 private:
  std::ofstream out_;
  bool csv_, sequences_ = false;
  std::vector<Variable> outputs_;
  size_t sequence_ = 0;
};

void progress(size_t done, size_t total) {
  constexpr int kWidth = 40;
  const int filled = total ? int(kWidth * done / total) : kWidth;
  std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu samples", filled,
               "########################################", kWidth - filled, "", done, total);
}

void eval(const EvalOptions& opt) {
  if (opt.minibatch_size == 0) throw UsageError("--minibatch-size must be at least 1");
  const std::string format =
      !opt.format.empty()                                                           ? opt.format
      : opt.output.size() > 4 && opt.output.substr(opt.output.size() - 4) == ".csv" ? "csv"
                                                                                    : "ctf";
  if (opt.bf16) set_compute_precision(ComputePrecision::BFloat16);
  ModelRunner runner(opt.model);
  const std::vector<Variable>& args = runner.arguments();

  // Which stream each argument reads.
  std::vector<std::string> stream_of(args.size());
  for (size_t i = 0; i < args.size(); ++i) stream_of[i] = args[i].name();
  for (const std::string& m : opt.map) {
    auto [arg, stream] = key_value(m, "--map");
    const size_t i = find_variable(args, arg);
    if (i == args.size())
      throw UsageError(detail::concat("--map ", m, ": the model has no argument '", arg,
                                      "'; its arguments: ", list_of(args)));
    stream_of[i] = stream;
  }
  std::string ctf;
  std::vector<std::pair<std::string, std::string>> idx;  // stream, path
  for (const std::string& d : opt.data) {
    if (d.find('=') == std::string::npos) {
      if (!ctf.empty())
        throw UsageError(
            "--data: one CTF file at most (it holds every stream); IDX files are "
            "given as STREAM=FILE");
      ctf = d;
    } else {
      idx.push_back(key_value(d, "--data"));
    }
  }
  std::map<std::string, double> scales;
  for (const std::string& s : opt.scale) {
    auto [stream, factor] = key_value(s, "--scale");
    try {
      scales[stream] = std::stod(factor);
    } catch (const std::exception&) {
      throw UsageError(detail::concat("--scale ", s, ": '", factor, "' is not a number"));
    }
  }
  const std::set<std::string> sparse(opt.sparse.begin(), opt.sparse.end());
  // One argument, no name, one stream of data that is not the labels: that stream.
  if (args.size() == 1 && stream_of[0].empty() && ctf.empty()) {
    std::vector<std::string> candidates;
    for (auto& [stream, path] : idx)
      if (stream != opt.labels) candidates.push_back(stream);
    if (candidates.size() == 1) stream_of[0] = candidates[0];
  }
  for (size_t i = 0; i < args.size(); ++i)
    if (stream_of[i].empty())
      throw UsageError(detail::concat("argument ", args[i].describe(),
                                      " has no name: say which stream it reads with --map ",
                                      args[i].uid(), "=STREAM"));

  const Variable& first_output = runner.outputs().front();
  const size_t classes = first_output.shape().total_size();
  std::vector<std::shared_ptr<Deserializer>> sources;
  std::set<std::string> from_idx;
  if (!idx.empty()) {
    IDXStreamDefs defs;
    for (auto& [stream, path] : idx) {
      IDXStreamDef def{.path = path};
      if (stream == opt.labels) {
        def.num_classes = classes;
        def.is_sparse = sparse.count(stream) > 0;
      } else {
        const size_t i = std::find(stream_of.begin(), stream_of.end(), stream) - stream_of.begin();
        if (i == args.size())
          throw UsageError(
              detail::concat("--data ", stream, "=", path, ": no argument reads stream '", stream,
                             "' (use --map ARG=STREAM); the model's arguments: ", list_of(args)));
        def.shape = args[i].shape();
        def.dtype = args[i].dtype();
        if (scales.count(stream)) def.scale = scales[stream];
      }
      defs.emplace_back(stream, def);
      from_idx.insert(stream);
    }
    sources.push_back(std::make_shared<IDXDeserializer>(defs));
  }
  // Streams not in IDX files come from the CTF file.
  StreamDefs ctf_defs;
  for (size_t i = 0; i < args.size(); ++i)
    if (!from_idx.count(stream_of[i]))
      ctf_defs.emplace_back(
          stream_of[i], StreamDef{.shape = args[i].shape().total_size(),
                                  .is_sparse = args[i].is_sparse() || sparse.count(stream_of[i]),
                                  .dtype = args[i].dtype()});
  if (!opt.labels.empty() && !from_idx.count(opt.labels))
    ctf_defs.emplace_back(opt.labels, StreamDef{.shape = classes,
                                                .is_sparse = sparse.count(opt.labels) > 0,
                                                .dtype = first_output.dtype()});
  if (!ctf_defs.empty()) {
    if (ctf.empty())
      throw UsageError(detail::concat("no data for stream '", ctf_defs.front().first,
                                      "': give a CTF file (--data FILE) or an IDX file (--data ",
                                      ctf_defs.front().first, "=FILE)"));
    try {
      sources.insert(sources.begin(), std::make_shared<CTFDeserializer>(ctf, ctf_defs));
    } catch (const DataError& e) {
      std::string streams;
      for (auto& [name, def] : ctf_defs)
        streams += detail::concat(streams.empty() ? "" : ", ", name, " (", def.shape, " values",
                                  def.is_sparse ? ", sparse index:value" : "", ")");
      throw DataError(detail::concat(e.what(), "\nThe model reads these streams from ", ctf, ": ",
                                     streams,
                                     "; --map ARG=STREAM and --sparse STREAM change that"));
    }
  } else if (!ctf.empty()) {
    throw UsageError(detail::concat("--data ", ctf, ": every stream comes from IDX files"));
  }

  MinibatchSource source(sources, {.randomize = false, .max_sweeps = 1});
  std::unordered_map<Variable, StreamInformation> input_map;
  for (size_t i = 0; i < args.size(); ++i) input_map.emplace(args[i], source[stream_of[i]]);
  Variable labels;
  if (!opt.labels.empty()) {
    const InputOptions options{.dtype = first_output.dtype(),
                               .is_sparse = source[opt.labels].is_sparse(),
                               .name = opt.labels};
    labels = first_output.has_sequence_axis()
                 ? sequence::input_variable(first_output.shape(), options)
                 : input_variable(first_output.shape(), options);
    input_map.emplace(labels, source[opt.labels]);
  }

  OutputWriter writer(opt.output, format == "csv", runner.outputs());
  const bool show_progress = isatty(STDERR_FILENO);
  size_t samples = 0, errors = 0, labelled = 0;
  for (;;) {
    Minibatch<Variable> mb = source.next_minibatch(opt.minibatch_size, input_map);
    if (mb.empty() || mb.begin()->second.number_of_sequences == 0) break;
    ValueMap values;
    for (const Variable& a : args) values.emplace(a, in_sample_shape(mb[a].data, a));
    const ValueMap outputs = runner.evaluate(values);
    writer.write(outputs);
    samples += mb[args[0]].number_of_samples;
    if (labels.valid()) {
      const std::vector<size_t> predicted = outputs.at(first_output).argmax();
      const std::vector<size_t> truth = mb[labels].data.argmax();
      for (size_t k = 0; k < predicted.size() && k < truth.size(); ++k)
        errors += predicted[k] != truth[k];
      labelled += truth.size();
    }
    if (show_progress) progress(samples, source.samples_per_sweep());
  }
  if (show_progress) std::fprintf(stderr, "\n");
  writer.close(opt.output);
  std::printf("Evaluated %zu samples into %s (%s)\n", samples, opt.output.c_str(), format.c_str());
  if (labels.valid())
    std::printf("Classification error: %.2f%% (%zu of %zu samples)\n",
                labelled ? 100.0 * double(errors) / double(labelled) : 0.0, errors, labelled);
}

}  // namespace

void add_eval_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Run a model over a data set, write its outputs, and report the classification "
      "error against labels");
  auto opt = std::make_shared<EvalOptions>();
  cmd->add_option("MODEL", opt->model, "A model or checkpoint file")->required();
  // Each repeatable option takes one value per flag, so that MODEL may follow them.
  cmd->add_option("--data", opt->data,
                  "A CTF file holding the streams, or STREAM=FILE for an IDX file (repeatable)")
      ->required()
      ->allow_extra_args(false);
  cmd->add_option("--map", opt->map,
                  "ARG=STREAM: the argument (name or uid) reads that stream (repeatable; "
                  "default: each argument reads the stream of its name)")
      ->allow_extra_args(false);
  cmd->add_option("--labels", opt->labels,
                  "The stream of labels (one-hot, or class indices in an IDX file): print the "
                  "classification error");
  cmd->add_option("--sparse", opt->sparse,
                  "A CTF stream written as index:value pairs (repeatable; sparse arguments are)")
      ->allow_extra_args(false);
  cmd->add_option("--scale", opt->scale, "STREAM=FACTOR: multiply an IDX stream's values")
      ->allow_extra_args(false);
  cmd->add_option("--output", opt->output, "Where the outputs go")->required();
  cmd->add_option("--format", opt->format, "ctf or csv (default: csv for *.csv, else ctf)")
      ->check(CLI::IsMember({"ctf", "csv"}));
  cmd->add_option("--minibatch-size", opt->minibatch_size, "Samples per evaluation")
      ->capture_default_str();
  cmd->add_flag("--bf16", opt->bf16,
                "Compute products and convolutions in bf16 mixed precision (CPUs with "
                "AVX512-BF16; float32 elsewhere, with a message)");
  cmd->callback([opt] { eval(*opt); });
}

}  // namespace loom::tools
