// loom serve MODEL --port P: an HTTP/1.1 JSON inference server (cpp-httplib, nlohmann-json).
//
//   POST /v1/models/NAME:predict  {"inputs": [[...], ...]}  (a batch for the model's argument;
//                                 {"inputs": {"arg": [...], ...}} for several)
//                              -> {"outputs": [[...], ...]} ({"outputs": {"out": ...}} for several)
//   GET  /v1/models/NAME           the signature, arguments and outputs
//   GET  /healthz                  {"status": "ok", "in_flight": predict requests being answered}
//   GET  /metrics                  requests by status, errors by kind, latency (Prometheus text)
//
// Requests for a model without sequence axes that wait together are evaluated as one batch of
// at most --max-batch samples; with --batch-delay-ms, a batch waits that long after its first
// request for more (by default it does not wait: requests that come while the workers compute
// form the next batch). A sequence model's requests are evaluated one by one. Bad requests answer
// 4xx with {"error": message} and are logged one line each on stderr; the server goes on.
// SIGTERM or SIGINT stops accepting connections, finishes the requests in flight and exits 0.
//
// Hostile clients (docs/decisions.md, "Serving under hostile clients"): each connection has a
// thread of its own, at most --max-connections of them (more are answered 503); a request's
// headers must come within --header-timeout seconds of its first byte and stay under 64 KiB, its
// body within --body-timeout seconds of its headers and under --max-body bytes, whatever its
// transfer encoding (checked as it arrives, never buffered past the limit). The body's numbers
// are parsed straight into the argument's float32 data (nlohmann's SAX interface, no document).
#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
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
  size_t max_connections = 256;
  double header_timeout_s = 10;
  double body_timeout_s = 60;
};

// The most bytes of a request line and headers together.
constexpr size_t kMaxHeaderBytes = size_t{64} << 10;
// A request larger than this returns the memory it freed at once (malloc_trim).
constexpr size_t kTrimAfterBytes = size_t{1} << 20;
// A connection waits this long for its next request, and a response's write for the client.
constexpr int kIdleTimeoutMs = 5000;

// Why a request was refused: the label of /metrics' error counter.
enum class ErrorKind {
  BadRequest,          // 400: malformed HTTP, JSON, or data that does not fit the model
  NotFound,            // 404
  MethodNotAllowed,    // 405
  HeaderTimeout,       // 408: the headers came too slowly
  BodyTimeout,         // 408: the body came too slowly
  BodyTooLarge,        // 413: over --max-body
  UnsupportedType,     // 415: a Content-Type other than JSON's (or form-encoded JSON)
  HeadersTooLarge,     // 431 (or 414 for the request line)
  TooManyConnections,  // 503: --max-connections are open
  Internal,            // 500
  Count
};
constexpr std::array<const char*, size_t(ErrorKind::Count)> kErrorKindNames = {
    "bad_request",          "not_found",      "method_not_allowed",     "header_timeout",
    "body_timeout",         "body_too_large", "unsupported_media_type", "headers_too_large",
    "too_many_connections", "internal"};

// A request the client got wrong: answered with its status and message.
struct BadRequest {
  int status;
  ErrorKind kind;
  std::string message;
};

BadRequest bad_request(std::string message) {
  return {400, ErrorKind::BadRequest, std::move(message)};
}

