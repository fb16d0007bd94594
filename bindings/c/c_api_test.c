/* Tests of loom_c.h, written in C99 as a caller would. Each case is one ctest test
 * (bindings_c_<case>); the references come from Loom's C++ ModelRunner (c_api_reference.cpp).
 *
 *   c_api_test CASE WORK_DIR      CASE: info, dense, sequences, sparse, threads, errors
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "c_api_reference.h"
#include "loom_c.h"

#define MODELS LOOM_SHARED_DIR "/cntk-models/"
static const char* const kMnist = MODELS "v1_01_OneHidden.dnn";    /* features, labels: sequences */
static const char* const kAbs = MODELS "v2_load_and_eval.dnn";     /* i1: Sequence[[1,2]] -> abs */
static const char* const kAtis = MODELS "v2_atis_slot_tagger.cmf"; /* keep: sparse [943] seq */
static char g_loom_model[4096], g_onnx_model[4096];                /* written in WORK_DIR */

static int g_failures = 0;

#define CHECK(cond, what)                                                                 \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      fprintf(stderr, "%s:%d: %s (CHECK(%s) failed)\n", __FILE__, __LINE__, what, #cond); \
      ++g_failures;                                                                       \
    }                                                                                     \
  } while (0)

/* A call that must succeed: the rest of the case depends on it. */
#define OK(call) expect_ok((call), #call, __LINE__)
static void expect_ok(loom_status status, const char* call, int line) {
  if (status == LOOM_OK) return;
  fprintf(stderr, "line %d: %s returned %s: %s\n", line, call, loom_status_name(status),
          loom_last_error_message());
  exit(1);
}

/* A call that must fail with status and a message containing needle. */
#define FAILS(call, status, needle) expect_failure((call), status, needle, #call, __LINE__)
static void expect_failure(loom_status got, loom_status want, const char* needle, const char* call,
                           int line) {
  const char* message = loom_last_error_message();
  if (got == want && loom_last_error_status() == want && strstr(message, needle)) {
    printf("  %s -> %s: %s\n", call, loom_status_name(got), message);
    return;
  }
  fprintf(stderr, "line %d: %s returned %s (\"%s\"), expected %s with \"%s\"\n", line, call,
          loom_status_name(got), message, loom_status_name(want), needle);
  ++g_failures;
}

/* Deterministic data: a linear congruential generator in [-1, 1). */
static void fill(float* data, int64_t n, unsigned seed) {
  unsigned s = seed * 2654435761u + 1u;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    data[i] = (float)((s >> 8) % 2000u) / 1000.0f - 1.0f;
  }
}

static float* floats(int64_t n) {
  float* p = calloc((size_t)n, sizeof(float));
  if (!p) exit(2);
  return p;
}

static loom_model* load(const char* path) {
  loom_model* model = NULL;
  OK(loom_model_load(path, &model));
  return model;
}

/* The value's packed float32 data (a new buffer) and its element count. */
static float* read_value(const loom_value* value, int64_t* count) {
  float* out;
  OK(loom_value_element_count(value, count));
  out = floats(*count);
  OK(loom_value_copy_data(value, LOOM_FLOAT32, out, *count));
  return out;
}

static void check_same(const float* a, int64_t na, const float* b, int64_t nb, const char* what) {
  CHECK(na == nb, what);
  CHECK(na == nb && memcmp(a, b, (size_t)na * sizeof(float)) == 0, what);
}

static int64_t output_index(const loom_model* model, const char* name) {
  int64_t index = -1;
  OK(loom_model_variable_index(model, LOOM_OUTPUT, name, &index));
  return index;
}

/* A file's bytes (a new buffer). */
static void* read_file(const char* path, int64_t* size) {
  FILE* f = fopen(path, "rb");
  void* bytes;
  if (!f) exit(2);
  fseek(f, 0, SEEK_END);
  *size = ftell(f);
  fseek(f, 0, SEEK_SET);
  bytes = malloc((size_t)*size);
  if (!bytes || fread(bytes, 1, (size_t)*size, f) != (size_t)*size) exit(2);
  fclose(f);
  return bytes;
}

/* ---- info: the model's arguments and outputs ------------------------------------------- */

static void check_variable(const loom_model* model, loom_variable_kind kind, const char* name,
                           int64_t dim, int32_t flags) {
  int64_t index = -1, rank = -1, dims[4] = {0}, again = -1;
  const char *got_name = NULL, *uid = NULL;
  loom_dtype dtype = 0;
  int32_t got_flags = -1;
  OK(loom_model_variable_index(model, kind, name, &index));
  OK(loom_model_variable_name(model, kind, index, &got_name));
  CHECK(strcmp(got_name, name) == 0, name);
  OK(loom_model_variable_uid(model, kind, index, &uid));
  CHECK(uid[0] != '\0', "a variable has a uid");
  OK(loom_model_variable_index(model, kind, uid, &again)); /* found by uid too */
  CHECK(again == index, "the index by uid is the index by name");
  OK(loom_model_variable_rank(model, kind, index, &rank));
  CHECK(rank == 1, name);
  OK(loom_model_variable_shape(model, kind, index, dims, 4));
  CHECK(dims[0] == dim, name);
  OK(loom_model_variable_dtype(model, kind, index, &dtype));
  CHECK(dtype == LOOM_FLOAT32, name);
  OK(loom_model_variable_flags(model, kind, index, &got_flags));
  CHECK(got_flags == flags, name);
  printf("  %s %s: uid %s, [%lld], flags %d\n",
         kind == LOOM_ARGUMENT ? "argument"
         : kind == LOOM_OUTPUT ? "output"
                               : "node",
         name, uid, (long long)dims[0], (int)got_flags);
}

