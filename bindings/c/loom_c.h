/* Loom's C API: load a model and evaluate it from C, or from any language that calls C
 * (C# over P/Invoke, Java over JNI, Python over ctypes). docs/c-api.md is the full contract.
 *
 * Stability. LOOM_C_API_VERSION names this header's ABI; loom_c_api_version() returns the one
 * the library was built with. Within a version functions are only ever added: no signature,
 * enum value or flag bit changes. Every object is an opaque handle, so no struct's layout is
 * part of the ABI.
 *
 * Conventions.
 * - Every function that can fail returns a loom_status; LOOM_OK (0) is success. On failure
 *   loom_last_error_message() gives this thread's message saying what was wrong; out-parameters
 *   are left unchanged.
 * - Strings are NUL-terminated UTF-8.
 * - Counts, sizes, dimensions and indices are int64_t (Java has no unsigned types); negative
 *   ones are rejected. CSR row offsets and column indices are int32_t, as Loom stores them.
 * - Shapes are in Loom's order, row-major (numpy's): the LAST axis is the contiguous one. This
 *   is the reverse of CNTK's C and C# APIs (column-major): CNTK's [784] stays [784], its
 *   [28 x 28 x 1] (W x H x C) is Loom's [1, 28, 28].
 * - Ownership: a handle returned through an out-parameter belongs to the caller, who frees it
 *   with the free function its type names (loom_model_free, loom_value_free). Pointers a
 *   function returns into a handle (names, data) stay valid until that handle is freed.
 * - Handles are checked: NULL, a freed handle or something that is not a handle gives
 *   LOOM_STATUS_INVALID_HANDLE, never a crash; freeing twice gives it too.
 * - Threads: a loom_model may be evaluated from many threads at once. A loom_value may be read
 *   from many threads at once; freeing it while another thread uses it is the caller's error.
 */
#ifndef LOOM_C_H
#define LOOM_C_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define LOOM_C_EXPORT __attribute__((visibility("default")))
#else
#define LOOM_C_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_C_API_VERSION 1

/* ---- Status ---------------------------------------------------------------------------- */

typedef int32_t loom_status;
enum {
  LOOM_OK = 0,
  /* A bad argument: a null pointer, a negative count, an unknown argument or output name, an
   * index out of range, an unknown data type. */
  LOOM_STATUS_ARGUMENT_ERROR = 1,
  /* Data that do not fit: a shape, size, data type or dynamic-axis mismatch. */
  LOOM_STATUS_SHAPE_ERROR = 2,
  /* A damaged, truncated or foreign model file (or bytes). */
  LOOM_STATUS_DATA_ERROR = 3,
  /* A file that cannot be opened or read (e.g. it does not exist). */
  LOOM_STATUS_IO_ERROR = 4,
  /* NULL, freed or foreign handle. */
  LOOM_STATUS_INVALID_HANDLE = 5,
  LOOM_STATUS_OUT_OF_MEMORY = 6,
  /* A bug in Loom or an unexpected exception: the message says what happened. */
  LOOM_STATUS_INTERNAL_ERROR = 7,
  /* A model that cannot do what was asked (e.g. a graph with an unbound placeholder). */
  LOOM_STATUS_STATE_ERROR = 8
};

/* The message of the last call that failed on the calling thread ("" if none has). Valid until
 * the next failing call on this thread; a successful call leaves it as it is. Never NULL. */
LOOM_C_EXPORT const char* loom_last_error_message(void);
/* The status of that call (LOOM_OK if none has failed on this thread). */
LOOM_C_EXPORT loom_status loom_last_error_status(void);
/* A constant name for a status, e.g. "LOOM_STATUS_IO_ERROR"; "unknown" for other values. */
LOOM_C_EXPORT const char* loom_status_name(loom_status status);

/* ---- Version --------------------------------------------------------------------------- */

/* The LOOM_C_API_VERSION the library was built with: a caller compiled against another
 * version should refuse to run. */
LOOM_C_EXPORT int32_t loom_c_api_version(void);
/* Loom's release, e.g. "0.1.0". */
LOOM_C_EXPORT const char* loom_version(void);

/* ---- Types ------------------------------------------------------------------------------ */

typedef int32_t loom_dtype;
enum { LOOM_FLOAT32 = 1, LOOM_FLOAT64 = 2 };