// An error body; invalid UTF-8 from the request (in a JSON parser's message) is replaced.
std::string error_body(const std::string& message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Requests answered by status, refusals by kind, and predict latency, as /metrics serves them.
class Metrics {
 public:
  void record(int status, std::optional<ErrorKind> error) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++by_status_[status];
    if (error) ++errors_[size_t(*error)];
  }
  void record_latency(double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < kBuckets.size(); ++i) latency_buckets_[i] += seconds <= kBuckets[i];
    latency_sum_ += seconds;
    ++latency_count_;
  }
  std::string text(int64_t connections, int64_t in_flight) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string out =
        "# HELP loom_serve_requests_total Requests answered, by HTTP status.\n"
        "# TYPE loom_serve_requests_total counter\n";
    for (const auto& [status, n] : by_status_)
      out += detail::concat("loom_serve_requests_total{code=\"", status, "\"} ", n, "\n");
    out +=
        "# HELP loom_serve_errors_total Requests refused, by kind.\n"
        "# TYPE loom_serve_errors_total counter\n";
    for (size_t k = 0; k < kErrorKindNames.size(); ++k)
      out += detail::concat("loom_serve_errors_total{kind=\"", kErrorKindNames[k], "\"} ",
                            errors_[k], "\n");
    out +=
        "# HELP loom_serve_predict_seconds Predict requests' time from headers to answer.\n"
        "# TYPE loom_serve_predict_seconds histogram\n";
    for (size_t i = 0; i < kBuckets.size(); ++i)
      out += detail::concat("loom_serve_predict_seconds_bucket{le=\"", kBuckets[i], "\"} ",
                            latency_buckets_[i], "\n");
    out += detail::concat("loom_serve_predict_seconds_bucket{le=\"+Inf\"} ", latency_count_,
                          "\nloom_serve_predict_seconds_sum ", latency_sum_,
                          "\nloom_serve_predict_seconds_count ", latency_count_, "\n");
    out += detail::concat(
        "# HELP loom_serve_connections Open connections.\n# TYPE loom_serve_connections gauge\n"
        "loom_serve_connections ",
        connections,
        "\n# HELP loom_serve_in_flight Predict requests being answered.\n"
        "# TYPE loom_serve_in_flight gauge\nloom_serve_in_flight ",
        in_flight, "\n");
    return out;
  }

 private:
  static constexpr std::array<double, 10> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025,
                                                      0.05,  0.1,    0.25,  1,    5};
  mutable std::mutex mutex_;
  std::map<int, uint64_t> by_status_;
  std::array<uint64_t, size_t(ErrorKind::Count)> errors_ = {};
  std::array<uint64_t, kBuckets.size()> latency_buckets_ = {};
  double latency_sum_ = 0;
  uint64_t latency_count_ = 0;
};

// One client connection: httplib reads requests from it and writes responses to it. A request's
// headers must arrive within their deadline and size, its body within its own deadline; a read
// past a deadline or the header size fails, and failure() says which.
class Connection : public httplib::Stream {
 public:
  enum class Failure { None, HeaderTimeout, HeadersTooLarge, BodyTimeout };

  Connection(socket_t sock, const ServeOptions& opt) : sock_(sock), opt_(opt) {}

  // Waits up to the idle timeout for the next request's first byte; false: none came, the
  // client closed, or the server is stopping (checked every 100 ms).
  bool wait_for_request(const std::atomic<socket_t>& listening) {
    for (int waited = 0; waited < kIdleTimeoutMs; waited += 100) {
      if (listening == INVALID_SOCKET) return false;
      if (buffered_ < filled_) return true;
      pollfd p{sock_, POLLIN, 0};
      const int ready = poll(&p, 1, 100);
      if (ready < 0 && errno != EINTR) return false;
      if (ready > 0) return (p.revents & POLLIN) != 0;
    }
    return false;
  }
  // A request starts: its headers are due within --header-timeout.
  void begin_request() {
    failure_ = Failure::None;
    header_phase_ = true;
    request_bytes_ = 0;
    written_ = 0;
    close_ = false;
    error_.reset();
    deadline_ = Clock::now() + seconds(opt_.header_timeout_s);
  }
  // The headers are in: the body is due within --body-timeout (and the latency counts from now).
  void begin_body() {
    header_phase_ = false;
    deadline_ = Clock::now() + seconds(opt_.body_timeout_s);
    started_ = Clock::now();
  }
  Failure failure() const { return failure_; }
  size_t request_bytes() const { return request_bytes_; }
  bool responded() const { return written_ > 0; }
  // The client's bytes are not all read (a refused body): no further request on this connection.
  void close_after_response() { close_ = true; }
  bool closing() const { return close_; }
  // The kind of error this request was refused for, if it was.
  std::optional<ErrorKind>& error() { return error_; }
  Clock::time_point started() const { return started_; }

  bool is_readable() const override { return buffered_ < filled_ || wait(POLLIN, deadline_); }
  bool is_writable() const override { return wait(POLLOUT, write_deadline()); }

  ssize_t read(char* out, size_t size) override {
    if (failure_ != Failure::None) return -1;
    if (buffered_ == filled_) {
      if (!wait(POLLIN, deadline_)) {
        if (Clock::now() >= deadline_)
          failure_ = header_phase_ ? Failure::HeaderTimeout : Failure::BodyTimeout;
        return -1;
      }
      const ssize_t n = recv(sock_, buffer_.data(), buffer_.size(), 0);
      if (n <= 0) return n;
      buffered_ = 0;
      filled_ = size_t(n);
    }
    size_t n = std::min(size, filled_ - buffered_);
    if (header_phase_ && request_bytes_ + n > kMaxHeaderBytes) {
      failure_ = Failure::HeadersTooLarge;
      return -1;
    }
    request_bytes_ += n;
    std::memcpy(out, buffer_.data() + buffered_, n);
    buffered_ += n;
    return ssize_t(n);
  }

