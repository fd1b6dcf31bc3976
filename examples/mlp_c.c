/* Runs the demo MLP (x f32[batch,16] -> y f32[batch,4], softmax rows) through
 * the C ABI at two batch sizes, prints y and checks every row sums to 1.
 *
 *   example_c mlp.grove
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "grove/grove_c.h"

enum { kFeatures = 16, kClasses = 4, kMaxBatch = 3 };

/* Prints and frees a failed status; returns 1 if there was one. */
static int failed(grove_status_t* status, const char* what) {
  if (status == NULL) return 0;
  fprintf(stderr, "%s: %s (%s)\n", what, grove_status_message(status),
          grove_status_code_name(grove_status_code(status)));
  grove_status_release(status);
  return 1;
}

/* Runs one batch and checks the softmax rows; 0 on success. With
 * `into_own_buffer` the result is written into this function's array by
 * grove_session_run_into; otherwise the session lends its own memory. */
static int run_batch(grove_session_t* session, int batch, int into_own_buffer) {
  float x[kMaxBatch * kFeatures];
  float y[kMaxBatch * kClasses];
  grove_tensor_t input = {0};
  grove_tensor_t output = {0};
  int r, c, bad = 0;

  /* Deterministic inputs, so every run of this example prints the same. */
  for (r = 0; r < batch * kFeatures; ++r) x[r] = sinf(0.37f * (float)r);

  input.dtype = GROVE_DTYPE_F32;
  input.rank = 2;
  input.dims[0] = batch;
  input.dims[1] = kFeatures;
  input.data = x;
  input.byte_size = sizeof(float) * (size_t)(batch * kFeatures);

  if (into_own_buffer) {
    /* Our buffer: its dtype, rank and dims must be the result's, byte_size
     * must hold it. On a CUDA session it may also be device memory. */
    output.dtype = GROVE_DTYPE_F32;
    output.rank = 2;
    output.dims[0] = batch;
    output.dims[1] = kClasses;
    output.data = y;
    output.byte_size = sizeof(y);
    if (failed(grove_session_run_into(session, &input, 1, &output, 1), "run_into")) return 1;
  } else {
    /* output.data == NULL: the session fills `output` with a pointer into
     * its own memory, valid until the next run on this session. */
    if (failed(grove_session_run(session, &input, 1, &output, 1), "run")) return 1;
  }
  if (output.dtype != GROVE_DTYPE_F32 || output.rank != 2 || output.dims[0] != batch ||
      output.dims[1] != kClasses) {
    fprintf(stderr, "unexpected output at batch %d\n", batch);
    return 1;
  }

  printf("batch %d:\n", batch);
  for (r = 0; r < batch; ++r) {
    const float* row = (const float*)output.data + r * kClasses;
    float sum = 0;
    printf("  y[%d] =", r);
    for (c = 0; c < kClasses; ++c) {
      printf(" %.5f", row[c]);
      sum += row[c];
    }
    printf("   (sum %.5f)\n", sum);
    if (fabsf(sum - 1.0f) > 1e-4f) bad = 1;
  }
  return bad;
}

int main(int argc, char** argv) {
  grove_model_t* model = NULL;
  grove_session_t* session = NULL;
  grove_session_options_t options;
  /* Versioned structs carry their size, so this program keeps working with
   * a newer library (see "Versioned structs" in grove_c.h). */
  grove_session_stats_t stats = GROVE_SESSION_STATS_INIT;
  int bad = 0;

  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL.grove\n", argv[0]);
    return 2;
  }
  printf("grove %s\n", grove_version());

  /* A model is immutable and may be shared by sessions on many threads. */
  if (failed(grove_model_load_file(argv[1], &model), argv[1])) return 1;

  /* Start from the defaults: this sets options.struct_size, so a newer
   * library gives the fields this program does not know their defaults. */
  grove_session_options_initialize(&options);
  options.device = GROVE_DEVICE_CPU;
  if (failed(grove_session_create(model, &options, &session), "session")) {
    grove_model_release(model);
    return 1;
  }
  /* The session keeps the model alive; we no longer need our handle. */
  grove_model_release(model);

  /* One session serves every batch size the model's "batch" symbol allows. */
  bad |= run_batch(session, 1, /*into_own_buffer=*/0);
  bad |= run_batch(session, 3, /*into_own_buffer=*/1);

  if (failed(grove_session_stats(session, &stats), "stats")) {
    bad = 1;
  } else {
    printf("runs %lld, plans created %lld, CPU fallback steps %lld\n", (long long)stats.runs,
           (long long)stats.plans_created, (long long)stats.cpu_fallback_steps);
  }
  grove_session_release(session);

  if (bad) {
    fprintf(stderr, "FAILED\n");
    return 1;
  }
  printf("OK\n");
  return 0;
}
