// loom serve MODEL --port P: an HTTP/1.1 JSON inference server (cpp-httplib, nlohmann-json).
//
//   POST /v1/models/NAME:predict  {"inputs": [[...], ...]}  (a batch for the model's argument;
//                                 {"inputs": {"arg": [...], ...}} for several)
//                              -> {"outputs": [[...], ...]} ({"outputs": {"out": ...}} for several)
//   GET  /v1/models/NAME           the signature, arguments and outputs
//   GET  /healthz                  {"status": "ok", "in_flight": predict requests being answered}
//
// Requests for a model without sequence axes that wait together are evaluated as one batch of
// at most --max-batch samples; with --batch-delay-ms, a batch waits that long after its first
// request for more (by default it does not wait: requests that come while the workers compute
// form the next batch). A sequence model's requests are evaluated one by one. Bad requests answer
// 4xx with {"error": message}; the server goes on. SIGTERM or SIGINT stops accepting connections,
// finishes the requests in flight and exits 0.
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "loom/core/threads.h"
#include "loom/deploy/model_runner.h"
#include "tools/loom/commands.h"

namespace loom::tools {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct ServeOptions {
  std::string model = {};
  std::string host = "127.0.0.1";
  int port = -1;
  std::string name = "model";
  size_t max_batch = 32;
  double batch_delay_ms = 0;  // batch what is waiting when a worker is free; wait for no more
  size_t max_body = size_t{16} << 20;
  size_t workers = 2;
};

// A request the client got wrong: answered with its status and message.
struct BadRequest {
  int status;
  std::string message;
};

// One argument's data in a request: samples (or sequences) of flat values.
struct ArgumentValues {
  std::vector<std::vector<float>> items;  // per sample, or per sequence (its steps' values)
};

// A request's outputs: per output, per sample (or sequence), its values.
using Outputs = std::vector<std::vector<std::vector<float>>>;

// A parsed request waiting for its outputs.
struct Job {
  std::vector<ArgumentValues> arguments;  // in the model's argument order
  size_t samples = 0;                     // samples (or sequences) in the request
  Clock::time_point arrival = Clock::now();
  std::promise<Outputs> result;
};

json shape_json(const NDShape& s) {
  json out = json::array();
  for (size_t d : s.dims()) out.push_back(d);
  return out;
}

json variable_json(const Variable& v) {
  return {{"name", v.name()},
          {"uid", v.uid()},
          {"type", v.type_string()},
          {"shape", shape_json(v.shape())},
          {"dtype", to_string(v.dtype())},
          {"sparse", v.is_sparse()},
          {"sequence", v.has_sequence_axis()}};
}

// Appends the numbers of a nested array of shape dims to out; where names the place in the
// request for messages.
void flatten(const json& j, std::span<const size_t> dims, std::vector<float>& out,
             const std::string& where) {
  if (dims.empty()) {
    if (!j.is_number())
      throw BadRequest{400, where + ": expected a number, got " + std::string(j.type_name())};
    const float v = j.get<float>();
    if (!std::isfinite(v))
      throw BadRequest{400, where + ": " + j.dump() + " is not a finite float32 number"};
    out.push_back(v);
    return;
  }
  if (!j.is_array() || j.size() != dims[0])
    throw BadRequest{400, where + ": expected an array of " + std::to_string(dims[0]) +
                              " items, got " +
                              (j.is_array() ? std::to_string(j.size()) + " items" : j.type_name())};
  for (size_t i = 0; i < dims[0]; ++i)
    flatten(j[i], dims.subspan(1), out, where + "[" + std::to_string(i) + "]");
}

// The samples (or sequences) of one argument: an array of items of the argument's shape
// (sequences: arrays of one or more such items).
ArgumentValues parse_argument(const json& j, const Variable& arg, const std::string& where) {
  if (arg.is_sparse() || arg.dtype() != DataType::Float32)
    throw BadRequest{400, "argument " + arg.describe() +
                              " is sparse or not float32: JSON requests take dense float32 data"};
  if (!j.is_array() || j.empty())
    throw BadRequest{
        400, where + ": expected a non-empty array of samples of shape " + arg.shape().to_string()};
  ArgumentValues values;
  const auto& dims = arg.shape().dims();
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    std::vector<float> item;
    if (arg.has_sequence_axis()) {
      if (!j[i].is_array() || j[i].empty())
        throw BadRequest{400, at + ": expected a sequence: a non-empty array of samples"};
      for (size_t t = 0; t < j[i].size(); ++t)
        flatten(j[i][t], dims, item, at + "[" + std::to_string(t) + "]");
    } else {
      flatten(j[i], dims, item, at);
    }
    values.items.push_back(std::move(item));
  }
  return values;
}