  ssize_t write(const char* data, size_t size) override {
    if (!wait(POLLOUT, write_deadline())) return -1;
    const ssize_t n = send(sock_, data, size, MSG_NOSIGNAL);
    if (n > 0) written_ += size_t(n);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }
  void write_all(std::string_view data) {
    for (ssize_t n = 0; !data.empty(); data.remove_prefix(size_t(n)))
      if ((n = write(data.data(), data.size())) <= 0) return;
  }

 private:
  static Clock::duration seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }
  static Clock::time_point write_deadline() {
    return Clock::now() + std::chrono::milliseconds(kIdleTimeoutMs);
  }
  // Whether the socket became ready for events before the deadline.
  bool wait(short events, Clock::time_point deadline) const {
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      pollfd p{sock_, events, 0};
      const int ready = poll(&p, 1, int(std::min<int64_t>(left.count(), 1 << 30)));
      if (ready > 0) return true;  // an error or hang-up shows in the recv or send that follows
      if (ready < 0 && errno != EINTR) return false;
    }
  }
  void address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t length = sizeof a;
    ip.clear();
    port = 0;
    if (get(sock_, reinterpret_cast<sockaddr*>(&a), &length) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
      inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
      port = ntohs(v4.sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
      inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
      port = ntohs(v6.sin6_port);
    }
    ip = text;
  }

  const socket_t sock_;
  const ServeOptions& opt_;
  std::array<char, 16384> buffer_;
  size_t buffered_ = 0, filled_ = 0;  // buffer_[buffered_, filled_) is read and not delivered
  Failure failure_ = Failure::None;
  bool header_phase_ = true;
  size_t request_bytes_ = 0;  // read in this request: headers, then body
  size_t written_ = 0;
  bool close_ = false;
  std::optional<ErrorKind> error_;
  Clock::time_point deadline_ = {}, started_ = {};
};

// The answer to a request whose line or headers failed Connection's limits.
BadRequest header_failure(Connection::Failure failure, const ServeOptions& opt) {
  if (failure == Connection::Failure::HeadersTooLarge)
    return {431, ErrorKind::HeadersTooLarge,
            detail::concat("the request line and headers are over ", kMaxHeaderBytes, " bytes")};
  return {408, ErrorKind::HeaderTimeout,
          detail::concat("the request headers did not arrive within ", opt.header_timeout_s,
                         " s (--header-timeout)")};
}

// The connection the calling thread serves (each connection has a thread of its own).
thread_local Connection* current_connection = nullptr;

// httplib's server with Connection's deadlines and limits on each connection, at most
// --max-connections at once, and a listen backlog to match.
class HttpServer : public httplib::Server {
 public:
  HttpServer(const ServeOptions& opt, Metrics& metrics) : opt_(opt), metrics_(metrics) {
    // One thread per admitted connection and one more, which refuses the connections over the
    // limit (quickly: a short answer, no reading).
    new_task_queue = [this] { return new httplib::ThreadPool(opt_.max_connections + 1); };
  }
  // After binding: room in the kernel's queue for connections that wait to be accepted.
  void set_backlog() { ::listen(svr_sock_, int(std::min<size_t>(opt_.max_connections, 4096))); }
  int64_t connections() const { return connections_; }

  // Answers a request httplib did not (over the limits before its headers were parsed).
  void refuse(Connection& connection, const BadRequest& e) {
    const int status = e.status;
    const std::string body = error_body(e.message);
    const char* reason = status == 408   ? "Request Timeout"
                         : status == 431 ? "Request Header Fields Too Large"
                                         : "Service Unavailable";
    connection.write_all(detail::concat(
        "HTTP/1.1 ", status, " ", reason,
        "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ", body.size(),
        "\r\n\r\n", body));
    metrics_.record(status, e.kind);
    std::fprintf(stderr, "loom serve: %d (%s) %s\n", status, kErrorKindNames[size_t(e.kind)],
                 body.c_str());
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    Connection connection(sock, opt_);
    current_connection = &connection;
    bool ok = true;
    if (size_t(++connections_) > opt_.max_connections) {
      refuse(connection,
             {503, ErrorKind::TooManyConnections,
              detail::concat("the server has ", opt_.max_connections,
                             " connections open (--max-connections): try again later")});
    } else {
      for (size_t left = keep_alive_max_count_; left > 0 && connection.wait_for_request(svr_sock_);
           --left) {
        connection.begin_request();
        bool closed_by_client = false;
        ok = process_request(connection, left == 1, closed_by_client, nullptr);
        // The request line was too slow or too long: httplib answers nothing, this does.
        if (!ok && !connection.responded() && connection.failure() != Connection::Failure::None)
          refuse(connection, header_failure(connection.failure(), opt_));
        // Memory a large request left free in malloc's arenas goes back to the system.
        if (connection.request_bytes() > kTrimAfterBytes) malloc_trim(0);
        // After a deadline or limit, the rest of the request is not the next request.
        if (!ok || closed_by_client || connection.closing() ||
            connection.failure() != Connection::Failure::None)
          break;
      }
    }
    --connections_;
    current_connection = nullptr;
    shutdown(sock, SHUT_RDWR);
    close(sock);
    return ok;
  }