static void test_info(void) {
  const int32_t seq = LOOM_FLAG_BATCH_AXIS | LOOM_FLAG_SEQUENCE_AXIS;
  int64_t count = -1;
  loom_model *mnist, *atis, *dense, *from_bytes;
  loom_value *in = NULL, *out[2] = {NULL, NULL};
  const int64_t three[1] = {3};
  const float ones[3] = {1, 1, 1};
  const char* features[1] = {"features"};
  int64_t size;
  void* bytes;
  const char *a = NULL, *b = NULL;
  int64_t i;

  CHECK(loom_c_api_version() == LOOM_C_API_VERSION, "the library's API version");
  CHECK(strlen(loom_version()) > 0, "loom_version");
  CHECK(strcmp(loom_status_name(LOOM_STATUS_IO_ERROR), "LOOM_STATUS_IO_ERROR") == 0, "status");

  mnist = load(kMnist);
  OK(loom_model_variable_count(mnist, LOOM_ARGUMENT, &count));
  CHECK(count == 2, "MNIST takes features and labels");
  OK(loom_model_variable_count(mnist, LOOM_OUTPUT, &count));
  CHECK(count == 4, "MNIST computes ce, errs, ol.z, top5Errs");
  check_variable(mnist, LOOM_ARGUMENT, "features", 784, seq);
  check_variable(mnist, LOOM_ARGUMENT, "labels", 10, seq);
  check_variable(mnist, LOOM_OUTPUT, "ol.z", 10, seq);

  atis = load(kAtis);
  check_variable(atis, LOOM_ARGUMENT, "keep", 943, seq | LOOM_FLAG_SPARSE);

  dense = load(g_loom_model);
  check_variable(dense, LOOM_ARGUMENT, "features", 3, LOOM_FLAG_BATCH_AXIS);
  check_variable(dense, LOOM_OUTPUT, "scores", 2, LOOM_FLAG_BATCH_AXIS);
  check_variable(dense, LOOM_OUTPUT, "hidden", 4, LOOM_FLAG_BATCH_AXIS);

  /* The same file from memory. */
  bytes = read_file(g_loom_model, &size);
  OK(loom_model_load_from_bytes(bytes, size, &from_bytes));
  free(bytes); /* the model copied what it needs: it still evaluates */
  OK(loom_value_create_dense(LOOM_FLOAT32, three, 1, 1, ones, 3, &in));
  OK(loom_model_evaluate(from_bytes, 1, features, &in, 2, NULL, out));
  OK(loom_value_free(out[0]));
  OK(loom_value_free(out[1]));
  OK(loom_value_free(in));
  OK(loom_model_variable_count(from_bytes, LOOM_OUTPUT, &count));
  CHECK(count == 2, "the model from bytes has two outputs");
  for (i = 0; i < count; ++i) {
    OK(loom_model_variable_uid(dense, LOOM_OUTPUT, i, &a));
    OK(loom_model_variable_uid(from_bytes, LOOM_OUTPUT, i, &b));
    CHECK(strcmp(a, b) == 0, "the model from bytes has the file's uids");
  }
  OK(loom_model_free(from_bytes));
  OK(loom_model_free(dense));
  OK(loom_model_free(atis));
  OK(loom_model_free(mnist));
}

/* ---- dense: batches on Loom's own model, against ModelRunner ---------------------------- */