Job parse_request(const std::string& body, const ModelRunner& runner) {
  json request;
  try {
    request = json::parse(body);
  } catch (const json::parse_error& e) {
    throw BadRequest{400, std::string("the body is not JSON: ") + e.what()};
  }
  if (!request.is_object() || !request.contains("inputs"))
    throw BadRequest{400, "expected {\"inputs\": ...}"};
  const json& inputs = request["inputs"];
  const std::vector<Variable>& args = runner.arguments();
  Job job;
  if (inputs.is_object()) {
    for (auto it = inputs.begin(); it != inputs.end(); ++it) {
      bool known = false;
      for (const Variable& a : args) known = known || a.name() == it.key();
      if (!known) throw BadRequest{400, "the model has no argument '" + it.key() + "'"};
    }
    for (const Variable& a : args) {
      if (!inputs.contains(a.name())) throw BadRequest{400, "no data for argument " + a.describe()};
      job.arguments.push_back(parse_argument(inputs[a.name()], a, "inputs['" + a.name() + "']"));
    }
  } else {
    if (args.size() != 1)
      throw BadRequest{400, "the model takes " + std::to_string(args.size()) +
                                " arguments: give {\"inputs\": {\"name\": [...], ...}}"};
    job.arguments.push_back(parse_argument(inputs, args[0], "inputs"));
  }
  job.samples = job.arguments[0].items.size();
  for (size_t i = 1; i < args.size(); ++i)
    if (job.arguments[i].items.size() != job.samples)
      throw BadRequest{400, "arguments " + args[0].describe() + " and " + args[i].describe() +
                                " have different numbers of samples"};
  return job;
}

// A nested array of shape dims from values at p.
json nest(const float*& p, std::span<const size_t> dims) {
  if (dims.empty()) return double(*p++);
  json out = json::array();
  for (size_t i = 0; i < dims[0]; ++i) out.push_back(nest(p, dims.subspan(1)));
  return out;
}