  const ServeOptions& opt_;
  Metrics& metrics_;
  std::atomic<int64_t> connections_ = 0;
};

// One variable's data in a request or its answer: its samples' (or sequences' steps') values
// back to back.
struct VariableData {
  std::vector<float> values;
  std::vector<size_t> lengths;  // a sequence variable's: each sequence's steps (else empty)
  size_t items = 0;             // samples, or sequences
};

// A request's outputs, in the model's output order.
using Outputs = std::vector<VariableData>;

// A parsed request waiting for its outputs.
struct Job {
  std::vector<VariableData> arguments;  // in the model's argument order
  size_t samples = 0;                   // samples (or sequences) in the request
  Clock::time_point arrival = Clock::now();
  Outputs outputs;  // filled by the batch's evaluation
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

// Reads {"inputs": [sample, ...]} or {"inputs": {"arg": [sample, ...], ...}} as nlohmann's SAX
// parser hands it the body's tokens, each number straight into its argument's data. A sample is
// a nested array of the argument's shape (a sequence: a non-empty array of samples).
class RequestReader : public nlohmann::json_sax<json> {
 public:
  explicit RequestReader(const std::vector<Variable>& args) : args_(args) {
    job_.arguments.resize(args.size());
  }

  // The request, once sax_parse has returned true.
  Job take() {
    job_.samples = job_.arguments[0].items;
    for (size_t i = 1; i < args_.size(); ++i)
      if (job_.arguments[i].items != job_.samples)
        throw bad_request("arguments " + args_[0].describe() + " and " + args_[i].describe() +
                          " have different numbers of samples");
    return std::move(job_);
  }

  bool null() override { return unexpected("null"); }
  bool boolean(bool) override { return unexpected("boolean"); }
  bool string(string_t&) override { return unexpected("string"); }
  bool binary(binary_t&) override { return unexpected("binary"); }
  bool number_integer(number_integer_t v) override { return number(double(v), v); }
  bool number_unsigned(number_unsigned_t v) override { return number(double(v), v); }
  bool number_float(number_float_t v, const string_t& text) override { return number(v, text); }

  bool start_object(size_t) override {
    if (place_ == Place::Top) {
      place_ = Place::RequestKey;
    } else if (place_ == Place::Inputs) {
      named_ = true;
      place_ = Place::ArgumentKey;
    } else {
      return unexpected("object");
    }
    return true;
  }
  bool key(string_t& k) override {
    if (place_ == Place::RequestKey) {
      if (k != "inputs")
        throw bad_request("unknown key '" + k + "': a request is {\"inputs\": ...}");
      if (seen_inputs_) throw bad_request("'inputs' is given twice");
      seen_inputs_ = true;
      place_ = Place::Inputs;
      return true;
    }
    const auto a =
        std::find_if(args_.begin(), args_.end(), [&](const Variable& v) { return v.name() == k; });
    if (a == args_.end()) throw bad_request("the model has no argument '" + k + "'");
    arg_ = size_t(a - args_.begin());
    if (seen_[arg_]) throw bad_request("argument '" + k + "' is given twice");
    place_ = Place::Argument;
    return true;
  }
  bool end_object() override {
    if (place_ == Place::ArgumentKey) {
      for (size_t i = 0; i < args_.size(); ++i)
        if (!seen_[i]) throw bad_request("no data for argument " + args_[i].describe());
      place_ = Place::RequestKey;
    } else if (!seen_inputs_) {
      throw bad_request("expected {\"inputs\": ...}");
    } else {
      place_ = Place::Done;
    }
    return true;
  }