/* Which of a model's variable lists an index refers to. LOOM_NODE: the output of every function
 * of the model's graph (the model's outputs among them), in the order of CNTK's depth-first walk
 * from the outputs (each function before its inputs); each is named as the function computing
 * it, which is what CNTK's FindByName matched. loom_model_evaluate takes their names or uids as
 * outputs (CNTK's evaluation of an intermediate layer). */
typedef int32_t loom_variable_kind;
enum { LOOM_ARGUMENT = 0, LOOM_OUTPUT = 1, LOOM_NODE = 2 };

/* Bits of loom_model_variable_flags and loom_value_flags. */
enum {
  LOOM_FLAG_SPARSE = 1,       /* takes / holds sparse (CSR) data */
  LOOM_FLAG_BATCH_AXIS = 2,   /* has a batch axis: data are N samples or sequences */
  LOOM_FLAG_SEQUENCE_AXIS = 4 /* has a sequence axis: data are sequences of steps */
};

/* Dimensions a variable's shape may hold instead of a size. */
#define LOOM_DIM_INFERRED ((int64_t)-1) /* not known until the model first runs */
#define LOOM_DIM_FREE ((int64_t)-3)     /* given anew by each call's data */

/* The index one-hot data use for a zero vector (CNTK's ONE_HOT_SKIP). */
#define LOOM_ONE_HOT_SKIP ((int64_t)-1)

typedef struct loom_model loom_model; /* a loaded model: free with loom_model_free */
typedef struct loom_value loom_value; /* data in or out: free with loom_value_free */

/* ---- Models ---------------------------------------------------------------------------- */

/* Loads a model file: Loom's format, or a CNTK v1 or v2 model (detected by content; an ONNX
 * file's first bytes can look like CNTK v2's, so ONNX has loom_model_load_onnx).
 * LOOM_STATUS_IO_ERROR when it cannot be read, LOOM_STATUS_DATA_ERROR when it is damaged. */
LOOM_C_EXPORT loom_status loom_model_load(const char* path, loom_model** model);
/* The same from the bytes of a model file in memory (copied: the caller keeps them). */
LOOM_C_EXPORT loom_status loom_model_load_from_bytes(const void* bytes, int64_t size,
                                                     loom_model** model);
/* An ONNX model file (opset 13 and what docs/onnx.md lists), from a path or from memory.
 * An input whose first axis the file fixes takes it as the batch axis. */
LOOM_C_EXPORT loom_status loom_model_load_onnx(const char* path, loom_model** model);
LOOM_C_EXPORT loom_status loom_model_load_onnx_from_bytes(const void* bytes, int64_t size,
                                                          loom_model** model);
/* Another handle to the same model for another thread: it shares the graph, the parameters
 * and the evaluation state (CNTK's Clone(ParameterCloningMethod::Share)). Each handle is freed
 * on its own; the model goes when the last one is freed. (Evaluating one handle from many
 * threads is safe as well.) */
LOOM_C_EXPORT loom_status loom_model_clone(const loom_model* model, loom_model** clone);
/* Frees a model handle. LOOM_STATUS_INVALID_HANDLE for NULL or one already freed. */
LOOM_C_EXPORT loom_status loom_model_free(loom_model* model);

/* How many arguments (inputs), outputs or node outputs the model has; they are indexed
 * 0..count-1 in the model's order. */
LOOM_C_EXPORT loom_status loom_model_variable_count(const loom_model* model,
                                                    loom_variable_kind kind, int64_t* count);
/* The index of the argument or output with this name, or, if no variable has that name, with
 * this uid. LOOM_STATUS_ARGUMENT_ERROR listing the names when none or several match. */
LOOM_C_EXPORT loom_status loom_model_variable_index(const loom_model* model,
                                                    loom_variable_kind kind, const char* name,
                                                    int64_t* index);
/* A variable's name ("" when it has none) and uid; the strings live as long as the handle. */
LOOM_C_EXPORT loom_status loom_model_variable_name(const loom_model* model, loom_variable_kind kind,
                                                   int64_t index, const char** name);
LOOM_C_EXPORT loom_status loom_model_variable_uid(const loom_model* model, loom_variable_kind kind,
                                                  int64_t index, const char** uid);