// Collects requests into batches and evaluates them on its worker threads.
class Batcher {
 public:
  Batcher(const ModelRunner& runner, const ServeOptions& opt)
      : runner_(runner), opt_(opt), workers_(std::max<size_t>(opt.workers, 1)) {
    for (const Variable& a : runner.arguments()) batchable_ = batchable_ && !a.has_sequence_axis();
    for (size_t i = 0; i < workers_; ++i) threads_.emplace_back([this] { work(); });
  }
  ~Batcher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    ready_.notify_all();
    for (auto& t : threads_) t.join();
  }

  // The outputs for one request, evaluated in a batch with others that came at the same time.
  Outputs evaluate(Job job) {
    std::future<Outputs> done = job.result.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queued_samples_ += job.samples;
      queue_.push_back(std::make_shared<Job>(std::move(job)));
    }
    ready_.notify_all();
    return done.get();
  }

 private:
  void work() {
    // The workers split the cores: each evaluation is itself parallel (OpenMP, oneDNN).
    set_max_num_cpu_threads(std::max(1, get_max_num_cpu_threads() / int(workers_)));
    for (;;) {
      std::vector<std::shared_ptr<Job>> batch;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, nothing left
        if (batchable_) {
          const auto deadline = queue_.front()->arrival +
                                std::chrono::microseconds(int64_t(opt_.batch_delay_ms * 1000));
          ready_.wait_until(lock, deadline, [&] {
            return stop_ || queue_.empty() || queued_samples_ >= opt_.max_batch;
          });
          if (queue_.empty()) continue;  // another worker took them
        }
        size_t samples = 0;
        do {
          samples += queue_.front()->samples;
          queued_samples_ -= queue_.front()->samples;
          batch.push_back(queue_.front());
          queue_.pop_front();
        } while (batchable_ && !queue_.empty() &&
                 samples + queue_.front()->samples <= opt_.max_batch);
      }
      run(batch);
    }
  }

  // Evaluates the jobs as one batch (their samples concatenated) and hands each its outputs.
  void run(const std::vector<std::shared_ptr<Job>>& batch) {
    Outputs all;
    try {
      const std::vector<Variable>& args = runner_.arguments();
      ValueMap values;
      for (size_t i = 0; i < args.size(); ++i) {
        if (args[i].has_sequence_axis()) {
          std::vector<std::vector<float>> sequences;
          for (const auto& job : batch)
            sequences.insert(sequences.end(), job->arguments[i].items.begin(),
                             job->arguments[i].items.end());
          values.emplace(args[i], Value::create_sequences<float>(args[i].shape(), sequences));
        } else {
          std::vector<float> flat;
          for (const auto& job : batch)
            for (const auto& item : job->arguments[i].items)
              flat.insert(flat.end(), item.begin(), item.end());
          values.emplace(args[i], Value::create_batch<float>(args[i].shape(), flat));
        }
      }
      const ValueMap outputs = runner_.evaluate(values);
      for (const Variable& o : runner_.outputs())
        all.push_back(outputs.at(o).as_sequences<float>());
    } catch (...) {
      for (const auto& job : batch) job->result.set_exception(std::current_exception());
      return;
    }
    size_t offset = 0;
    for (const auto& job : batch) {
      Outputs mine;
      for (const auto& output : all)
        mine.emplace_back(output.begin() + std::ptrdiff_t(offset),
                          output.begin() + std::ptrdiff_t(offset + job->samples));
      offset += job->samples;
      job->result.set_value(std::move(mine));
    }
  }

  const ModelRunner& runner_;
  const ServeOptions& opt_;
  const size_t workers_;
  bool batchable_ = true;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::shared_ptr<Job>> queue_;
  size_t queued_samples_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

json signature(const ModelRunner& runner, const ServeOptions& opt) {
  json inputs = json::array(), outputs = json::array();
  for (const Variable& a : runner.arguments()) inputs.push_back(variable_json(a));
  for (const Variable& o : runner.outputs()) outputs.push_back(variable_json(o));
  return {{"name", opt.name},
          {"signature", runner.function().to_string()},
          {"inputs", inputs},
          {"outputs", outputs},
          {"max_batch", opt.max_batch}};
}

json outputs_json(const ModelRunner& runner, const Outputs& outputs) {
  json per_output = json::array();
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Variable& v = runner.outputs()[o];
    const size_t n = v.shape().total_size();
    json items = json::array();
    for (const std::vector<float>& item : outputs[o]) {
      const float* p = item.data();
      if (!v.has_sequence_axis()) {
        items.push_back(nest(p, v.shape().dims()));
        continue;
      }
      json steps = json::array();
      for (size_t t = 0; t < item.size() / n; ++t) steps.push_back(nest(p, v.shape().dims()));
      items.push_back(steps);
    }
    per_output.push_back(items);
  }
  if (per_output.size() == 1) return {{"outputs", per_output[0]}};
  json named = json::object();
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Variable& v = runner.outputs()[o];
    named[v.name().empty() ? v.uid() : v.name()] = per_output[o];
  }
  return {{"outputs", named}};
}