static void test_dense(void) {
  enum { N = 5 };
  const int64_t sample[1] = {3};
  float input[N * 3], expected[N * 4];
  const float* data[1] = {input};
  const char* names[1] = {"features"};
  const char* scores_only[1] = {"scores"};
  int64_t in_index[1] = {0}, out_order[2] = {1, 0}, lengths[N], dims[2] = {0}, rank = 0, n = 0;
  int64_t n_expected, n_got, k, got_count;
  loom_model* model = load(g_loom_model);
  loom_value *in = NULL, *out[2] = {NULL, NULL}, *by_index[2] = {NULL, NULL}, *chosen[1] = {NULL};
  const char* output_names[2] = {"scores", "hidden"};
  double as_double[N * 4];
  const void* direct = NULL;
  float *got, *onnx_scores;
  int32_t flags = 0;
  int o;
  loom_model* onnx[2] = {NULL, NULL};
  loom_value* onnx_out[2] = {NULL, NULL};
  void* bytes;
  int64_t size;

  fill(input, N * 3, 1);
  OK(loom_value_create_dense(LOOM_FLOAT32, sample, 1, N, input, N * 3, &in));
  OK(loom_model_evaluate(model, 1, names, &in, 2, NULL, out)); /* all outputs, model order */
  OK(loom_model_evaluate_by_index(model, 1, in_index, &in, 2, out_order, by_index));
  OK(loom_model_evaluate(model, 1, names, &in, 1, scores_only, chosen));
  for (o = 0; o < 2; ++o) {
    n_expected =
        reference_dense(g_loom_model, 1, names, data, N, NULL, output_names[o], expected, N * 4);
    CHECK(n_expected == N * (o == 0 ? 2 : 4), "the reference ran");
    got = read_value(out[o], &n_got);
    check_same(got, n_got, expected, n_expected, "C API output = ModelRunner's, bitwise");
    free(got);
    got = read_value(by_index[1 - o], &n_got);
    check_same(got, n_got, expected, n_expected, "evaluate_by_index gives the same");
    free(got);
    /* The pointer into the value holds the same data; float64 copies convert each element. */
    OK(loom_value_data(out[o], &direct));
    CHECK(memcmp(direct, expected, (size_t)n_expected * sizeof(float)) == 0, "loom_value_data");
    OK(loom_value_copy_data(out[o], LOOM_FLOAT64, as_double, N * 4));
    for (k = 0; k < n_expected; ++k) CHECK(as_double[k] == (double)expected[k], "as float64");
  }
  n_expected = reference_dense(g_loom_model, 1, names, data, N, NULL, "scores", expected, N * 4);
  got = read_value(chosen[0], &n_got);
  check_same(got, n_got, expected, n_expected, "one chosen output = the same output of all");
  free(got);

  OK(loom_value_num_sequences(out[0], &n));
  CHECK(n == N, "one row per sample");
  OK(loom_value_sequence_lengths(out[0], lengths, N));
  for (k = 0; k < N; ++k) CHECK(lengths[k] == 1, "a sample is one step");
  OK(loom_value_sample_rank(out[0], &rank));
  OK(loom_value_sample_shape(out[0], dims, 2));
  CHECK(rank == 1 && dims[0] == 2, "scores are [2]");
  OK(loom_value_flags(out[0], &flags));
  CHECK(flags == LOOM_FLAG_BATCH_AXIS, "a batch of samples");
  OK(loom_value_element_count(in, &got_count));
  CHECK(got_count == N * 3, "the input's element count");

  /* The same model exported as ONNX, from a file and from memory. */
  OK(loom_model_load_onnx(g_onnx_model, &onnx[0]));
  bytes = read_file(g_onnx_model, &size);
  OK(loom_model_load_onnx_from_bytes(bytes, size, &onnx[1]));
  free(bytes);
  got = read_value(out[0], &n_got);
  for (o = 0; o < 2; ++o) {
    OK(loom_model_variable_index(onnx[o], LOOM_ARGUMENT, "features", &k));
    /* ONNX keeps the outputs' order, not the names of Loom's aliases. */
    OK(loom_model_evaluate(onnx[o], 1, names, &in, 2, NULL, onnx_out));
    onnx_scores = read_value(onnx_out[0], &n_expected);
    CHECK(n_expected == n_got, "ONNX: as many scores");
    for (k = 0; k < n_got && k < n_expected; ++k)
      CHECK(fabsf(onnx_scores[k] - got[k]) <= 1e-6f, "ONNX scores = Loom's");
    free(onnx_scores);
    OK(loom_value_free(onnx_out[0]));
    OK(loom_value_free(onnx_out[1]));
    OK(loom_model_free(onnx[o]));
  }
  free(got);

  for (o = 0; o < 2; ++o) {
    OK(loom_value_free(out[o]));
    OK(loom_value_free(by_index[o]));
  }
  OK(loom_value_free(chosen[0]));
  OK(loom_value_free(in));
  OK(loom_model_free(model));
}

/* ---- sequences: dense sequences of two CNTK models -------------------------------------- */