/* A variable's element type (LOOM_FLOAT32 or LOOM_FLOAT64). */
LOOM_C_EXPORT loom_status loom_model_variable_dtype(const loom_model* model,
                                                    loom_variable_kind kind, int64_t index,
                                                    loom_dtype* dtype);
/* LOOM_FLAG_* bits: sparse, has a batch axis, has a sequence axis. */
LOOM_C_EXPORT loom_status loom_model_variable_flags(const loom_model* model,
                                                    loom_variable_kind kind, int64_t index,
                                                    int32_t* flags);
/* The rank of a variable's sample shape (without its batch and sequence axes). */
LOOM_C_EXPORT loom_status loom_model_variable_rank(const loom_model* model, loom_variable_kind kind,
                                                   int64_t index, int64_t* rank);
/* The sample shape, row-major (Loom's order), into dims[0..rank-1]; capacity is dims' length
 * and must be at least the rank. A dimension may be LOOM_DIM_INFERRED or LOOM_DIM_FREE. */
LOOM_C_EXPORT loom_status loom_model_variable_shape(const loom_model* model,
                                                    loom_variable_kind kind, int64_t index,
                                                    int64_t* dims, int64_t capacity);

/* ---- Input values ------------------------------------------------------------------------
 * Each copies the caller's data: the caller may reuse its buffers as soon as the call returns.
 * sample_shape is row-major with sample_rank dimensions (rank 0: scalar samples). Data are
 * row-major, sample after sample; data_count is the number of elements data holds, which must
 * be exactly what the shape and counts need. */

/* A batch of num_samples dense samples (a value for an argument without a sequence axis). */
LOOM_C_EXPORT loom_status loom_value_create_dense(loom_dtype dtype, const int64_t* sample_shape,
                                                  int64_t sample_rank, int64_t num_samples,
                                                  const void* data, int64_t data_count,
                                                  loom_value** value);
/* num_sequences dense sequences; sequence i has lengths[i] steps (samples); the steps of all
 * sequences are packed one after another: sum(lengths) samples in all. */
LOOM_C_EXPORT loom_status loom_value_create_dense_sequences(
    loom_dtype dtype, const int64_t* sample_shape, int64_t sample_rank, int64_t num_sequences,
    const int64_t* lengths, const void* data, int64_t data_count, loom_value** value);
/* num_samples one-hot vectors of dimension dim: indices[i] is sample i's hot position
 * (LOOM_ONE_HOT_SKIP: all zero). The value is sparse. */
LOOM_C_EXPORT loom_status loom_value_create_one_hot(loom_dtype dtype, int64_t dim,
                                                    int64_t num_samples, const int64_t* indices,
                                                    loom_value** value);
/* num_sequences sequences of one-hot vectors: sum(lengths) indices packed one after another. */
LOOM_C_EXPORT loom_status loom_value_create_one_hot_sequences(loom_dtype dtype, int64_t dim,
                                                              int64_t num_sequences,
                                                              const int64_t* lengths,
                                                              const int64_t* indices,
                                                              loom_value** value);
/* Sparse CSR samples. The matrix has one row per sample and per index of the sample shape's
 * axes but the last (a [dim] sample is one row), and the last axis' size as columns:
 * rows = num_samples * (product of all but the last dimension). row_offsets has rows + 1
 * entries starting at 0 and not decreasing; col_indices and values hold nnz =
 * row_offsets[rows] entries each, values of dtype. */
LOOM_C_EXPORT loom_status loom_value_create_csr(loom_dtype dtype, const int64_t* sample_shape,
                                                int64_t sample_rank, int64_t num_samples,
                                                const int32_t* row_offsets, int64_t num_offsets,
                                                const int32_t* col_indices, const void* values,
                                                int64_t nnz, loom_value** value);
/* Sparse CSR sequences: the same with sum(lengths) steps packed one after another in place of
 * num_samples samples. */
LOOM_C_EXPORT loom_status loom_value_create_csr_sequences(
    loom_dtype dtype, const int64_t* sample_shape, int64_t sample_rank, int64_t num_sequences,
    const int64_t* lengths, const int32_t* row_offsets, int64_t num_offsets,
    const int32_t* col_indices, const void* values, int64_t nnz, loom_value** value);