  bool start_array(size_t) override {
    if (place_ == Place::Inputs) {
      if (args_.size() != 1)
        throw bad_request(detail::concat("the model takes ", args_.size(),
                                         " arguments: give {\"inputs\": {\"name\": [...], ...}}"));
      arg_ = 0;
      place_ = Place::Argument;
    }
    if (place_ != Place::Argument) return unexpected("array");
    if (counts_.empty()) {
      const Variable& a = args_[arg_];
      if (a.is_sparse() || a.dtype() != DataType::Float32)
        throw bad_request("argument " + a.describe() +
                          " is sparse or not float32: JSON requests take dense float32 data");
      seen_[arg_] = true;
    } else {
      arrive();
      if (counts_.size() == leaf_level())
        throw bad_request(where() + ": expected a number, got an array");
    }
    counts_.push_back(0);
    return true;
  }
  bool end_array() override {
    const size_t n = counts_.back(), level = counts_.size() - 1;
    counts_.pop_back();
    VariableData& data = job_.arguments[arg_];
    const bool sequence = args_[arg_].has_sequence_axis();
    if (level == 0) {
      if (n == 0) throw bad_request(where() + ": expected a non-empty array of samples");
      data.items = n;
      place_ = named_ ? Place::ArgumentKey : Place::RequestKey;
    } else if (sequence && level == 1) {
      if (n == 0)
        throw bad_request(where() + ": expected a sequence: a non-empty array of samples");
      data.lengths.push_back(n);
    } else if (const size_t d = dim(level); n != d) {
      throw bad_request(detail::concat(where(), ": expected an array of ", d, " items, got ", n));
    }
    return true;
  }

  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) override {
    std::string message = e.what();
    if (message.size() > 300) message = message.substr(0, 300) + "...";
    throw bad_request("the body is not JSON, or a number in it is not a float32 number: " +
                      message);
  }

 private:
  enum class Place { Top, RequestKey, Inputs, ArgumentKey, Argument, Done };

  // Array levels before the sample's own: the batch's, and a sequence's.
  size_t first_sample_level() const { return args_[arg_].has_sequence_axis() ? 2 : 1; }
  // The level at which numbers come: inside every array of the sample's shape.
  size_t leaf_level() const { return first_sample_level() + args_[arg_].shape().rank(); }
  size_t dim(size_t level) const { return args_[arg_].shape()[level - first_sample_level()]; }

  // A value arrives in the innermost open array: counted, and refused past the shape's length.
  void arrive() {
    const size_t n = ++counts_.back(), level = counts_.size() - 1;
    if (level >= first_sample_level() && n > dim(level))
      throw bad_request(
          detail::concat(where(), ": expected an array of ", dim(level), " items, got more"));
  }
  // Where the latest value is: inputs['arg'][i][j]...
  std::string where() const {
    std::string out = named_ ? "inputs['" + args_[arg_].name() + "']" : "inputs";
    for (size_t n : counts_) out += detail::concat("[", n - 1, "]");
    return out;
  }
  bool unexpected(const char* what) {
    if (place_ == Place::Argument && !counts_.empty()) {
      arrive();
      throw bad_request(where() + ": expected " +
                        (counts_.size() == leaf_level() ? "a number" : "an array") + ", got " +
                        what);
    }
    if (place_ == Place::Inputs || place_ == Place::Argument)
      throw bad_request(where() + ": expected a non-empty array of samples of shape " +
                        args_[arg_].shape().to_string() + ", got " + what);
    throw bad_request(std::string("expected {\"inputs\": ...}, got ") + what);
  }
  template <typename Text>
  bool number(double v, const Text& text) {
    if (place_ != Place::Argument || counts_.empty()) return unexpected("a number");
    arrive();
    if (counts_.size() != leaf_level())
      throw bad_request(where() + ": expected an array, got a number");
    const float f = float(v);
    if (!std::isfinite(f))
      throw bad_request(detail::concat(where(), ": ", text, " is not a finite float32 number"));
    job_.arguments[arg_].values.push_back(f);
    return true;
  }

  const std::vector<Variable>& args_;
  Job job_;
  Place place_ = Place::Top;
  bool named_ = false, seen_inputs_ = false;
  size_t arg_ = 0;
  std::vector<bool> seen_ = std::vector<bool>(args_.size());
  std::vector<size_t> counts_;  // per open array of the argument's data: the values seen
};

Job parse_request(const std::string& body, const ModelRunner& runner) {
  RequestReader reader(runner.arguments());
  json::sax_parse(body, &reader);
  return reader.take();
}

