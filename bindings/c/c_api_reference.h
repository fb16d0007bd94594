/* The C API tests' references: the same evaluations through Loom's C++ ModelRunner, linked
 * into the test program beside libloom_c (each with its own copy of Loom). */
#ifndef LOOM_C_API_REFERENCE_H
#define LOOM_C_API_REFERENCE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes a small model in Loom's format to path and as ONNX to onnx_path: "features" [3] ->
 * Dense(4, relu) -> Dense(2) ("scores"), with the hidden layer's output ("hidden") as a second
 * output. 0 on success, else -1 (printing why). */
int reference_save_model(const char* path, const char* onnx_path);

/* Evaluates the model file at path with ModelRunner on float32 dense inputs: names[i] gets
 * data[i], num_sequences sequences of lengths (lengths NULL: num_sequences samples). Copies
 * the output named output (or with that uid) (all sequences' steps back to back) into out. Returns
 * the number of elements, or -1 (printing why). */
int64_t reference_dense(const char* path, int64_t num_inputs, const char* const* names,
                        const float* const* data, int64_t num_sequences, const int64_t* lengths,
                        const char* output, float* out, int64_t capacity);

/* The same with one sparse one-hot sequence input of dimension dim (sum(lengths) indices). */
int64_t reference_one_hot(const char* path, const char* argument, int64_t dim,
                          int64_t num_sequences, const int64_t* lengths, const int64_t* indices,
                          const char* output, float* out, int64_t capacity);

#ifdef __cplusplus
}
#endif

#endif