/* ---- Evaluation ------------------------------------------------------------------------ */

/* Evaluates the model (inference mode). Thread safe: many threads may evaluate one model.
 * Inputs: num_inputs pairs of an argument name (or uid, as loom_model_variable_index) and a
 * value; every argument the chosen outputs need must have one (others are ignored). Outputs:
 * output_names chooses num_outputs (at least 1) outputs by name (or uid): the model's outputs,
 * else the outputs of the functions of its graph (LOOM_NODE); with output_names NULL, every
 * output in the model's order, and num_outputs must be the model's output count.
 * Only what the chosen outputs need is computed. outputs is the caller's array of num_outputs
 * pointers, each set to a new value the caller frees with loom_value_free. On failure no value
 * is returned. */
LOOM_C_EXPORT loom_status loom_model_evaluate(const loom_model* model, int64_t num_inputs,
                                              const char* const* input_names,
                                              loom_value* const* inputs, int64_t num_outputs,
                                              const char* const* output_names,
                                              loom_value** outputs);
/* The same with arguments and outputs chosen by index (0..count-1 in the model's order);
 * output_indices NULL: every output. */
LOOM_C_EXPORT loom_status loom_model_evaluate_by_index(const loom_model* model, int64_t num_inputs,
                                                       const int64_t* input_indices,
                                                       loom_value* const* inputs,
                                                       int64_t num_outputs,
                                                       const int64_t* output_indices,
                                                       loom_value** outputs);
/* The same with the outputs chosen among the node outputs (LOOM_NODE indices, at least one). */
LOOM_C_EXPORT loom_status loom_model_evaluate_nodes(const loom_model* model, int64_t num_inputs,
                                                    const int64_t* input_indices,
                                                    loom_value* const* inputs, int64_t num_outputs,
                                                    const int64_t* node_indices,
                                                    loom_value** outputs);

/* ---- Reading values ---------------------------------------------------------------------
 * A value is num_sequences sequences (or samples) of steps of one sample shape. Its data, as
 * loom_value_data and loom_value_copy_data give them, are dense and packed: the steps of all
 * sequences one after another, each sample row-major, no padding: element_count = sum(lengths)
 * * product(sample shape). */

LOOM_C_EXPORT loom_status loom_value_dtype(const loom_value* value, loom_dtype* dtype);
/* LOOM_FLAG_SPARSE and LOOM_FLAG_SEQUENCE_AXIS as they apply (LOOM_FLAG_BATCH_AXIS always). */
LOOM_C_EXPORT loom_status loom_value_flags(const loom_value* value, int32_t* flags);
LOOM_C_EXPORT loom_status loom_value_sample_rank(const loom_value* value, int64_t* rank);
/* The sample shape, row-major, into dims[0..rank-1] (capacity: dims' length). */
LOOM_C_EXPORT loom_status loom_value_sample_shape(const loom_value* value, int64_t* dims,
                                                  int64_t capacity);
/* The number of sequences, or of samples for a value without a sequence axis. */
LOOM_C_EXPORT loom_status loom_value_num_sequences(const loom_value* value, int64_t* num_sequences);
/* Each sequence's length in steps into lengths[0..num_sequences-1] (1 each for samples). */
LOOM_C_EXPORT loom_status loom_value_sequence_lengths(const loom_value* value, int64_t* lengths,
                                                      int64_t capacity);
/* The number of elements of the packed data. */
LOOM_C_EXPORT loom_status loom_value_element_count(const loom_value* value, int64_t* count);
/* The packed data, of the value's dtype, valid until the value is freed (sparse values are
 * densified once). */
LOOM_C_EXPORT loom_status loom_value_data(const loom_value* value, const void** data);
/* Copies the packed data into buffer as dtype (converting float32 <-> float64 if the value's
 * type differs); capacity is the number of dtype elements buffer holds, at least
 * element_count. */
LOOM_C_EXPORT loom_status loom_value_copy_data(const loom_value* value, loom_dtype dtype,
                                               void* buffer, int64_t capacity);
/* Frees a value (an input one made or an output evaluate returned). LOOM_STATUS_INVALID_HANDLE
 * for NULL or one already freed. */
LOOM_C_EXPORT loom_status loom_value_free(loom_value* value);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_C_H */