static void test_sequences(void) {
  enum { S = 3, STEPS = 6 };
  const int64_t lengths[S] = {2, 3, 1}, abs_sample[2] = {1, 2}, feature_dim[1] = {784},
                label_dim[1] = {10};
  float abs_in[STEPS * 2], *features, labels[STEPS * 10], expected[STEPS * 10], *got;
  const float* data[2];
  const char* names[2] = {"features", "labels"};
  const char* ol_z[1] = {"ol.z"};
  const char* h1_z[1] = {"h1.z"};
  int64_t h1_index = -1, features_index = -1;
  const char* i1[1] = {"i1"};
  const int32_t seq = LOOM_FLAG_BATCH_AXIS | LOOM_FLAG_SEQUENCE_AXIS;
  static float hidden[STEPS * 200];
  int64_t got_lengths[S], n_got, n_expected, k, z;
  loom_model *abs_model = load(kAbs), *mnist = load(kMnist);
  loom_value *in[2] = {NULL, NULL}, *out[4] = {NULL, NULL, NULL, NULL}, *alone[1] = {NULL},
             *abs_out[1] = {NULL};

  /* Abs of [1,2] steps: the lengths come back, and every element is |x|. */
  fill(abs_in, STEPS * 2, 2);
  OK(loom_value_create_dense_sequences(LOOM_FLOAT32, abs_sample, 2, S, lengths, abs_in, STEPS * 2,
                                       &in[0]));
  OK(loom_model_evaluate(abs_model, 1, i1, in, 1, NULL, abs_out));
  OK(loom_value_sequence_lengths(abs_out[0], got_lengths, S));
  for (k = 0; k < S; ++k) CHECK(got_lengths[k] == lengths[k], "the output keeps the lengths");
  got = read_value(abs_out[0], &n_got);
  CHECK(n_got == STEPS * 2, "packed: no padding");
  for (k = 0; k < n_got && k < STEPS * 2; ++k) CHECK(got[k] == fabsf(abs_in[k]), "abs");
  data[0] = abs_in;
  n_expected = reference_dense(kAbs, 1, i1, data, S, lengths, "Abs4_Output_0", expected, 20);
  check_same(got, n_got, expected, n_expected, "Abs: C API = ModelRunner");
  free(got);
  OK(loom_value_free(abs_out[0]));
  OK(loom_value_free(in[0]));

  /* MNIST's v1 network: sequences of images and labels, all four outputs. */
  features = floats(STEPS * 784);
  fill(features, STEPS * 784, 3);
  memset(labels, 0, sizeof labels);
  for (k = 0; k < STEPS; ++k) labels[k * 10 + k % 10] = 1.0f;
  OK(loom_value_create_dense_sequences(LOOM_FLOAT32, feature_dim, 1, S, lengths, features,
                                       STEPS * 784, &in[0]));
  OK(loom_value_create_dense_sequences(LOOM_FLOAT32, label_dim, 1, S, lengths, labels, STEPS * 10,
                                       &in[1]));
  OK(loom_model_evaluate(mnist, 2, names, in, 4, NULL, out));
  data[0] = features;
  data[1] = labels;
  n_expected = reference_dense(kMnist, 2, names, data, S, lengths, "ol.z", expected, STEPS * 10);
  z = output_index(mnist, "ol.z");
  got = read_value(out[z], &n_got);
  check_same(got, n_got, expected, n_expected, "MNIST ol.z: C API = ModelRunner");
  free(got);
  /* ol.z alone needs no labels, and gives the same. */
  OK(loom_model_evaluate(mnist, 1, names, in, 1, ol_z, alone));
  got = read_value(alone[0], &n_got);
  check_same(got, n_got, expected, n_expected, "ol.z alone = ol.z of all outputs");
  free(got);

  OK(loom_value_free(alone[0]));
  /* An inner node's output (CNTK's FindByName("h1.z") and EvaluateIntermediateLayer): listed
   * as LOOM_NODE, chosen by name like an output, the same as Function::eval of that node. */
  check_variable(mnist, LOOM_NODE, "h1.z", 200, seq);
  OK(loom_model_variable_count(mnist, LOOM_NODE, &k));
  CHECK(k > 4, "MNIST's graph has more node outputs than outputs");
  OK(loom_model_evaluate(mnist, 1, names, in, 1, h1_z, alone));
  got = read_value(alone[0], &n_got);
  n_expected = reference_dense(kMnist, 1, names, data, S, lengths, "h1.z", hidden, STEPS * 200);
  check_same(got, n_got, hidden, n_expected, "MNIST h1.z: C API = Function::eval");
  free(got);
  OK(loom_value_free(alone[0]));
  /* The same by node index (loom_model_evaluate_nodes, as the C# and Java clients call it). */
  OK(loom_model_variable_index(mnist, LOOM_NODE, "h1.z", &h1_index));
  OK(loom_model_variable_index(mnist, LOOM_ARGUMENT, "features", &features_index));
  OK(loom_model_evaluate_nodes(mnist, 1, &features_index, in, 1, &h1_index, alone));
  got = read_value(alone[0], &n_got);
  check_same(got, n_got, hidden, n_expected, "MNIST h1.z by node index");
  free(got);
  OK(loom_value_free(alone[0]));
  FAILS(loom_model_evaluate_nodes(mnist, 1, &features_index, in, 1, NULL, alone),
        LOOM_STATUS_ARGUMENT_ERROR, "node_indices is NULL");
  FAILS(loom_model_evaluate_nodes(mnist, 1, &features_index, in, 1, &k, alone),
        LOOM_STATUS_ARGUMENT_ERROR, "out of range");
  for (k = 0; k < 4; ++k) OK(loom_value_free(out[k]));
  OK(loom_value_free(in[0]));
  OK(loom_value_free(in[1]));
  free(features);
  OK(loom_model_free(mnist));
  OK(loom_model_free(abs_model));
}

