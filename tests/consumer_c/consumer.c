/* A C program built against an installed Loom's C API alone (loom_c.h, -lloom_c): loads the
 * model file given (CNTK's v2_load_and_eval.dnn: Abs of a sequence of [1,2] samples),
 * evaluates it on one sequence of two steps and prints the result. */
#include <loom_c.h>
#include <stdio.h>

static int failed(loom_status status) {
  if (status != LOOM_OK) fprintf(stderr, "%s\n", loom_last_error_message());
  return status != LOOM_OK;
}

int main(int argc, char** argv) {
  const int64_t sample[2] = {1, 2}, lengths[1] = {2};
  const float steps[4] = {-1.5f, 2.0f, 3.0f, -4.25f};
  float out[4];
  loom_model* model = NULL;
  loom_value *in = NULL, *abs[1] = {NULL};
  const char* name = NULL;
  int i;
  if (argc != 2 || loom_c_api_version() != LOOM_C_API_VERSION) return 2;
  if (failed(loom_model_load(argv[1], &model)) ||
      failed(loom_model_variable_name(model, LOOM_ARGUMENT, 0, &name)) ||
      failed(
          loom_value_create_dense_sequences(LOOM_FLOAT32, sample, 2, 1, lengths, steps, 4, &in)) ||
      failed(loom_model_evaluate(model, 1, &name, &in, 1, NULL, abs)) ||
      failed(loom_value_copy_data(abs[0], LOOM_FLOAT32, out, 4)))
    return 1;
  printf("%s:", name);
  for (i = 0; i < 4; ++i) printf(" %g", out[i]);
  printf("\n");
  return failed(loom_value_free(abs[0])) || failed(loom_value_free(in)) ||
         failed(loom_model_free(model));
}