void serve(const ServeOptions& opt) {
  if (opt.port < 0 || opt.port > 65535)
    throw UsageError("--port: give a port from 1 to 65535 (0: any free port)");
  if (opt.max_batch == 0) throw UsageError("--max-batch must be at least 1");
  if (opt.batch_delay_ms < 0) throw UsageError("--batch-delay-ms must not be negative");
  const ModelRunner runner(opt.model);

  // SIGTERM and SIGINT go to a thread of their own (every thread started below inherits the
  // mask), which stops the server.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  httplib::Server server;
  const size_t http_threads = std::clamp<size_t>(2 * opt.max_batch, 16, 256);
  server.new_task_queue = [http_threads] { return new httplib::ThreadPool(http_threads); };
  server.set_payload_max_length(opt.max_body);
  // A response goes out in two writes (headers, body): without TCP_NODELAY, Nagle's algorithm
  // holds the second until the client's delayed ACK, 40 ms later.
  server.set_tcp_nodelay(true);
  // httplib's default options add SO_REUSEPORT, with which a second server on the same port
  // starts and silently shares it: keep SO_REUSEADDR only (a restart may reuse the port at once).
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server.set_error_handler([&](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = res.status == 404 ? "no such resource: " + req.method + " " + req.path
                          : res.status == 413
                              ? "the request body is larger than " + std::to_string(opt.max_body) +
                                    " bytes (--max-body)"
                              : "HTTP status " + std::to_string(res.status);
    reply(res, res.status, {{"error", message}});
  });
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
        std::string message = "internal error";
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          message = e.what();
        } catch (...) {
        }
        reply(res, 500, {{"error", message}});
      });

  Batcher batcher(runner, opt);
  auto unknown_model = [&](httplib::Response& res, const std::string& name) {
    reply(res, 404, {{"error", "no model '" + name + "': this server serves '" + opt.name + "'"}});
  };
  std::atomic<int64_t> in_flight = 0;
  server.Get("/healthz", [&](const httplib::Request&, httplib::Response& res) {
    reply(res, 200, {{"status", "ok"}, {"in_flight", in_flight.load()}});
  });
  server.Get(R"(/v1/models/([^/:]+))", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] != opt.name) return unknown_model(res, req.matches[1]);
    reply(res, 200, signature(runner, opt));
  });
  server.Post(
      R"(/v1/models/([^/:]+):predict)", [&](const httplib::Request& req, httplib::Response& res) {
        if (req.matches[1] != opt.name) return unknown_model(res, req.matches[1]);
        ++in_flight;
        struct Done {
          std::atomic<int64_t>& count;
          ~Done() { --count; }
        } done{in_flight};
        try {
          reply(res, 200, outputs_json(runner, batcher.evaluate(parse_request(req.body, runner))));
        } catch (const BadRequest& e) {
          reply(res, e.status, {{"error", e.message}});
        } catch (const ShapeError& e) {
          reply(res, 400, {{"error", e.what()}});
        }
      });

  int port = opt.port;
  if (port == 0) {
    port = server.bind_to_any_port(opt.host);
  } else if (!server.bind_to_port(opt.host, port)) {
    port = -1;
  }
  if (port <= 0)
    throw IOError(detail::concat("cannot listen on ", opt.host, ":", opt.port,
                                 ": the port is in use, or the address is not this machine's"));
  std::atomic<bool> listen_returned = false;
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    // A signal that came before listening started: stop() would find nothing to stop yet.
    while (!server.is_running() && !listen_returned)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    server.stop();
  });
  std::printf("Serving '%s' %s on http://%s:%d\n", opt.name.c_str(),
              runner.function().to_string().c_str(), opt.host.c_str(), port);
  std::fflush(stdout);
  const bool listened = server.listen_after_bind();
  listen_returned = true;
  if (!listened) pthread_kill(stopper.native_handle(), SIGTERM);  // wake the waiting thread
  stopper.join();
  if (!listened) throw IOError(detail::concat("serving on ", opt.host, ":", port, " failed"));
  std::printf("Stopped: the requests in flight were answered\n");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over HTTP/1.1 with JSON requests");
  auto opt = std::make_shared<ServeOptions>();
  cmd->add_option("MODEL", opt->model, "A model or checkpoint file")->required();
  cmd->add_option("--port", opt->port, "The TCP port (0: any free port, printed)")->required();
  cmd->add_option("--host", opt->host, "The address to listen on")->capture_default_str();
  cmd->add_option("--name", opt->name, "The model's name in URLs: /v1/models/NAME")
      ->capture_default_str();
  cmd->add_option("--max-batch", opt->max_batch,
                  "Most samples evaluated together from concurrent requests")
      ->capture_default_str();
  cmd->add_option("--batch-delay-ms", opt->batch_delay_ms,
                  "Longest wait for more requests to batch with the first")
      ->capture_default_str();
  cmd->add_option("--max-body", opt->max_body, "Largest request body in bytes (larger: 413)")
      ->capture_default_str();
  cmd->add_option("--workers", opt->workers, "Batches evaluated at once")->capture_default_str();
  cmd->callback([opt] { serve(*opt); });
}

}  // namespace loom::tools