/* ---- sparse: one-hot and CSR inputs give the same ---------------------------------------- */

static void test_sparse(void) {
  enum { S = 2, STEPS = 7, N = 4 };
  /* Two ATIS queries as word indices (lines of atis_query.wl). */
  const int64_t lengths[S] = {4, 3}, indices[STEPS] = {178, 429, 444, 851, 178, 266, 851};
  const int64_t dim[1] = {943}, dense_dim[1] = {3}, hot[N] = {0, 2, LOOM_ONE_HOT_SKIP, 1};
  const char* keep[1] = {"keep"};
  const char* features[1] = {"features"};
  const char* scores[1] = {"scores"};
  int32_t offsets[STEPS + 1], columns[STEPS], batch_offsets[N + 1] = {0, 1, 2, 2, 3},
                                                                batch_columns[3] = {0, 2, 1};
  float ones[STEPS], batch_ones[3] = {1, 1, 1}, one_hot_dense[N * 3], expected[STEPS * 129];
  float *a, *b, *c;
  int64_t na, nb, nc, n_expected, k;
  loom_model *atis = load(kAtis), *model = load(g_loom_model);
  loom_value *one_hot = NULL, *csr = NULL, *dense = NULL, *out_a[1], *out_b[1], *out_c[2];
  int32_t flags = 0;

  for (k = 0; k < STEPS; ++k) {
    offsets[k] = (int32_t)k;
    columns[k] = (int32_t)indices[k];
    ones[k] = 1.0f;
  }
  offsets[STEPS] = STEPS;
  OK(loom_value_create_one_hot_sequences(LOOM_FLOAT32, 943, S, lengths, indices, &one_hot));
  OK(loom_value_create_csr_sequences(LOOM_FLOAT32, dim, 1, S, lengths, offsets, STEPS + 1, columns,
                                     ones, STEPS, &csr));
  OK(loom_value_flags(csr, &flags));
  CHECK(flags == (LOOM_FLAG_SPARSE | LOOM_FLAG_BATCH_AXIS | LOOM_FLAG_SEQUENCE_AXIS), "CSR flags");
  OK(loom_model_evaluate(atis, 1, keep, &one_hot, 1, NULL, out_a));
  OK(loom_model_evaluate(atis, 1, keep, &csr, 1, NULL, out_b));
  a = read_value(out_a[0], &na);
  b = read_value(out_b[0], &nb);
  CHECK(na == STEPS * 129, "129 scores a word");
  check_same(a, na, b, nb, "ATIS: one-hot = CSR");
  n_expected = reference_one_hot(kAtis, "keep", 943, S, lengths, indices, "Plus2855_Output_0",
                                 expected, STEPS * 129);
  check_same(a, na, expected, n_expected, "ATIS: C API = ModelRunner");
  free(a);
  free(b);
  OK(loom_value_free(out_a[0]));
  OK(loom_value_free(out_b[0]));
  OK(loom_value_free(one_hot));
  OK(loom_value_free(csr));

  /* Batches of samples: one-hot, CSR and the same vectors dense, into Loom's dense model. */
  memset(one_hot_dense, 0, sizeof one_hot_dense);
  for (k = 0; k < N; ++k)
    if (hot[k] != LOOM_ONE_HOT_SKIP) one_hot_dense[k * 3 + hot[k]] = 1.0f;
  OK(loom_value_create_one_hot(LOOM_FLOAT32, 3, N, hot, &one_hot));
  OK(loom_value_create_csr(LOOM_FLOAT32, dense_dim, 1, N, batch_offsets, N + 1, batch_columns,
                           batch_ones, 3, &csr));
  OK(loom_value_create_dense(LOOM_FLOAT32, dense_dim, 1, N, one_hot_dense, N * 3, &dense));
  OK(loom_model_evaluate(model, 1, features, &one_hot, 1, scores, out_a));
  OK(loom_model_evaluate(model, 1, features, &csr, 1, scores, out_b));
  OK(loom_model_evaluate(model, 1, features, &dense, 2, NULL, out_c));
  a = read_value(out_a[0], &na);
  b = read_value(out_b[0], &nb);
  c = read_value(out_c[0], &nc);
  check_same(a, na, b, nb, "one-hot batch = CSR batch");
  CHECK(na == nc, "sparse and dense give as many scores");
  for (k = 0; k < na && k < nc; ++k) CHECK(fabsf(a[k] - c[k]) <= 1e-6f, "sparse = dense");
  free(a);
  free(b);
  free(c);
  OK(loom_value_free(out_a[0]));
  OK(loom_value_free(out_b[0]));
  OK(loom_value_free(out_c[0]));
  OK(loom_value_free(out_c[1]));
  OK(loom_value_free(one_hot));
  OK(loom_value_free(csr));
  OK(loom_value_free(dense));
  OK(loom_model_free(model));
  OK(loom_model_free(atis));
}

/* ---- threads: clones and one shared handle evaluated from 4 threads at once -------------- */

enum { kThreads = 4, kCalls = 25, kSteps = 3 };