// Appends the values at p, a nested array of shape dims, as JSON (non-finite values as null).
void append_nested(std::string& out, const float*& p, std::span<const size_t> dims) {
  if (dims.empty()) {
    const float v = *p++;
    if (!std::isfinite(v)) {
      out += "null";
      return;
    }
    char text[32];
    out.append(text, std::to_chars(text, text + sizeof text, v).ptr);
    return;
  }
  out += '[';
  for (size_t i = 0; i < dims[0]; ++i) {
    if (i > 0) out += ',';
    append_nested(out, p, dims.subspan(1));
  }
  out += ']';
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

  // Evaluates the jobs as one batch (their samples concatenated: the jobs' data moves into the
  // batch's) and hands each its outputs.
  void run(const std::vector<std::shared_ptr<Job>>& batch) {
    try {
      const std::vector<Variable>& args = runner_.arguments();
      ValueMap values;
      for (size_t i = 0; i < args.size(); ++i) {
        VariableData data = std::move(batch[0]->arguments[i]);
        for (size_t j = 1; j < batch.size(); ++j) {
          VariableData more = std::move(batch[j]->arguments[i]);
          data.values.insert(data.values.end(), more.values.begin(), more.values.end());
          data.lengths.insert(data.lengths.end(), more.lengths.begin(), more.lengths.end());
        }
        values.emplace(args[i], args[i].has_sequence_axis()
                                    ? Value::create_sequences<float>(args[i].shape(), data.values,
                                                                     data.lengths)
                                    : Value::create_batch<float>(args[i].shape(), data.values));
      }
      const ValueMap outputs = runner_.evaluate(values);
      for (auto& job : batch) job->outputs.resize(runner_.outputs().size());
      for (size_t o = 0; o < runner_.outputs().size(); ++o) {
        const Value& value = outputs.at(runner_.outputs()[o]);
        // A batch's samples lie back to back; sequences are read one by one, never padded.
        const std::vector<float> all =
            value.is_sequence() ? std::vector<float>() : value.data().to_vector<float>();
        const size_t n = value.sample_shape().total_size();
        size_t b = 0;  // the batch's sample (or sequence) that starts the job's
        for (auto& job : batch) {
          VariableData& mine = job->outputs[o];
          mine.items = job->samples;
          if (!value.is_sequence())
            mine.values.assign(all.begin() + std::ptrdiff_t(b * n),
                               all.begin() + std::ptrdiff_t((b + job->samples) * n));
          for (size_t end = b + job->samples; value.is_sequence() && b < end; ++b) {
            const std::vector<float> steps = value.sequence(b).to_vector<float>();
            mine.values.insert(mine.values.end(), steps.begin(), steps.end());
            mine.lengths.push_back(value.sequence_length(b));
          }
          if (!value.is_sequence()) b += job->samples;
        }
      }
    } catch (...) {
      for (const auto& job : batch) job->result.set_exception(std::current_exception());
      return;
    }
    for (const auto& job : batch) job->result.set_value(std::move(job->outputs));
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

// Refuses the request: the status, {"error": message}, and the kind for /metrics. A request
// whose body is left unread closes its connection (the body is not the next request).
void refuse(httplib::Response& res, const BadRequest& e, bool body_unread = false) {
  res.status = e.status;
  res.set_content(error_body(e.message), "application/json");
  current_connection->error() = e.kind;
  if (body_unread) {
    res.set_header("Connection", "close");
    current_connection->close_after_response();
  }
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

std::string outputs_json(const ModelRunner& runner, const Outputs& outputs) {
  const bool named = outputs.size() > 1;
  std::string out = named ? "{\"outputs\":{" : "{\"outputs\":";
  size_t values = 0;
  for (const VariableData& data : outputs) values += data.values.size();
  out.reserve(values * 12 + 64);  // most numbers take 8 to 11 characters, with their commas
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Variable& v = runner.outputs()[o];
    if (o > 0) out += ',';
    if (named) out += json(v.name().empty() ? v.uid() : v.name()).dump() + ':';
    const float* p = outputs[o].values.data();
    out += '[';
    for (size_t i = 0; i < outputs[o].items; ++i) {
      if (i > 0) out += ',';
      if (!v.has_sequence_axis()) {
        append_nested(out, p, v.shape().dims());
        continue;
      }
      out += '[';
      for (size_t t = 0; t < outputs[o].lengths[i]; ++t) {
        if (t > 0) out += ',';
        append_nested(out, p, v.shape().dims());
      }
      out += ']';
    }
    out += ']';
  }
  out += named ? "}}" : "}";
  return out;
}

// The body's media type: JSON, or form-encoded (what `curl -d` sends whatever the data: read as
// JSON too); anything else is refused before the body is read.
void check_content_type(const httplib::Request& req) {
  std::string type = req.get_header_value("Content-Type");
  type = type.substr(0, type.find(';'));
  type.erase(std::remove(type.begin(), type.end(), ' '), type.end());
  std::transform(type.begin(), type.end(), type.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  if (type.empty() || type == "application/json" || type == "application/x-www-form-urlencoded")
    return;
  throw BadRequest{
      415, ErrorKind::UnsupportedType,
      "the body is " + type + ": send the JSON request with Content-Type: application/json"};
}

// The request's body, read as it arrives (any transfer encoding) up to --max-body bytes.
std::string read_body(const httplib::Request& req, const httplib::ContentReader& read,
                      const ServeOptions& opt) {
  const BadRequest too_large{
      413, ErrorKind::BodyTooLarge,
      detail::concat("the request body is larger than ", opt.max_body, " bytes (--max-body)")};
  if (req.has_header("Content-Length") &&
      req.get_header_value<uint64_t>("Content-Length") > opt.max_body)
    throw too_large;
  std::string body;
  if (req.has_header("Content-Length"))
    body.reserve(size_t(req.get_header_value<uint64_t>("Content-Length")));
  bool over = false;
  const bool complete = read([&](const char* data, size_t size) {
    over = body.size() + size > opt.max_body;
    if (!over) body.append(data, size);
    return !over;
  });
  if (over) throw too_large;
  if (current_connection->failure() == Connection::Failure::BodyTimeout)
    throw BadRequest{408, ErrorKind::BodyTimeout,
                     detail::concat("the request body did not arrive within ", opt.body_timeout_s,
                                    " s (--body-timeout)")};
  if (!complete)
    throw bad_request("the request body ended early, or its chunked encoding is malformed");
  return body;
}

// At most 100 characters of a client's text for the log, bytes outside printable ASCII as '?'.
std::string printable(const std::string& text) {
  std::string out = text.substr(0, 100);
  for (char& c : out)
    if (c < ' ' || c > '~') c = '?';
  return text.size() > out.size() ? out + "..." : out;
}

// The kind of an error response httplib made (malformed HTTP).
ErrorKind kind_of(int status) {
  return status == 414   ? ErrorKind::HeadersTooLarge
         : status == 415 ? ErrorKind::UnsupportedType
         : status >= 500 ? ErrorKind::Internal
                         : ErrorKind::BadRequest;
}

void serve(const ServeOptions& opt) {
  if (opt.port < 0 || opt.port > 65535)
    throw UsageError("--port: give a port from 1 to 65535 (0: any free port)");
  if (opt.max_batch == 0) throw UsageError("--max-batch must be at least 1");
  if (opt.batch_delay_ms < 0) throw UsageError("--batch-delay-ms must not be negative");
  if (opt.max_connections == 0) throw UsageError("--max-connections must be at least 1");
  if (!(opt.header_timeout_s > 0) || !(opt.body_timeout_s > 0))
    throw UsageError("--header-timeout and --body-timeout must be positive");
  // Blocks of 128 KiB and more (a request's body, its data, a batch's activations) are mapped
  // and unmapped on their own, so that memory goes back to the system after each request (by
  // default glibc raises this threshold to the largest block freed, up to 32 MiB, and keeps
  // those blocks in its arenas).
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  const ModelRunner runner(opt.model);

  // SIGTERM and SIGINT go to a thread of their own (every thread started below inherits the
  // mask), which stops the server.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Metrics metrics;
  HttpServer server(opt, metrics);
  // A response goes out in two writes (headers, body): without TCP_NODELAY, Nagle's algorithm
  // holds the second until the client's delayed ACK, 40 ms later.
  server.set_tcp_nodelay(true);
  // httplib's default options add SO_REUSEPORT, with which a second server on the same port
  // starts and silently shares it: keep SO_REUSEADDR only (a restart may reuse the port at once).
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // Every response over 400 passes here: httplib's own (malformed HTTP, no such route) get a
  // JSON message; all are counted and logged.
  server.set_error_handler([&](const httplib::Request& req, httplib::Response& res) {
    Connection& connection = *current_connection;
    if (connection.error()) return;  // a handler refused it, with its message
    if (connection.failure() == Connection::Failure::HeaderTimeout ||
        connection.failure() == Connection::Failure::HeadersTooLarge)
      return refuse(res, header_failure(connection.failure(), opt), true);
    if (res.status == 404)
      return refuse(res, {404, ErrorKind::NotFound,
                          "no such resource: " + req.method + " " + printable(req.path)});
    // Malformed HTTP: what follows it is no request.
    refuse(res,
           {res.status, kind_of(res.status),
            res.status == 414   ? "the request line is too long"
            : res.status == 400 ? "malformed request line or headers"
                                : detail::concat("HTTP status ", res.status)},
           true);
  });
  server.set_logger([&](const httplib::Request& req, const httplib::Response& res) {
    Connection& connection = *current_connection;
    metrics.record(res.status, connection.error());
    if (req.path.ends_with(":predict") && res.status == 200)
      metrics.record_latency(
          std::chrono::duration<double>(Clock::now() - connection.started()).count());
    if (connection.error())
      std::fprintf(stderr, "loom serve: %d (%s) %s %s from %s: %.300s\n", res.status,
                   kErrorKindNames[size_t(*connection.error())], printable(req.method).c_str(),
                   printable(req.path).c_str(), req.remote_addr.c_str(), res.body.c_str());
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
        refuse(res, {500, ErrorKind::Internal, message}, true);
      });
  // Before routing (the headers are in, the body is not): the body's deadline starts, and a
  // body where none is taken is refused unread.
  server.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    current_connection->begin_body();
    if (req.method == "POST") return httplib::Server::HandlerResponse::Unhandled;
    if (req.method != "GET" && req.method != "HEAD") {
      refuse(res, {405, ErrorKind::MethodNotAllowed, req.method + " is not served: GET or POST"},
             true);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.has_header("Transfer-Encoding") ||
        (req.has_header("Content-Length") &&
         req.get_header_value<uint64_t>("Content-Length") > 0)) {
      refuse(res, bad_request(req.method + " requests take no body"), true);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  Batcher batcher(runner, opt);
  auto unknown_model = [&](const std::string& name) {
    return BadRequest{404, ErrorKind::NotFound,
                      "no model '" + name + "': this server serves '" + opt.name + "'"};
  };
  std::atomic<int64_t> in_flight = 0;
  server.Get("/healthz", [&](const httplib::Request&, httplib::Response& res) {
    reply(res, 200, {{"status", "ok"}, {"in_flight", in_flight.load()}});
  });
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.text(server.connections(), in_flight.load()),
                    "text/plain; version=0.0.4");
  });
  server.Get(R"(/v1/models/([^/:]+))", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] != opt.name) return refuse(res, unknown_model(req.matches[1]));
    reply(res, 200, signature(runner, opt));
  });
  server.Post(R"(/v1/models/([^/:]+):predict)", [&](const httplib::Request& req,
                                                    httplib::Response& res,
                                                    const httplib::ContentReader& read) {
    ++in_flight;
    struct Done {
      std::atomic<int64_t>& count;
      ~Done() { --count; }
    } done{in_flight};
    bool body_read = false;
    try {
      if (req.matches[1] != opt.name) throw unknown_model(req.matches[1]);
      check_content_type(req);
      Job job = [&] {
        const std::string body = read_body(req, read, opt);
        body_read = true;
        return parse_request(body, runner);
      }();  // the body is freed here, before the evaluation
      res.status = 200;
      res.set_content(outputs_json(runner, batcher.evaluate(std::move(job))), "application/json");
    } catch (const BadRequest& e) {
      refuse(res, e, !body_read);
    } catch (const ShapeError& e) {
      refuse(res, bad_request(e.what()));
    }
  });
  // Any other POST: its body is not read.
  server.Post(".*", [&](const httplib::Request& req, httplib::Response& res,
                        const httplib::ContentReader&) {
    refuse(res, {404, ErrorKind::NotFound, "no such resource: POST " + req.path}, true);
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
  server.set_backlog();
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
  cmd->add_option("--max-connections", opt->max_connections,
                  "Most connections open at once (more: 503)")
      ->capture_default_str();
  cmd->add_option("--header-timeout", opt->header_timeout_s,
                  "Seconds a request's headers may take to arrive (slower: 408)")
      ->capture_default_str();
  cmd->add_option("--body-timeout", opt->body_timeout_s,
                  "Seconds a request's body may take to arrive after its headers (slower: 408)")
      ->capture_default_str();
  cmd->callback([opt] { serve(*opt); });
}

}  // namespace loom::tools