struct job {
  loom_model* model;
  const float* features;
  const float* expected;
  int64_t expected_count;
  int mismatches;
};

static void* run_job(void* arg) {
  struct job* job = arg;
  const int64_t dim[1] = {784}, lengths[1] = {kSteps};
  const char* names[1] = {"features"};
  const char* ol_z[1] = {"ol.z"};
  loom_value *in = NULL, *out[1] = {NULL};
  float* got;
  int64_t n;
  int call;
  for (call = 0; call < kCalls; ++call) {
    OK(loom_value_create_dense_sequences(LOOM_FLOAT32, dim, 1, 1, lengths, job->features,
                                         kSteps * 784, &in));
    OK(loom_model_evaluate(job->model, 1, names, &in, 1, ol_z, out));
    got = read_value(out[0], &n);
    if (n != job->expected_count || memcmp(got, job->expected, (size_t)n * sizeof(float)) != 0)
      ++job->mismatches;
    free(got);
    OK(loom_value_free(out[0]));
    OK(loom_value_free(in));
  }
  return NULL;
}

static void test_threads(void) {
  const char* names[2] = {"features", "labels"};
  float *features[kThreads], *expected[kThreads], labels[kSteps * 10] = {0};
  const float* data[2];
  const int64_t lengths[1] = {kSteps};
  struct job jobs[kThreads];
  pthread_t threads[kThreads];
  loom_model* shared = load(kMnist);
  int t;

  for (t = 0; t < kThreads; ++t) {
    features[t] = floats(kSteps * 784);
    expected[t] = floats(kSteps * 10);
    fill(features[t], kSteps * 784, 10u + (unsigned)t);
    data[0] = features[t];
    data[1] = labels;
    jobs[t].expected_count =
        reference_dense(kMnist, 2, names, data, 1, lengths, "ol.z", expected[t], kSteps * 10);
    CHECK(jobs[t].expected_count == kSteps * 10, "the reference ran");
    jobs[t].features = features[t];
    jobs[t].expected = expected[t];
    jobs[t].mismatches = 0;
    /* Threads 0 and 1 evaluate clones, 2 and 3 the shared handle itself. */
    jobs[t].model = shared;
    if (t < 2) OK(loom_model_clone(shared, &jobs[t].model));
  }
  for (t = 0; t < kThreads; ++t)
    CHECK(pthread_create(&threads[t], NULL, run_job, &jobs[t]) == 0, "pthread_create");
  for (t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
  for (t = 0; t < kThreads; ++t) CHECK(jobs[t].mismatches == 0, "every call gives the reference");
  /* A clone outlives the handle it was made from. */
  OK(loom_model_free(shared));
  jobs[0].mismatches = 0;
  run_job(&jobs[0]);
  CHECK(jobs[0].mismatches == 0, "a clone after its original is freed");
  OK(loom_model_free(jobs[0].model));
  OK(loom_model_free(jobs[1].model));
  for (t = 0; t < kThreads; ++t) {
    free(features[t]);
    free(expected[t]);
  }
}

/* ---- errors: every bad input is a status and a message ---------------------------------- */

static void test_errors(const char* work_dir) {
  const int64_t sample[1] = {3}, wrong_sample[1] = {5}, lengths[2] = {2, 0}, minus[1] = {-2};
  const int64_t too_big[1] = {7}, bad_index[1] = {3};
  const char* names[1] = {"features"};
  const char* wrong_name[1] = {"feature"};
  const char* wrong_output[1] = {"score"};
  const char* twice[2] = {"features", "features"};
  const int32_t bad_offsets[3] = {0, 2, 1}, columns[2] = {0, 1};
  const float values[2] = {1, 1};
  float data[6] = {1, 2, 3, 4, 5, 6}, small[1];
  char damaged_path[4096];
  void* bytes;
  int64_t size;
  loom_model *model = load(g_loom_model), *freed = NULL, *none = NULL;
  loom_value *in = NULL, *wrong = NULL, *out[2] = {NULL, NULL}, *twin[2];
  const char* name = NULL;
  int64_t count = 0;
  FILE* f;

  /* Files. */
  FAILS(loom_model_load(MODELS "no_such_model.dnn", &none), LOOM_STATUS_IO_ERROR,
        "no_such_model.dnn");
  snprintf(damaged_path, sizeof damaged_path, "%s/damaged.loom", work_dir);
  f = fopen(damaged_path, "wb");
  CHECK(f != NULL, "the damaged file opens");
  if (f) {
    fputs("LOOM\x01 this is not a model file, only its first bytes look like one", f);
    fclose(f);
  }
  FAILS(loom_model_load(damaged_path, &none), LOOM_STATUS_DATA_ERROR, "damaged.loom");
  FAILS(loom_model_load_from_bytes("\x08\x01\x12garbage", 10, &none), LOOM_STATUS_DATA_ERROR,
        "not a CNTK v2 model");
  bytes = read_file(g_loom_model, &size); /* a Loom model cut off half-way */
  FAILS(loom_model_load_from_bytes(bytes, size / 2, &none), LOOM_STATUS_DATA_ERROR, "<memory>");
  free(bytes);
  FAILS(loom_model_load(NULL, &none), LOOM_STATUS_ARGUMENT_ERROR, "path is NULL");
  FAILS(loom_model_load(g_loom_model, NULL), LOOM_STATUS_ARGUMENT_ERROR, "model");
  FAILS(loom_model_load_from_bytes(NULL, 5, &none), LOOM_STATUS_ARGUMENT_ERROR, "bytes is NULL");
  FAILS(loom_model_load_from_bytes(data, -1, &none), LOOM_STATUS_ARGUMENT_ERROR, "negative");
  CHECK(none == NULL, "a failed load returns no handle");

  /* Values. */
  OK(loom_value_create_dense(LOOM_FLOAT32, sample, 1, 2, data, 6, &in));
  FAILS(loom_value_create_dense(LOOM_FLOAT32, sample, 1, 2, data, 5, &wrong),
        LOOM_STATUS_SHAPE_ERROR, "data_count is 5");
  FAILS(loom_value_create_dense(7, sample, 1, 2, data, 6, &wrong), LOOM_STATUS_ARGUMENT_ERROR,
        "data type 7");
  FAILS(loom_value_create_dense(LOOM_FLOAT32, NULL, 1, 2, data, 6, &wrong),
        LOOM_STATUS_ARGUMENT_ERROR, "sample_shape is NULL");
  FAILS(loom_value_create_dense(LOOM_FLOAT32, minus, 1, 2, data, 6, &wrong),
        LOOM_STATUS_ARGUMENT_ERROR, "sample dimension is -2");
  FAILS(loom_value_create_dense(LOOM_FLOAT32, sample, 1, 0, data, 0, &wrong),
        LOOM_STATUS_ARGUMENT_ERROR, "num_samples is 0");
  FAILS(loom_value_create_dense(LOOM_FLOAT32, sample, 1, 2, NULL, 6, &wrong),
        LOOM_STATUS_ARGUMENT_ERROR, "data is NULL");
  FAILS(loom_value_create_dense(LOOM_FLOAT32, sample, 1, 2, data, 6, NULL),
        LOOM_STATUS_ARGUMENT_ERROR, "value (an out-parameter) is NULL");
  FAILS(loom_value_create_dense_sequences(LOOM_FLOAT32, sample, 1, 2, lengths, data, 6, &wrong),
        LOOM_STATUS_ARGUMENT_ERROR, "sequence 1 has length 0");
  FAILS(loom_value_create_one_hot(LOOM_FLOAT32, 3, 1, too_big, &wrong), LOOM_STATUS_ARGUMENT_ERROR,
        "index 7 is out of range");
  FAILS(loom_value_create_one_hot(LOOM_FLOAT32, 3, 1, minus, &wrong), LOOM_STATUS_ARGUMENT_ERROR,
        "indices[0] is -2");
  FAILS(
      loom_value_create_csr(LOOM_FLOAT32, sample, 1, 2, bad_offsets, 3, columns, values, 1, &wrong),
      LOOM_STATUS_SHAPE_ERROR, "row offsets");
  FAILS(
      loom_value_create_csr(LOOM_FLOAT32, sample, 1, 2, bad_offsets, 2, columns, values, 2, &wrong),
      LOOM_STATUS_SHAPE_ERROR, "2 row offsets for 2 rows");
  FAILS(
      loom_value_create_csr(LOOM_FLOAT32, sample, 0, 2, bad_offsets, 3, columns, values, 2, &wrong),
      LOOM_STATUS_SHAPE_ERROR, "needs at least one axis");
  CHECK(wrong == NULL, "a failed create returns no handle");

  /* Evaluation. */
  FAILS(loom_model_evaluate(model, 1, wrong_name, &in, 2, NULL, out), LOOM_STATUS_ARGUMENT_ERROR,
        "no argument named 'feature'; its arguments are: features");
  FAILS(loom_model_evaluate(model, 1, names, &in, 1, wrong_output, out), LOOM_STATUS_ARGUMENT_ERROR,
        "no output named 'score'");
  FAILS(loom_model_evaluate(model, 0, NULL, NULL, 2, NULL, out), LOOM_STATUS_ARGUMENT_ERROR,
        "no value given for input");
  FAILS(loom_model_evaluate(model, 1, names, &in, 1, NULL, out), LOOM_STATUS_ARGUMENT_ERROR,
        "num_outputs is 1 but the model has 2 outputs");
  FAILS(loom_model_evaluate(model, 1, names, &in, 2, NULL, NULL), LOOM_STATUS_ARGUMENT_ERROR,
        "outputs");
  FAILS(loom_model_evaluate(model, 1, names, &in, 0, wrong_output, out), LOOM_STATUS_ARGUMENT_ERROR,
        "num_outputs is 0: choose at least one output");
  FAILS(loom_model_evaluate_by_index(model, 1, bad_index, &in, 2, NULL, out),
        LOOM_STATUS_ARGUMENT_ERROR, "argument index 3 is out of range: the model has 1 argument");
  twin[0] = in;
  twin[1] = in;
  FAILS(loom_model_evaluate(model, 2, twice, twin, 2, NULL, out), LOOM_STATUS_ARGUMENT_ERROR,
        "given twice");
  OK(loom_value_create_dense(LOOM_FLOAT32, wrong_sample, 1, 1, data, 5, &wrong));
  FAILS(loom_model_evaluate(model, 1, names, &wrong, 2, NULL, out), LOOM_STATUS_SHAPE_ERROR,
        "features");
  OK(loom_value_free(wrong));
  OK(loom_value_create_dense(LOOM_FLOAT64, sample, 1, 1, (const double[]){1, 2, 3}, 3, &wrong));
  FAILS(loom_model_evaluate(model, 1, names, &wrong, 2, NULL, out), LOOM_STATUS_SHAPE_ERROR,
        "float64");
  FAILS(loom_model_variable_name(model, LOOM_OUTPUT, 2, &name), LOOM_STATUS_ARGUMENT_ERROR,
        "output index 2 is out of range: the model has 2 outputs");
  FAILS(loom_model_variable_name(model, 5, 0, &name), LOOM_STATUS_ARGUMENT_ERROR,
        "variable kind 5");
  CHECK(out[0] == NULL && out[1] == NULL, "a failed evaluate returns no values");

  /* Reading values. */
  FAILS(loom_value_copy_data(in, LOOM_FLOAT32, small, 1), LOOM_STATUS_ARGUMENT_ERROR,
        "capacity 1 is less than the value's 6 elements");
  FAILS(loom_value_sample_shape(in, NULL, 1), LOOM_STATUS_ARGUMENT_ERROR, "dims is NULL");

  /* Handles: NULL, the wrong type, freed, freed twice. */
  FAILS(loom_model_variable_count(NULL, LOOM_ARGUMENT, &count), LOOM_STATUS_INVALID_HANDLE,
        "model is NULL");
  FAILS(loom_model_variable_count((const loom_model*)in, LOOM_ARGUMENT, &count),
        LOOM_STATUS_INVALID_HANDLE, "is a loom_value, not a loom_model");
  FAILS(loom_value_free((loom_value*)model), LOOM_STATUS_INVALID_HANDLE,
        "is a loom_model, not a loom_value");
  OK(loom_model_clone(model, &freed));
  OK(loom_model_free(freed));
  FAILS(loom_model_evaluate(freed, 1, names, &in, 2, NULL, out), LOOM_STATUS_INVALID_HANDLE,
        "freed");
  FAILS(loom_model_free(freed), LOOM_STATUS_INVALID_HANDLE, "already freed");
  FAILS(loom_model_free(NULL), LOOM_STATUS_INVALID_HANDLE, "model is NULL");
  OK(loom_value_free(wrong));
  FAILS(loom_model_evaluate(model, 1, names, &wrong, 2, NULL, out), LOOM_STATUS_INVALID_HANDLE,
        "an input value");
  FAILS(loom_value_element_count(wrong, &count), LOOM_STATUS_INVALID_HANDLE, "freed");
  FAILS(loom_value_free(wrong), LOOM_STATUS_INVALID_HANDLE, "already freed");

  /* A failure leaves the handles working, and success leaves the last message. */
  OK(loom_model_evaluate(model, 1, names, &in, 2, NULL, out));
  CHECK(loom_last_error_status() == LOOM_STATUS_INVALID_HANDLE, "success keeps the last status");
  OK(loom_value_free(out[0]));
  OK(loom_value_free(out[1]));
  OK(loom_value_free(in));
  OK(loom_model_free(model));
}

int main(int argc, char** argv) {
  const char* test = argc == 3 ? argv[1] : "";
  if (argc != 3) {
    fprintf(stderr, "usage: c_api_test info|dense|sequences|sparse|threads|errors WORK_DIR\n");
    return 2;
  }
  mkdir(argv[2], 0777);
  snprintf(g_loom_model, sizeof g_loom_model, "%s/dense.loom", argv[2]);
  snprintf(g_onnx_model, sizeof g_onnx_model, "%s/dense.onnx", argv[2]);
  if (reference_save_model(g_loom_model, g_onnx_model) != 0) return 1;
  if (strcmp(test, "info") == 0) {
    test_info();
  } else if (strcmp(test, "dense") == 0) {
    test_dense();
  } else if (strcmp(test, "sequences") == 0) {
    test_sequences();
  } else if (strcmp(test, "sparse") == 0) {
    test_sparse();
  } else if (strcmp(test, "threads") == 0) {
    test_threads();
  } else if (strcmp(test, "errors") == 0) {
    test_errors(argv[2]);
  } else {
    fprintf(stderr, "unknown case %s\n", test);
    return 2;
  }
  printf("%s: %d failure(s)\n", test, g_failures);
  return g_failures == 0 ? 0 : 1;
}
